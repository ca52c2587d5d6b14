"""The few Linux system calls the launcher needs that Python 3.11's os module lacks (ctypes)."""

import ctypes
import fcntl
import os
import socket
import struct

libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
SYS_PIVOT_ROOT, SYS_MOUNT_SETATTR = 155, 442  # x86_64
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _b(s):
    return None if s is None else os.fsencode(s)


def unshare(flags: int) -> None:
    _check(libc.unshare(flags), "unshare")


def mount(src, dst, fstype=None, flags=0, data=None) -> None:
    _check(libc.mount(_b(src), _b(dst), _b(fstype), ctypes.c_ulong(flags), _b(data)), f"mount {src} on {dst}")


def umount(path, flags=0) -> None:
    _check(libc.umount2(_b(path), flags), f"umount {path}")


def set_recursive(path: str, attrs: int) -> None:
    """mount_setattr(AT_RECURSIVE): make a mount and everything under it read-only etc. at once."""
    attr = struct.pack("QQQQ", attrs, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    _check(libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, _b(path), AT_RECURSIVE, buf, len(attr)), f"mount_setattr {path}")


def pivot_root(new_root: str, put_old: str) -> None:
    _check(libc.syscall(SYS_PIVOT_ROOT, _b(new_root), _b(put_old)), "pivot_root")


def prctl(option: int, arg: int) -> None:
    _check(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), "prctl")


def loopback_up() -> None:
    """A new network namespace's lo starts down; apps (a browser's debugging port) want localhost."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", 0x1 | 0x40))  # SIOCSIFFLAGS: UP|RUNNING
