"""A desktop as the env server holds it: the sandbox, its executor client, and its in-VM API served
on its own port (as DART hands out a server_port per desktop).

A desktop that hits one of its limits is stopped at once (a fork bomb would go on burning its CPU
share), and its API then answers every request 503 with `desktop_limit` naming the limit, until
the client releases it: the client ends the episode with that stop reason."""

import threading
import time
import uuid
from pathlib import Path

from cua_cli._util.allowlist import HostAllowList
from cua_cli.envserver.desktop.api import DesktopHandler
from cua_cli.envserver.desktop.client import ExecutorClient
from cua_cli.envserver.desktop.httpbase import APIServer
from cua_cli.envserver.desktop.limits import Cgroups, DesktopQuota
from cua_cli.envserver.desktop.ports import PublishedPorts
from cua_cli.envserver.desktop.sandbox import Sandbox
from cua_cli.envserver.desktop.web import WebProxy


class LocalDesktop:
    def __init__(self, workdir: Path, host: str, screen: tuple[int, int], verbose: bool = False,
                 session: str = "gnome", limits: DesktopQuota = DesktopQuota(enforce=False),
                 cgroups: Cgroups | None = None, web: HostAllowList | None = None):
        self.id = str(uuid.uuid4())
        self.created = time.time()
        self.last_used = time.monotonic()
        self.stopped_at_limit: str | None = None  # "kind: what happened"
        self.sandbox = Sandbox(workdir / self.id, screen, session, limits=limits, cgroups=cgroups, web=web is not None)
        self.executor = ExecutorClient(self.sandbox.socket_path)
        sockets = Path(self.sandbox.socket_path).parent
        self.web = None
        try:
            self.api = APIServer((host, 0), DesktopHandler)
            try:
                self.published = PublishedPorts(host, sockets)
                self.web = WebProxy(sockets, web) if web is not None else None
            except BaseException:
                self.api.server_close()
                raise
        except BaseException:
            self.sandbox.kill()
            raise
        self.api.desktop = self
        self.api.verbose = verbose
        self.port = self.api.server_address[1]
        # A short poll: close() (each release) waits up to one for serve_forever to see its shutdown.
        self._thread = threading.Thread(target=self.api.serve_forever, args=(0.05,), name=f"desktop-{self.port}",
                                        daemon=True)
        self._thread.start()

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def screenshot_ready(self) -> bool:
        """Whether /screenshot answers, as DART's allocation waits for."""
        try:
            header, body = self.executor.call("screenshot")
        except ConnectionError:
            return False
        return header.get("http") == 200 and body.startswith(b"\x89PNG")

    def check_limits(self) -> str | None:
        """Stop the desktop if it has hit a limit; the limit it stopped at (None: it runs on)."""
        if self.stopped_at_limit is None and (hit := self.sandbox.limit_hit()):
            self.stopped_at_limit = hit
            self.sandbox.kill()
        return self.stopped_at_limit

    def close(self) -> None:
        """Stop serving its API, then kill every process of the desktop and remove its files."""
        self.api.shutdown()
        self.api.server_close()
        self.published.close()
        if self.web is not None:
            self.web.close()
        self.executor.close()
        self.sandbox.kill()
