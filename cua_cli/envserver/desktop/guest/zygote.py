"""A Python with pyautogui already imported that forks once per command, so OSWorld's
`python -c "import pyautogui; ..."` costs a fork instead of a ~250 ms interpreter start.

The executor sends the code with three file descriptors (stdout, stderr, status) over a
SOCK_SEQPACKET socket (its fd number is argv[1]). The zygote writes "P<pid>" then, once the child is reaped,
"X<exit code>" to the status fd; the child runs the code as `python -c` would (__main__,
sys.argv == ["-c"], a traceback and exit code 1 on an exception).

One deliberate difference: pyautogui sleeps PAUSE (0.1 s) after each call; here that pause is owed
and paid before the next pyautogui call of the same command instead, so sequences keep their
spacing but a command does not end with a useless sleep.
"""

import array
import atexit
import io
import os
import selectors
import signal
import socket
import sys
import time
import traceback
import types

import pyautogui
import pyautogui._pyautogui_x11 as x11
from Xlib.display import Display

_owed = [0.0]
_failsafe = pyautogui.failSafeCheck


def _owe_pause(_pause):
    if _pause:
        _owed[0] = time.monotonic() + pyautogui.PAUSE


def _pay_then_check():
    wait = _owed[0] - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    _failsafe()


pyautogui._handlePause = _owe_pause
pyautogui.failSafeCheck = _pay_then_check


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def run_child(code: str, out_fd: int, err_fd: int) -> None:
    """In the forked child: become a fresh `python -c CODE` process, then exit."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.closerange(3, 1 << 16)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False))
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True)
    status = 0
    try:
        x11._display = Display(os.environ["DISPLAY"])  # the zygote's X connection is not ours to share
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        sys.argv = ["-c"]
        exec(compile(code, "<string>", "exec"), main.__dict__)  # noqa: S102 - `python -c CODE`, by design
    except SystemExit as e:
        status = _exit_code(e)
    except BaseException as e:  # noqa: BLE001 - as python -c reports it
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)  # from <string>, as python -c shows it
        status = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - as Python's own exit: 120 when flushing fails
        status = status or 120
    os._exit(status)


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ, "control")
    sel.register(rfd, selectors.EVENT_READ, "child")
    status_fds: dict[int, int] = {}
    control.send(b"ready")
    while True:
        for key, _ in sel.select():
            if key.data == "child":
                os.read(rfd, 4096)
                while status_fds:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                    if not pid:
                        break
                    fd = status_fds.pop(pid, None)
                    if fd is not None:
                        try:
                            os.write(fd, f"X{os.waitstatus_to_exitcode(status)}\n".encode())
                        except OSError:
                            pass
                        os.close(fd)
                continue
            msg, ancdata, _, _ = control.recvmsg(1 << 20, socket.CMSG_SPACE(3 * 4))
            if not msg and not ancdata:
                sys.exit(0)  # the executor is gone
            fds = []
            for level, kind, data in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds += array.array("i", data[: len(data) - len(data) % 4]).tolist()
            if len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                continue
            out_fd, err_fd, st_fd = fds
            pid = os.fork()
            if pid == 0:
                run_child(msg.decode("utf-8", "surrogateescape"), out_fd, err_fd)
            os.close(out_fd)
            os.close(err_fd)
            status_fds[pid] = st_fd
            os.write(st_fd, f"P{pid}\n".encode())


if __name__ == "__main__":
    main()
