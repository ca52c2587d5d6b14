"""The output formats of `cua export`, each written to a temporary file (or folder) in the
output's folder and renamed over it at the end: a reader never sees half an export.

    jsonl     one row per line, as built (rows.py)
    parquet   the same rows under a fixed schema, written in batches so memory stays flat
    sft       one chat conversation per successful trajectory
    atif      a folder of Harbor ATIF trajectories, one per attempt, with their images (atif.py)
"""

import json
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path

from .._util.diag import warn
from ..errors import CuaError
from .atif import AtifFolders

BATCH_ROWS = 2000
_SURROGATE = re.compile("[\ud800-\udfff]")
# The columns, in order, and their parquet types (pyarrow is imported only for parquet).
COLUMNS = (
    ("run_id", "string"), ("group_id", "string"), ("trajectory_id", "string"), ("task_id", "string"),
    ("domain", "string"), ("sample", "int64"), ("attempt", "int64"), ("step", "int64"), ("try", "int64"),
    ("is_failed_try", "bool"), ("is_last_step", "bool"), ("prompt_messages", "json"), ("images", "images"),
    ("prompt_token_ids", "ids"), ("response_token_ids", "ids"), ("response_logprobs", "floats"),
    ("response_text", "string"), ("error", "string"), ("model_version", "string"), ("policy_version", "int64"),
    ("image_processor", "json"), ("finish_reason", "string"), ("sampling", "json"), ("step_reward", "float64"),
    ("traj_reward", "float64"), ("traj_raw_reward", "float64"), ("outcome", "string"), ("stop_reason", "string"),
    ("group_mean", "float64"), ("group_std", "float64"), ("group_size", "int64"), ("run_dir", "string"))


def parquet_schema(pa):
    images = pa.list_(pa.struct([("path", pa.string()), ("sha256", pa.string()),
                                 ("width", pa.int64()), ("height", pa.int64())]))
    types = {"string": pa.string(), "json": pa.string(), "int64": pa.int64(), "float64": pa.float64(),
             "bool": pa.bool_(), "ids": pa.list_(pa.int64()), "floats": pa.list_(pa.float64()), "images": images}
    return pa.schema([pa.field(name, types[kind], nullable=True) for name, kind in COLUMNS])


def _dumps(obj, ascii_only: bool = False) -> str:
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))


class JsonlRows:
    def __init__(self, path: str):
        self.f = open(path, "wb")

    def add(self, rows: list[dict]) -> int:
        # Lone surrogates (task ids may hold any character) are written as their JSON escapes.
        self.f.write("".join(_dumps(r) + "\n" for r in rows).encode("utf-8", "backslashreplace"))
        return len(rows)

    def close(self) -> None:
        self.f.close()

    abort = close


class SftLines(JsonlRows):
    """Per trajectory, its last step's prompt and answer as one conversation: the prompt
    carries the history (earlier answers as assistant messages, recent screenshots)."""

    def add(self, rows: list[dict]) -> int:
        last = rows[-1]  # the trajectory's last step's own answer
        if last["prompt_messages"] is None or last["response_text"] is None:
            warn(f"{last['trajectory_id']}: no recorded prompt and answer on its last step; not in the sft file")
            return 0
        # Only files read as regular files inside the run: a trainer opens every path it is given.
        if any(i["sha256"] is None for i in last["images"]):
            warn(f"{last['trajectory_id']}: an image of its last prompt could not be read; not in the sft file")
            return 0
        messages = [m if type(m["content"]) is str else
                    {"role": m["role"], "content": [{"type": "image"} if p["type"] == "image_file" else p
                                                    for p in m["content"]]}
                    for m in last["prompt_messages"]]
        messages.append({"role": "assistant", "content": last["response_text"]})
        return super().add([{"messages": messages, "images": [i["path"] for i in last["images"]],
                             "trajectory_id": last["trajectory_id"], "task_id": last["task_id"],
                             "run_dir": last["run_dir"]}])


class ParquetRows:
    def __init__(self, path: str):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise CuaError("--format parquet needs pyarrow: pip install -e '.[export]'") from None
        self.pa = pa
        self.schema = parquet_schema(pa)
        self.writer = pq.ParquetWriter(path, self.schema)
        self.pending: list[dict] = []
        self.warned = False

    def add(self, rows: list[dict]) -> int:
        self.pending.extend(rows)
        if len(self.pending) >= BATCH_ROWS:
            self._flush()
        return len(rows)

    def close(self) -> None:
        self._flush()
        self.writer.close()

    def abort(self) -> None:
        self.writer.close()

    def _flush(self) -> None:
        if not self.pending:
            return
        try:
            batch = self._batch(self.pending, False)
        except UnicodeEncodeError:  # a lone surrogate: parquet strings must be UTF-8
            if not self.warned:
                warn("lone surrogates in text are written as U+FFFD in parquet (JSON columns keep their escapes)")
                self.warned = True
            batch = self._batch(self.pending, True)
        self.writer.write_batch(batch)
        self.pending = []

    def _batch(self, rows: list[dict], clean: bool):
        pa, columns = self.pa, []
        for (name, kind), field in zip(COLUMNS, self.schema):
            values = [r[name] for r in rows]
            if kind == "json":
                values = [None if v is None else _dumps(v, clean) for v in values]
            elif clean and kind == "string":
                values = [v if v is None else _SURROGATE.sub("\ufffd", v) for v in values]
            elif clean and kind == "images":
                values = [[{**i, "path": i["path"] and _SURROGATE.sub("\ufffd", i["path"])} for i in v]
                          for v in values]
            columns.append(pa.array(values, type=field.type))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


WRITERS = {"jsonl": JsonlRows, "parquet": ParquetRows, "sft": SftLines, "atif": AtifFolders}


@contextmanager
def output(out: Path, fmt: str):
    """A writer of format `fmt` whose file (atif: folder) becomes `out` only when the block ends without
    an error. A folder replaces only an empty one (export_runs checks)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CuaError(f"{out.parent}: cannot make the folder: {e.strerror or e}") from None
    tmp = out.parent / f".{out.name}.{uuid.uuid4().hex}.tmp"
    writer = None
    try:
        writer = WRITERS[fmt](str(tmp))
        yield writer
        writer.close()
        writer = None
        os.replace(tmp, out)
    except OSError as e:
        raise CuaError(f"{out}: cannot write: {e.strerror or e}") from None
    finally:
        if writer is not None:
            writer.abort()
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
