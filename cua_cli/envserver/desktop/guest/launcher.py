"""A desktop's launcher: started as root on the host, it builds the desktop's root file system, enters
new user/PID/mount/IPC/network/UTS namespaces, and forks the desktop's PID 1 (init below).

Why this order: the root file system is assembled while still root of the host (so it can bind the
Python under /root, and chown to the desktop's host uids), and only then is the user namespace
entered. Mounts carried into a less privileged user namespace are locked: desktop-root can neither
unmount them to see what they cover nor make a read-only one writable.

Protocol with the env server (the parent): the first line of stdin is a JSON config (not argv,
which every process of the desktop can read as PID 1's command line); cfg["ready_fd"] is the ready pipe, handed
down to the executor, which writes one line once it listens. On stdout the launcher prints
"unshared" (the server then writes the uid/gid maps) and waits for "go" on stdin; then "init PID".
When stdin reaches EOF (the server died or let go) the whole desktop is killed: init is the PID
namespace's init, and the kernel kills every process of a namespace whose init dies.
"""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import linux
import ports
import sudod

USER_UID = 1000  # the desktop's user, as on OSWorld's image
TOOLS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def make_disk(cfg: dict) -> tuple[str, str] | None:
    """The desktop's disk, if it has a size limit: an ext4 image of that size (sparse: the host pays
    only for what is written) mounted in this mount namespace alone, so its loop device is let go
    with the namespace. Returns the folders that become home and /tmp."""
    if not cfg.get("disk_bytes"):
        return None
    image, mnt, base = cfg["disk_image"], cfg["disk_dir"], cfg["uid_base"]
    with open(image, "wb") as f:
        f.truncate(cfg["disk_bytes"])
    tools = {"PATH": TOOLS_PATH}
    # -m 0: no blocks kept for root, so the user fills exactly the limit; lazy init keeps this ~30 ms.
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", image],
                   env=tools, check=True, stdout=subprocess.DEVNULL)
    os.makedirs(mnt)
    subprocess.run(["mount", "-t", "ext4", "-o", "loop,nosuid,nodev", image, mnt], env=tools, check=True)
    home, tmp = os.path.join(mnt, "home"), os.path.join(mnt, "tmp")
    os.mkdir(home, 0o700)
    os.chown(home, base + USER_UID, base + USER_UID)
    os.mkdir(tmp)
    os.chmod(tmp, 0o1777)
    os.chown(tmp, base, base)
    return home, tmp


def build_root(cfg: dict) -> None:
    """Assemble the desktop's / under cfg["root"]: host system dirs read-only, a private /tmp, /run,
    /dev and home, and the sudo shim over /usr/bin/sudo."""
    nr, base = cfg["root"], cfg["uid_base"]
    user = base + USER_UID
    disk = make_disk(cfg)
    home = disk[0] if disk else cfg["home"]
    desktop_dir = os.path.join(home, "Desktop")
    os.mkdir(desktop_dir)
    os.chown(desktop_dir, user, user)
    linux.mount("tmpfs", nr, "tmpfs", linux.MS_NOSUID, f"mode=755,uid={base},gid={base},size=64m")

    def path(p):
        return nr + p

    def bind(src, dst, ro=True, attrs=linux.MOUNT_ATTR_NOSUID | linux.MOUNT_ATTR_NODEV):
        if os.path.isdir(src):
            os.makedirs(path(dst), exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path(dst)), exist_ok=True)
            if not os.path.exists(path(dst)):
                open(path(dst), "w").close()
        linux.mount(src, path(dst), None, linux.MS_BIND | linux.MS_REC)
        linux.set_recursive(path(dst), (linux.MOUNT_ATTR_RDONLY if ro else 0) | attrs)

    for top in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):  # merged-/usr symlinks
        if os.path.islink("/" + top):
            os.symlink(os.readlink("/" + top), path("/" + top))
    os.makedirs(path("/sys"))  # init mounts the namespace's own sysfs (the host's lists host devices)
    for d in ("/usr", "/etc", "/opt", "/var/lib", "/var/cache"):
        if os.path.isdir(d):
            bind(d, d)
    # /tmp on the desktop's disk, as on a VM; without one, in RAM and bounded (tmpfs's default is half).
    # Mounted before the Python dirs are bound: a checkout under /tmp keeps its venv visible on top.
    if disk:
        bind(disk[1], "/tmp", ro=False)
    tmpfs = [("/run", "755", "64m")] + ([] if disk else [("/tmp", "1777", "2g")])
    for d, mode, size in tmpfs:
        os.makedirs(path(d))
        linux.mount("tmpfs", path(d), "tmpfs", linux.MS_NOSUID | linux.MS_NODEV,
                    f"mode={mode},uid={base},gid={base},size={size}")
    # exist_ok from here: the Python dirs bound below may live under /root, /home or /tmp.
    os.makedirs(path("/root"), exist_ok=True)  # desktop-root's; searchable, since the host's Python may live under it
    os.chmod(path("/root"), 0o711)
    os.chown(path("/root"), base, base)
    for d in cfg["python_dirs"]:  # the interpreter and the venv that hold pyautogui, at their own paths
        bind(d, d)
    bind(cfg["guest_dir"], "/cua")

    # /dev: a few device nodes, a private pty namespace (init mounts devpts), a private /dev/shm.
    os.makedirs(path("/dev"))
    linux.mount("tmpfs", path("/dev"), "tmpfs", linux.MS_NOSUID, "mode=755,size=64k")
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        bind("/dev/" + node, "/dev/" + node, ro=False, attrs=linux.MOUNT_ATTR_NOSUID)
    for d in ("pts", "shm"):
        os.makedirs(path("/dev/" + d))
    linux.mount("tmpfs", path("/dev/shm"), "tmpfs", linux.MS_NOSUID | linux.MS_NODEV,
                f"mode=1777,uid={base},gid={base},size=1g")
    os.symlink("pts/ptmx", path("/dev/ptmx"))
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", path("/dev/" + name))
    os.symlink("/proc/self/fd", path("/dev/fd"))

    os.makedirs(path("/proc"))
    os.makedirs(path("/tmp/.X11-unix"), mode=0o1777)
    os.chmod(path("/tmp/.X11-unix"), 0o1777)
    os.makedirs(path("/run/user/1000"), mode=0o700)
    os.chown(path("/run/user/1000"), user, user)
    os.makedirs(path("/run/lock"))
    os.chmod(path("/run/lock"), 0o1777)
    bind(cfg["sock"], "/run/cua", ro=False)
    os.makedirs(path("/var/tmp"), exist_ok=True)
    os.chmod(path("/var/tmp"), 0o1777)
    os.symlink("../run", path("/var/run"))
    os.symlink("../run/lock", path("/var/lock"))
    os.makedirs(path("/home"), exist_ok=True)
    bind(home, "/home/user", ro=False)

    # Who the desktop's users are, and sudo that asks init instead of a setuid binary (the host's
    # setuid bit means nothing in a user namespace that does not map the host's root).
    etc = cfg["etc"]
    with open(os.path.join(etc, "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000:user:/home/user:/bin/bash\n"
                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    with open(os.path.join(etc, "group"), "w") as f:
        f.write("root:x:0:\ntty:x:5:\nsudo:x:27:user\nuser:x:1000:\nnogroup:x:65534:\n")
    with open(os.path.join(etc, "hostname"), "w") as f:
        f.write(cfg["hostname"] + "\n")
    with open(os.path.join(etc, "hosts"), "w") as f:
        f.write(f"127.0.0.1 localhost {cfg['hostname']}\n::1 localhost\n")
    for name in ("passwd", "group", "hostname", "hosts"):
        bind(os.path.join(etc, name), "/etc/" + name)
    bind(os.path.join(cfg["guest_dir"], "sudo.py"), "/usr/bin/sudo", attrs=linux.MOUNT_ATTR_NODEV)


DOCK = "dash-to-dock@micxgx.gmail.com"  # Debian's package of the dock Ubuntu's own is made from
SHELL_STARTED = "/run/user/1000/shell-started"  # written by cua's session@cua once the shell's startup is complete
UBUNTU = "/cua/ubuntu"  # what makes the desktop OSWorld's Ubuntu: its session mode, settings, apps by their names


def session_env(cfg: dict) -> dict:
    venv_bin = os.path.join(cfg["venv"], "bin")
    env = {
        "HOME": "/home/user", "USER": "user", "LOGNAME": "user", "SHELL": "/bin/bash",
        "PATH": f"{UBUNTU}/bin:{venv_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8", "DISPLAY": ":0", "XDG_RUNTIME_DIR": "/run/user/1000",
        "XDG_SESSION_TYPE": "x11", "XDG_CURRENT_DESKTOP": "openbox",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
    }
    if cfg["session"] == "gnome":  # as Ubuntu's session sets them
        env.update(XDG_CURRENT_DESKTOP="ubuntu:GNOME", XDG_SESSION_DESKTOP="ubuntu", DESKTOP_SESSION="ubuntu",
                   GNOME_SHELL_SESSION_MODE="ubuntu", XDG_DATA_DIRS=f"{UBUNTU}/share:/usr/local/share:/usr/share")
    if cfg.get("web"):  # the way out is the proxy (ports.py): every app that honours these, Chrome by its flag
        proxy = f"http://127.0.0.1:{ports.WEB_PORT}"
        env.update(http_proxy=proxy, https_proxy=proxy, HTTP_PROXY=proxy, HTTPS_PROXY=proxy,
                   no_proxy="localhost,127.0.0.1,::1", CUA_WEB_PROXY=proxy)
    return env


def _wait_connectable(path: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(path)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{path} does not accept connections")
        time.sleep(0.005)


def start_session(cfg: dict, log) -> None:
    """X, the session bus, the window manager, AT-SPI, then the executor (which says ready)."""
    env = session_env(cfg)
    as_user = {"user": USER_UID, "group": USER_UID, "extra_groups": [], "env": env, "cwd": "/home/user",
               "stdin": subprocess.DEVNULL, "stdout": log, "stderr": log}
    width, height = cfg["screen"]

    def started(argv, marker_flag):
        r, w = os.pipe()
        subprocess.Popen(argv + [marker_flag.format(w)], pass_fds=(w,), **as_user)
        os.close(w)
        with os.fdopen(r) as f:
            if not f.readline().strip():
                raise RuntimeError(f"{argv[0]} did not start")

    # -noreset: by default X resets when its last client leaves, and a client that connects during the
    # reset (openbox, while AT-SPI's launcher hangs up) fails to open the display.
    started(["Xvfb", ":0", "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp", "-noreset",
             "+extension", "GLX", "-displayfd"], "{}")
    _wait_connectable("/tmp/.X11-unix/X0")
    # Every key an agent (or a person on the live page) presses reaches X through XTest, whose keyboard
    # is a device of its own. On the first such key X switches its core keyboard to that device and
    # tells every client the keymap changed; the window manager then drops and retakes all its key
    # grabs, and a key arriving in between goes to no grab (a fresh GNOME desktop lost its first
    # Ctrl+Alt+T about one time in five on a busy host). One Shift through XTest before any client
    # is up makes that switch once, for good.
    subprocess.run(["xdotool", "key", "shift"], check=True, **as_user)
    started(["dbus-daemon", "--session", "--nofork", "--nopidfile",
             "--address=unix:path=/run/user/1000/bus"], "--print-address={}")
    if cfg["session"] == "gnome":
        start_gnome(as_user, log)
    else:
        subprocess.Popen(["openbox", "--sm-disable"], **as_user)
        subprocess.run(["gsettings", "set", "org.gnome.desktop.interface", "toolkit-accessibility", "true"],
                       check=False, **as_user)
        start_accessibility(as_user)
    subprocess.Popen([os.path.join(cfg["venv"], "bin", "python"), "/cua/executor.py"],
                     pass_fds=(cfg["ready_fd"],), **{**as_user, "env": {**env, "CUA_READY_FD": str(cfg["ready_fd"])}})
    os.close(cfg["ready_fd"])  # the executor holds the only copy: its death before "ready" is an EOF


def start_accessibility(as_user: dict) -> None:
    """AT-SPI's bus, once the settings say accessibility is on (it reads them as it starts, and apps such
    as Chrome show their widgets to it only then). A settings daemon that came up before it lost its
    keys (Ctrl+Alt+T) after the first accessibility read."""
    subprocess.Popen(["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"], **as_user)


def start_gnome(as_user: dict, log) -> None:
    """GNOME Shell as Ubuntu's session runs it on X11, without systemd or a display manager: a system
    bus of the desktop's own (the shell's indicators need one), the image's settings compiled into
    the user's dconf database, then the shell, then the settings daemons that turn keys into actions
    (media keys) and settings into what apps draw (text scaling)."""
    os.makedirs("/run/dbus", exist_ok=True)
    subprocess.Popen(["dbus-daemon", "--config-file", f"{UBUNTU}/system-bus.conf", "--nofork", "--nopidfile"],
                     stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    # A home that a session already used keeps its settings. The shell's one-time notice that the
    # screen cannot lock (no display manager) is marked as shown: the image's screen never locks.
    subprocess.run(["sh", "-c", "test -e ~/.config/dconf/user || { mkdir -p ~/.config/dconf ~/.local/share/gnome-shell"
                    f" && dconf compile ~/.config/dconf/user {UBUNTU}/dconf"
                    " && touch ~/.local/share/gnome-shell/lock-warning-shown; }"], check=True, **as_user)
    start_accessibility(as_user)  # before the shell and the settings daemons: they find its bus there
    subprocess.Popen(["gnome-shell", "--x11", "--mode=ubuntu"], **as_user)
    deadline = time.monotonic() + 150.0
    _wait_for_shell(as_user, deadline)
    for daemon in ("gsd-xsettings", "gsd-media-keys"):
        subprocess.Popen([f"/usr/libexec/{daemon}"], **as_user)
    # The keys media-keys turns into actions (volume, screenshots, ...) must work from an agent's first
    # action: it must be on the bus first (on a loaded host that took longer than a first key press).
    _wait_for_bus_name(as_user, "org.gnome.SettingsDaemon.MediaKeys", deadline)


def _wait_for_bus_name(as_user: dict, name: str, deadline: float) -> None:
    ask = ["gdbus", "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
           "--method", "org.freedesktop.DBus.NameHasOwner", name]
    while "true" not in subprocess.run(
            ask, **{**as_user, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}, text=True).stdout:
        if time.monotonic() > deadline:
            raise RuntimeError(f"GNOME's {name} did not start")
        time.sleep(0.05)


def _wait_for_shell(as_user: dict, deadline: float) -> None:
    """Until GNOME Shell's startup is complete with the extensions of Ubuntu's session enabled: the
    first screenshot shows the whole desktop, and keys work from the first action."""
    while not os.path.exists(SHELL_STARTED):
        if time.monotonic() > deadline:
            raise RuntimeError("GNOME Shell did not complete its startup")
        time.sleep(0.05)
    # session@cua wrote the file, so it is enabled; the dock is asked for (an extension that fails stays off)
    ask = ["gdbus", "call", "--session", "--dest", "org.gnome.Shell", "--object-path", "/org/gnome/Shell",
           "--method", "org.gnome.Shell.Extensions.GetExtensionInfo", DOCK]
    while "'state': <1.0>" not in subprocess.run(  # 1.0: ENABLED
            ask, **{**as_user, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}, text=True).stdout:
        if time.monotonic() > deadline:
            raise RuntimeError(f"GNOME Shell did not start with its extension {DOCK}")
        time.sleep(0.05)


def init_main(cfg: dict) -> None:
    """PID 1 of the desktop: finish the namespace's file system, start the session, reap orphans and
    answer sudo. Runs as desktop-root, a host uid with no power outside the desktop."""
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    # The working directory is the new root (the launcher went there as host root: the path to it
    # may cross directories desktop-root cannot search), so every path here is relative.
    linux.mount("proc", "proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
    linux.mount("sysfs", "sys", "sysfs", linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
    linux.mount("devpts", "dev/pts", "devpts", linux.MS_NOSUID | linux.MS_NOEXEC,
                "newinstance,ptmxmode=0666,mode=0620,gid=5")
    # pivot_root refuses a locked mount (the tmpfs came from the host's side): a recursive bind of
    # it onto itself is this namespace's own, and keeps everything under it locked.
    linux.mount(".", ".", None, linux.MS_BIND | linux.MS_REC)
    os.chdir("..")  # step onto the new mount: a lookup from the parent lands on the topmost one
    os.chdir(os.path.basename(cfg["root"]))
    linux.pivot_root(".", ".")
    linux.umount(".", linux.MNT_DETACH)  # the host's tree is gone from this namespace
    os.chdir("/")
    socket.sethostname(cfg["hostname"])
    linux.loopback_up()
    linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
    os.umask(0o022)
    log = open("/tmp/.session.log", "ab", buffering=0)  # noqa: SIM115 - the session's, for good
    os.chmod("/tmp/.session.log", 0o600)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    reaper = sudod.Reaper()
    threading.Thread(target=sudod.serve, args=(reaper, session_env(cfg)), daemon=True).start()
    start_session(cfg, log)
    reaper.run()


def main() -> None:
    cfg = json.loads(sys.stdin.readline())
    # No PR_SET_PDEATHSIG here: it fires when the server *thread* that started us ends. Our lifeline
    # is stdin, whose EOF means the server process let go or died.
    linux.unshare(linux.CLONE_NEWNS)
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    build_root(cfg)
    os.chdir(cfg["root"])
    linux.unshare(linux.CLONE_NEWUSER | linux.CLONE_NEWNS | linux.CLONE_NEWPID | linux.CLONE_NEWIPC
                  | linux.CLONE_NEWNET | linux.CLONE_NEWUTS)
    print("unshared", flush=True)
    if sys.stdin.readline().strip() != "go":
        sys.exit(1)
    os.setgid(0)
    os.setuid(0)
    pid = os.fork()
    if pid == 0:
        try:
            init_main(cfg)
        except BaseException as e:  # noqa: BLE001 - say why, then exit: the server reads the log
            print(f"desktop init failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        os._exit(1)
    os.close(cfg["ready_fd"])
    print(f"init {pid}", flush=True)

    # No threads here: after unshare(CLONE_NEWPID) this process may not create any.
    pidfd = os.pidfd_open(pid)
    lifeline = sys.stdin.fileno()
    while True:
        readable, _, _ = select.select([lifeline, pidfd], [], [])
        if pidfd in readable:
            break
        if not os.read(lifeline, 4096):
            os.kill(pid, signal.SIGKILL)
            lifeline = -1
            select.select([pidfd], [], [])
            break
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)


if __name__ == "__main__":
    main()
