"""A real MariaDB server for tests: its own data directory, loopback only, a root password.

    with MariaDB(tmp_path) as db:
        sink = DartDatabase(db.url)     # mysql://root:<password>@127.0.0.1:<port>/cua_test
        db.stop()                    # the database goes down mid-run...
        db.start()                   # ...and comes back on the same port with the same data

The server runs in its own process group; stop() sends it SIGTERM and waits
until it is gone (SIGKILL to the group if it hangs).
"""

import getpass
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import pymysql

from helpers.net import free_port
from helpers.processes import signal_group

DATABASE = "cua_test"
_SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])  # root's tools, for anyone
# A small server: tests need neither a big buffer pool nor a 96 MB redo log (a 26 MB data directory).
_SERVER_OPTIONS = ["--skip-name-resolve", "--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M"]
_MAX_SOCKET_PATH = 100  # a unix socket path must fit sockaddr_un (108 bytes)


def _tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name, path=_SEARCH)
        if found:
            return found
    raise RuntimeError(f"none of {', '.join(names)} found: run scripts/setup_env.sh (Debian's mariadb-server)")


class MariaDB:
    def __init__(self, tmp_path, password: str | None = None, start_timeout: float = 30.0):
        self.dir = Path(tmp_path) / "mariadb"
        self.datadir = self.dir / "data"
        self.log = self.dir / "server.log"
        # URL-special characters, so the tests see the password encoded in the URL and masked in messages.
        self.password = password or f"pw{secrets.token_hex(8)}@:/%"
        self.port = free_port()
        self.start_timeout = start_timeout
        self._short_dir = None
        self.socket = self.dir / "mysqld.sock"
        if len(str(self.socket)) > _MAX_SOCKET_PATH:
            self._short_dir = Path(tempfile.mkdtemp(prefix="cua-mdb-"))
            self.socket = self._short_dir / "mysqld.sock"
        self.proc = None
        self.start_seconds = None  # how long the last start() took

    @property
    def url(self) -> str:
        return f"mysql://root:{quote(self.password, safe='')}@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def socket_url(self) -> str:
        auth = f"root:{quote(self.password, safe='')}"
        return f"mysql://{auth}@localhost/{DATABASE}?unix_socket={quote(str(self.socket))}"

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self) -> None:
        """Start the server (creating the data directory the first time); returns once it takes queries."""
        assert self.proc is None, "already running"
        t0 = time.monotonic()
        fresh = not self.datadir.exists()
        if fresh:
            self.dir.mkdir(parents=True, exist_ok=True)
            made = subprocess.run([_tool("mariadb-install-db", "mysql_install_db"), "--no-defaults",
                                   f"--datadir={self.datadir}", f"--user={getpass.getuser()}",
                                   "--auth-root-authentication-method=normal", "--skip-test-db", *_SERVER_OPTIONS],
                                  capture_output=True, text=True, timeout=self.start_timeout)
            if made.returncode:
                raise RuntimeError(f"mariadb-install-db failed ({made.returncode}):\n{made.stdout}{made.stderr}")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [_tool("mariadbd", "mysqld"), "--no-defaults", f"--datadir={self.datadir}",
                 f"--user={getpass.getuser()}", "--bind-address=127.0.0.1", f"--port={self.port}",
                 f"--socket={self.socket}", f"--pid-file={self.dir / 'mysqld.pid'}", *_SERVER_OPTIONS],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        try:
            self._wait_ready(password="" if fresh else self.password)
            if fresh:
                self._secure()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0

    def _wait_ready(self, password: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited with {self.proc.returncode}:\n{self._log_tail()}")
            try:
                self._connect(password).close()
                return
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mariadbd took no connections in {self.start_timeout} s:\n{self._log_tail()}")
                time.sleep(0.05)

    def _secure(self) -> None:
        """Give root its password (from the socket and loopback) and create the test database."""
        with self._connect("") as conn, conn.cursor() as cur:
            cur.execute("SELECT host FROM mysql.user WHERE user = 'root' AND host IN ('localhost', '127.0.0.1', '::1')")
            for (host,) in cur.fetchall():
                cur.execute("ALTER USER 'root'@%s IDENTIFIED BY %s", (host, self.password))
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DATABASE}` CHARACTER SET utf8mb4")

    def _connect(self, password: str, database: str | None = None):
        return pymysql.connect(unix_socket=str(self.socket), user="root", password=password, database=database,
                               connect_timeout=2, autocommit=True)

    def sql(self, query: str, args=None) -> list[tuple]:
        """Run one statement in the test database as root; its rows."""
        with self._connect(self.password, DATABASE) as conn, conn.cursor() as cur:
            cur.execute(query, args)
            return list(cur.fetchall())

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): it keeps its connections and answers nothing, like a lost network."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server and wait until it is gone; SIGKILL its group if it will not go."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a paused server cannot act on SIGTERM
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                signal_group(proc, signal.SIGKILL)
                proc.wait(timeout)

    def close(self) -> None:
        self.stop()
        if self._short_dir is not None:
            shutil.rmtree(self._short_dir, ignore_errors=True)

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"
