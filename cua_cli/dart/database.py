"""DART-GUI's MySQL tables: `rollout_run`, the finished trajectories its decoupled trainer
polls, and `checkpoint`, the versions the trainer saves.

The schema is the one DART-GUI's README gives (the SQL dump of its
database). Like DART's rollouter (dart_rollouter's trajectory_runner.py),
a trajectory gets a row only when it scored above 0, or scored 0 after at
least 4 steps; evaluator and model failures never get one. Rows are keyed on
(trajectory_id, run_id), so writing a trajectory again (a resumed run, or a
retry after the database was down) never makes a second row, and never
resets `used`, which the trainer counts up as it trains on a row.

DART's trainer keeps only rows whose `model_version` is the `path` of one of
its latest checkpoints, so the policy's model_version must be that path (as
it is when vLLM serves the checkpoint folder under its own path).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from .._util.redact import Redactor
from ..errors import CuaError, InputError, SinkUnavailable
from ..runfolder.finished import Finished
from ..runfolder.names import encode_task_id

ROLLOUT_RUN_DDL = """CREATE TABLE IF NOT EXISTS `rollout_run` (
  `id` bigint NOT NULL AUTO_INCREMENT,
  `run_id` varchar(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci DEFAULT NULL,
  `trajectory_id` varchar(191) COLLATE utf8mb4_unicode_ci NOT NULL,
  `task_id` varchar(191) COLLATE utf8mb4_unicode_ci NOT NULL,
  `trace_id` varchar(191) COLLATE utf8mb4_unicode_ci NOT NULL,
  `split_dir` varchar(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci DEFAULT NULL,
  `reward` double DEFAULT NULL,
  `num_chunks` int DEFAULT NULL,
  `used` int NOT NULL DEFAULT '0',
  `model_version` varchar(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci DEFAULT NULL,
  `instruction` varchar(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci DEFAULT NULL,
  `create_at` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_rollout_run_id` (`id`),
  UNIQUE KEY `uk_rollout_run_traj_run` (`trajectory_id`,`run_id`),
  KEY `idx_rollout_run_task` (`task_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"""

# DART's dump names MySQL 8's utf8mb4_0900_ai_ci, which is MySQL 8's default for utf8mb4 and
# unknown to MariaDB: leaving the collation to the server gives the same table on MySQL 8.
# DART's trainer writes status PENDING (of PENDING|RUNNING|COMPLETED|FAILED|DEPRECATED) once
# the checkpoint is saved, and never updates it.
CHECKPOINT_DDL = """CREATE TABLE IF NOT EXISTS `checkpoint` (
  `id` bigint NOT NULL AUTO_INCREMENT,
  `name` varchar(50) NOT NULL DEFAULT '',
  `version` varchar(50) NOT NULL,
  `run_id` varchar(191) NOT NULL DEFAULT '',
  `status` varchar(20) NOT NULL DEFAULT 'PENDING',
  `path` varchar(255) NOT NULL,
  `source` varchar(50) DEFAULT NULL,
  `operator` varchar(50) DEFAULT NULL,
  `remark` varchar(1024) DEFAULT NULL,
  `config_yaml` text,
  `created_at` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  `updated_at` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  `deleted_at` timestamp NULL DEFAULT NULL,
  `started_at` timestamp NULL DEFAULT NULL,
  `finished_at` timestamp NULL DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `idx_status` (`status`),
  KEY `idx_created_at` (`created_at`),
  KEY `idx_updated_at` (`updated_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

# A duplicate key is a row already written: a no-op update keeps it as it is (used included).
# INSERT IGNORE would also turn real errors (a value too long) into silent warnings.
_INSERT = """INSERT INTO `rollout_run`
  (`run_id`, `trajectory_id`, `task_id`, `trace_id`, `split_dir`, `reward`, `num_chunks`, `model_version`,
   `instruction`)
VALUES (%(run_id)s, %(trajectory_id)s, %(task_id)s, %(trace_id)s, %(split_dir)s, %(reward)s, %(num_chunks)s,
        %(model_version)s, %(instruction)s)
ON DUPLICATE KEY UPDATE `id` = `id`"""

# Oldest first, by version number as DART's trainer orders them (v10 after v9); soft-deleted,
# failed and retired versions are not ready to serve.
_CHECKPOINTS = """SELECT `id`, `version`, `run_id`, `path`, `status`, `source`, `created_at` FROM `checkpoint`
WHERE `run_id` = %s AND `version` REGEXP '^v[0-9]+$' AND CAST(SUBSTRING(`version`, 2) AS UNSIGNED) > %s
  AND `deleted_at` IS NULL AND `status` NOT IN ('FAILED', 'DEPRECATED')
ORDER BY CAST(SUBSTRING(`version`, 2) AS UNSIGNED), `id`"""

# Server errors no retry will fix: access denied, unknown database, a table not as DART's, bad SQL.
_PERMANENT = {1044, 1045, 1049, 1054, 1064, 1142, 1143, 1146, 1227, 1698}
_URL_PARAMS = {"unix_socket", "charset"}
_SIZES = {"run_id": 191, "task_id": 191, "trace_id": 191, "model_version": 512}
_INSTRUCTION_SIZE = 1024
_SPLIT_DIR_SIZE = 512


@dataclass(frozen=True)
class InsertRule:
    """Which finished trajectories get a row (DART's rollouter's rule by default)."""

    min_steps_for_zero: int = 4   # a 0-score trajectory shorter than this teaches little
    skip_errors: bool = True      # evaluator, model and env failures have no reward to learn from

    def wants(self, record: dict) -> bool:
        if record.get("outcome") == "error" or record.get("score") is None:
            return not self.skip_errors
        score = record["score"]
        return score > 0 or (score == 0 and (record.get("steps") or 0) >= self.min_steps_for_zero)


def _fit(text: str | None, size: int) -> str | None:
    """An identifier fit for a utf8mb4 varchar(size): one too long, or holding a lone surrogate
    (which utf8mb4 cannot store), is cut and suffixed with a hash of it, so distinct ids stay distinct."""
    if text is None:
        return None
    clean = text.encode("utf-8", "replace").decode("utf-8")
    if clean == text and len(text) <= size:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return clean[:size - 17] + "~" + digest


def trajectory_id(task_id: str, trace_id: str) -> str:
    """DART's trajectory_id: the name of the trajectory's DART folder, `<task>_<trace>` (at most 137 chars)."""
    return f"{encode_task_id(task_id)}_{trace_id}"


def dart_row(t: Finished, split_dir: str | None = None) -> dict:
    """The rollout_run values of a finished trajectory (split_dir: its DART folder; default its cua folder)."""
    rec = t.record
    versions = [s["model_version"] for s in t.steps() if isinstance(s.get("model_version"), str)]
    split_dir = str(t.traj_dir if split_dir is None else split_dir)
    instruction = rec.get("instruction") or t.task.get("instruction")
    return {
        "run_id": _fit(t.run_id, _SIZES["run_id"]),
        "trajectory_id": trajectory_id(rec["task_id"], t.trace_id),
        "task_id": _fit(rec["task_id"], _SIZES["task_id"]),
        "trace_id": _fit(t.trace_id, _SIZES["trace_id"]),
        # A cut or altered path leads nowhere: none is better.
        "split_dir": split_dir if _fit(split_dir, _SPLIT_DIR_SIZE) == split_dir else None,
        "reward": rec.get("score"),
        "num_chunks": rec.get("steps"),
        "model_version": _fit(versions[-1], _SIZES["model_version"]) if versions else None,
        "instruction": (instruction.encode("utf-8", "replace").decode("utf-8")[:_INSTRUCTION_SIZE]
                        if isinstance(instruction, str) else None),
    }


def _parse_url(url: str, redact: Redactor) -> dict:
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mysql+pymysql"):
        raise InputError(f"{redact.text(url)}: not a MySQL URL (mysql://user:password@host:port/database)")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = set(query) - _URL_PARAMS
    if unknown or any(len(v) > 1 for v in query.values()):
        raise InputError(f"{redact.text(url)}: takes only the parameters {', '.join(sorted(_URL_PARAMS))}, once each")
    if query.get("charset", ["utf8mb4"])[0] != "utf8mb4":
        raise InputError(f"{redact.text(url)}: DART's tables are utf8mb4; charset must be utf8mb4")
    try:
        port = parts.port or 3306
    except ValueError:
        raise InputError(f"{redact.text(url)}: the port is not a number from 0 to 65535") from None
    database = unquote(parts.path.lstrip("/"))
    socket = query.get("unix_socket", [None])[0]
    if not database or "/" in database or not (parts.hostname or socket):
        raise InputError(f"{redact.text(url)}: needs a host (or ?unix_socket=) and a database name")
    return {"host": parts.hostname or "localhost", "port": port, "user": unquote(parts.username or ""),
            "password": unquote(parts.password or ""), "database": database, "unix_socket": socket}


class DartDatabase:
    """Writes finished trajectories to DART's `rollout_run` and reads DART's `checkpoint` table.

    Connects on first use and again after a failure. A database that is down,
    or drops the connection, raises SinkUnavailable: try again later. A
    database that refuses us for good (access denied, no such database, a
    table not as DART's) raises CuaError. Messages never hold the password.
    """

    def __init__(self, url: str, rule: InsertRule | None = None, connect_timeout: float = 5,
                 io_timeout: float = 30):
        try:
            password = urlsplit(url).password
        except ValueError:  # the URL cannot be shown: only parsing finds the password to mask
            raise InputError("the MySQL URL does not parse (mysql://user:password@host:port/database)") from None
        self._redact = Redactor([password, unquote(password)] if password else [])
        self._params = p = _parse_url(url, self._redact)
        try:
            import pymysql
        except ImportError:
            raise CuaError("DART's database needs PyMySQL: pip install -e .[dart]") from None
        self._pymysql = pymysql
        self.rule = rule or InsertRule()
        self.connect_timeout, self.io_timeout = connect_timeout, io_timeout
        place = p["unix_socket"] or f"{p['host']}:{p['port']}"
        self.where = f"{p['user']}@{place}/{p['database']}"
        self._conn = None

    def write(self, t: Finished, split_dir: str | None = None) -> bool:
        """Give `t` its row: True when it has one now (written or already there), False when the rule says none."""
        if not self.rule.wants(t.record):
            return False
        self._run(_INSERT, dart_row(t, split_dir))
        return True

    def checkpoints(self, run_id: str, after: str | None = None) -> list[dict]:
        """The checkpoints of `run_id` newer than version `after` (None: all), ready to serve, oldest first."""
        if after is None:
            newer_than = -1
        elif isinstance(after, str) and after[:1] == "v" and after[1:].isascii() and after[1:].isdigit():
            newer_than = int(after[1:])
        else:
            raise InputError(f"checkpoint version {after!r} is not DART's v<number>")
        rows = self._run(_CHECKPOINTS, (_fit(run_id, _SIZES["run_id"]), newer_than))
        keys = ("id", "version", "run_id", "path", "status", "source", "created_at")
        return [{**dict(zip(keys, row)), "created_at": row[-1].isoformat(sep=" ")} for row in rows]

    def ping(self) -> None:
        """Connect now (creating the tables if missing): fail fast on a bad URL or password."""
        self._run("SELECT 1", None)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except self._pymysql.err.Error:
                pass  # already broken: there is nothing left to close

    def _connect(self):
        p = self._params
        conn = self._pymysql.connect(
            host=p["host"], port=p["port"], user=p["user"], password=p["password"], database=p["database"],
            unix_socket=p["unix_socket"], charset="utf8mb4", autocommit=True, connect_timeout=self.connect_timeout,
            read_timeout=self.io_timeout, write_timeout=self.io_timeout)
        with conn.cursor() as cur:
            # Only what is missing: a user of DART's own database may lack the CREATE privilege.
            cur.execute("SHOW TABLES")
            have = {name for (name,) in cur.fetchall()}
            for name, ddl in (("rollout_run", ROLLOUT_RUN_DDL), ("checkpoint", CHECKPOINT_DDL)):
                if name not in have:
                    cur.execute(ddl)
        return conn

    def _run(self, sql: str, args) -> tuple:
        """Run one statement (autocommit: all of it or nothing); its rows. A connection kept from
        before may have been dropped meanwhile (an idle timeout, a restart): one more try on a new one."""
        reused = self._conn is not None
        try:
            return self._execute(sql, args)
        except SinkUnavailable:
            if not reused:
                raise
        return self._execute(sql, args)

    def _execute(self, sql: str, args) -> tuple:
        try:
            if self._conn is None:
                self._conn = self._connect()
            with self._conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchall()
        except (self._pymysql.err.Error, OSError) as e:
            self.close()
            raise self._error(e) from None

    def _error(self, e: Exception) -> CuaError:
        code = e.args[0] if e.args and isinstance(e.args[0], int) else None
        text = str(e.args[1]) if code is not None and len(e.args) > 1 else str(e)
        message = self._redact.text(f"MySQL {self.where}: {text}" + (f" (error {code})" if code else ""))
        pymysql = self._pymysql
        transient = isinstance(e, (OSError, pymysql.err.InterfaceError)) or (
            isinstance(e, (pymysql.err.OperationalError, pymysql.err.InternalError)) and code not in _PERMANENT)
        return SinkUnavailable(message) if transient else CuaError(message)
