"""Starts the built-in env server for a rollout whose config says `env.url: local`."""

import json
import os
import re
import select
import subprocess
import sys
import time

from .._util.atomic import write_atomic
from .._util.procgroup import kill_group
from ..errors import CuaError
from ..runfolder.confined import open_writable


class EnvServerProcess:
    def __init__(self, max_envs: int, port: int, token_env: str | None, log_path, idle_timeout_s: float = 0.0,
                 extra_args: list[str] = (), env: dict | None = None):
        # --parent-pid: the server shuts down (browsers included) if the rollout dies without stopping it.
        self.args = [sys.executable, "-m", "cua_cli", "env-server", "--port", str(port),
                     "--max-envs", str(max_envs), "--idle-timeout", str(idle_timeout_s),
                     "--parent-pid", str(os.getpid())]
        if token_env:
            self.args += ["--token-env", token_env]
        self.args += list(extra_args)
        self.log_path = log_path
        self.env = env  # the server's environment (None: this process's)
        self.proc = None
        self.url = None

    def start(self, timeout: float = 60.0) -> str:
        log = open_writable(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)  # in the run: never through a link
        try:
            # Own session: stopping it takes down the whole group, browsers included.
            self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=log, start_new_session=True,
                                         env=self.env)
        finally:
            os.close(log)
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                m = re.search(rb"listening on (http://\S+)", line)
                if m:
                    self.url = m.group(1).decode()
                    return self.url
            if self.proc.poll() is not None:
                break
        self.stop()
        raise CuaError(f"the local env server did not start (see {self.log_path}); "
                           f"command: {' '.join(self.args)}")

    def record(self, path) -> None:
        """Where it listens and its process, for `cua envs gc` after this rollout is killed."""
        write_atomic(path, json.dumps({"url": self.url, "pid": self.proc.pid}).encode())

    def stop(self, grace: float = 10.0) -> None:
        if self.proc is None:
            return
        kill_group(self.proc.pid, grace, kill_wait=5.0)
        self.proc.wait()
