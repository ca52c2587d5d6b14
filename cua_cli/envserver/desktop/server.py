"""Entry points of `cua env-server --backend desktop`: make_server (bound, not yet serving, for tests)
and serve (prints its URL, serves until SIGINT/SIGTERM/SIGHUP, then tears every desktop down).

The main port speaks DART's allocation protocol (dart.py); each desktop's in-VM API is on its own
port on the same host address. OSWorld's in-VM API has no authentication: keep the host on
127.0.0.1 (the default) or a private network.
"""

import os
import shutil
import tempfile
from pathlib import Path

from cua_cli._util.allowlist import HostAllowList
from cua_cli._util.signals import serve_until_stopped
from cua_cli.envserver.desktop.dart import DartHandler
from cua_cli.envserver.desktop.httpbase import APIServer
from cua_cli.envserver.desktop.limits import Cgroups, DesktopQuota, LimitSetupError
from cua_cli.envserver.desktop.pool import DesktopPool
from cua_cli.errors import InputError


class DesktopEnvServer(APIServer):
    def __init__(self, address, token: str, pool: DesktopPool, workdir: Path, verbose: bool):
        self.token, self.pool, self.workdir, self.verbose = token, pool, workdir, verbose
        super().__init__(address, DartHandler)

    def close_all(self) -> None:
        self.pool.close_all()
        if self.pool.cgroups is not None:
            self.pool.cgroups.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


PREFIX = "cua-desktops-"


def _start_time(pid: int) -> str:
    """A process's start time (field 22 of /proc/PID/stat): with the pid, it names one process."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def remove_orphans(parent: Path) -> None:
    """Remove the desktop folders (homes) of servers that died without tearing down (a SIGKILL): their
    desktops died with them, their files did not."""
    for folder in parent.glob(PREFIX + "*"):
        try:
            pid, started = (folder / "server.pid").read_text().split()
        except (OSError, ValueError):
            continue  # not ours, or a server still writing its pid file
        if _start_time(int(pid)) != started:
            shutil.rmtree(folder, ignore_errors=True)


# What every desktop's session starts whatever its window manager (guest/launcher.py): X, its bus,
# and xdotool, whose first key settles X's keyboard before the window manager takes its grabs.
DESKTOP_TOOLS = (("Xvfb", "xvfb"), ("dbus-daemon", "dbus"), ("xdotool", "xdotool"))


def host_cgroups(limits: DesktopQuota) -> Cgroups | None:
    """The cgroups this server's desktops go in, once it is sure it can also build their disks."""
    if not limits.enforce:
        return None
    hint = " (or --no-limits, on a host you do not share with model-written code)"
    if not os.path.exists("/dev/loop-control") or not shutil.which("mkfs.ext4", path="/usr/sbin:/sbin:/usr/bin"):
        raise InputError("desktops' disk limits need loop devices (/dev/loop-control) and mkfs.ext4 (Debian's "
                         "e2fsprogs)" + hint)
    try:
        return Cgroups.here(f"cua-desktops-{os.getpid()}")
    except (LimitSetupError, OSError) as e:
        raise InputError(f"desktops' memory, process and CPU limits: {e}{hint}") from None


def make_server(host: str = "127.0.0.1", port: int = 0, token_env: str = "CUA_ENV_TOKEN", max_desktops: int = 2,
                screen: tuple[int, int] = (1920, 1080), warm: int = 0, verbose: bool = False,
                workdir: str | None = None, session: str = "gnome",
                limits: DesktopQuota = DesktopQuota(), web: HostAllowList | None = None) -> DesktopEnvServer:
    """Bind the allocation server (port 0: a free one) and start filling the warm pool. `web`: the hosts
    the desktops may reach through their proxy (None: no network)."""
    token = os.environ.get(token_env, "") if token_env else ""
    if not token:
        raise InputError(f"set the allocation token in the environment variable {token_env or '(none named)'}")
    needs = {"gnome": "gnome-shell", "openbox": "openbox"}.get(session)
    if needs is None:
        raise InputError(f"--session must be gnome or openbox, not {session!r}")
    if not shutil.which(needs):
        raise InputError(f"--session {session} needs {needs} (Debian's package {needs}): run scripts/setup_env.sh")
    for tool, package in DESKTOP_TOOLS:
        if not shutil.which(tool):
            raise InputError(f"desktops need {tool} (Debian's package {package}): run scripts/setup_env.sh")
    if os.geteuid() != 0:
        raise InputError("desktops need root: the server maps each desktop's user namespace to its own host uids")
    if max_desktops < 1 or warm < 0:
        raise InputError("--max-desktops must be at least 1 and --warm at least 0")
    width, height = screen
    if not (64 <= width <= 8192 and 64 <= height <= 8192):
        raise InputError("--screen must be WIDTHxHEIGHT, each 64-8192")
    cgroups = host_cgroups(limits)
    remove_orphans(Path(workdir or tempfile.gettempdir()))
    base = Path(tempfile.mkdtemp(prefix=PREFIX, dir=workdir))
    base.chmod(0o711)  # desktops' launchers pass through; nobody lists it
    (base / "server.pid").write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
    pool = DesktopPool(base, host, (width, height), max_desktops, warm, verbose, session, limits, cgroups, web)
    try:
        return DesktopEnvServer((host, port), token, pool, base, verbose)
    except BaseException:
        pool.close_all()
        if cgroups is not None:
            cgroups.close()
        shutil.rmtree(base, ignore_errors=True)
        raise


def serve(host: str = "127.0.0.1", port: int = 0, token_env: str = "CUA_ENV_TOKEN", max_desktops: int = 2,
          screen: tuple[int, int] = (1920, 1080), warm: int = 0, verbose: bool = False,
          workdir: str | None = None, session: str = "gnome", limits: DesktopQuota = DesktopQuota(),
          web: HostAllowList | None = None) -> None:
    server = make_server(host, port, token_env, max_desktops, screen, warm, verbose, workdir, session, limits, web)

    try:
        serve_until_stopped(server, lambda: print(
            f"cua env-server (desktops) listening on http://{host}:{server.server_address[1]}", flush=True))
    finally:
        server.server_close()
        server.close_all()
