#!/usr/bin/env python3
"""A throwaway MariaDB server for demos: its own data directory, loopback only, a random root password.

    URL=$(python scripts/mariadb_local.py start DIR)   # prints mysql://root:<password>@127.0.0.1:<port>/cua_dart
    python scripts/mariadb_local.py sql DIR "SELECT COUNT(*) FROM rollout_run"   # rows, tab-separated
    python scripts/mariadb_local.py stop DIR

`start` creates DIR/data, runs mariadbd in a session of its own (it outlives
this command) and returns once the server takes queries. `sql` runs one
statement in the database as root, over the server's socket. `stop` sends
the server SIGTERM and waits until it is gone (SIGKILL to its group after a
grace period). Needs Debian's mariadb-server and PyMySQL.
"""
import getpass
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pymysql

DATABASE = "cua_dart"
# Root's tools are in sbin, which a user's PATH may lack.
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
# A small server: a demo needs neither a big buffer pool nor a 96 MB redo log.
OPTIONS = ["--skip-name-resolve", "--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M"]
MAX_SOCKET_PATH = 100  # a unix socket path must fit sockaddr_un (108 bytes)
TIMEOUT_S = 30.0


def tool(*names: str) -> str:
    for name in names:
        if found := shutil.which(name, path=SEARCH):
            return found
    sys.exit(f"none of {', '.join(names)} found: install Debian's mariadb-server")


def connect(sock: Path, password: str, database: str | None = None):
    return pymysql.connect(unix_socket=str(sock), user="root", password=password, database=database,
                           connect_timeout=2, autocommit=True)


def start(root: Path) -> str:
    root = root.resolve()
    data, sock, log = root / "data", root / "mysqld.sock", root / "server.log"
    if len(str(sock)) > MAX_SOCKET_PATH:
        sys.exit(f"{root}: too long a path for the server's socket; use a shorter directory")
    if data.exists():
        sys.exit(f"{data} exists: this helper starts fresh servers only")
    root.mkdir(parents=True, exist_ok=True)
    user = f"--user={getpass.getuser()}"
    made = subprocess.run([tool("mariadb-install-db", "mysql_install_db"), "--no-defaults", f"--datadir={data}", user,
                           "--auth-root-authentication-method=normal", "--skip-test-db", *OPTIONS],
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    if made.returncode:
        sys.exit(f"mariadb-install-db failed ({made.returncode}):\n{made.stdout}{made.stderr}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(log, "ab") as out:
        proc = subprocess.Popen([tool("mariadbd", "mysqld"), "--no-defaults", f"--datadir={data}", user,
                                 "--bind-address=127.0.0.1", f"--port={port}", f"--socket={sock}",
                                 f"--pid-file={root / 'mysqld.pid'}", *OPTIONS],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    (root / "server.pgid").write_text(str(proc.pid))  # for stop(), even before mariadbd writes its pid file
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        if proc.poll() is not None:
            sys.exit(f"mariadbd exited with {proc.returncode}; see {log}")
        try:
            conn = connect(sock, "")
            break
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                stop(root)
                sys.exit(f"mariadbd took no connections in {TIMEOUT_S:.0f} s; see {log}")
            time.sleep(0.05)
    password = secrets.token_urlsafe(16)
    with conn, conn.cursor() as cur:
        cur.execute("SELECT host FROM mysql.user WHERE user = 'root' AND host IN ('localhost', '127.0.0.1', '::1')")
        for (host,) in cur.fetchall():
            cur.execute("ALTER USER 'root'@%s IDENTIFIED BY %s", (host, password))
        cur.execute(f"CREATE DATABASE `{DATABASE}` CHARACTER SET utf8mb4")
    (root / "password").touch(mode=0o600)
    (root / "password").write_text(password)
    return f"mysql://root:{quote(password, safe='')}@127.0.0.1:{port}/{DATABASE}"


def sql(root: Path, query: str) -> None:
    with connect(root / "mysqld.sock", (root / "password").read_text(), DATABASE) as conn, conn.cursor() as cur:
        cur.execute(query)
        for row in cur.fetchall():
            print("\t".join("NULL" if v is None else str(v) for v in row))


def stop(root: Path) -> None:
    try:
        pgid = int((root / "server.pgid").read_text())
    except (OSError, ValueError):
        return  # never started
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(pgid, signal.SIGKILL)
    (root / "server.pgid").unlink()


def main() -> int:
    command = sys.argv[1:2]
    if not (command in (["start"], ["stop"]) and len(sys.argv) == 3 or command == ["sql"] and len(sys.argv) == 4):
        sys.exit("usage: mariadb_local.py start|stop DIR, or mariadb_local.py sql DIR QUERY")
    root = Path(sys.argv[2])
    if command == ["start"]:
        print(start(root))
    elif command == ["sql"]:
        sql(root, sys.argv[3])
    else:
        stop(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
