"""Every command that reads a run folder, against hostile ones (issue 33, part 5).

- A run file that is a link out of the run is never opened: the target outside is watched with
  inotify, so an open of it by any process fails the test (a FIFO target would also hang a reader
  that waits on it), and what it holds never reaches an output.
- A run file that is a folder, a FIFO, a device, unreadable, not UTF-8, not JSON or JSON of the
  wrong shape, and a field of any wrong type, give a warning naming the file (and line), or one
  line naming the file and exit 1 or 2: never a traceback, never exit 0 without a word about it.

The link cases run the real command line in a child process; the others run it in this process
(click's runner), for speed: an exception that escapes the command is what a traceback would be.
"""

import ctypes
import ctypes.util
import errno
import json
import os
import stat
import struct
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.cli import run_cua
from helpers.examples import examples
from helpers.hostile import HOSTILE, RUN_FILES, SECRET, TRAJ, contents, episode_line, line_with, make_run, step_line
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_cli import logprobs_check
from cua_cli.cli import main
from cua_cli.errors import CuaError

TIMEOUT = 120  # s: each command takes a second or two; a reader waiting on a FIFO shows as a timeout


def _args(name: str, run: Path, out: Path) -> list:
    """The command line of reader `name` on `run`, writing anything under `out`."""
    return {
        "stats": ["stats", run, "--by", "task", "--format", "json"],
        "stats-timing": ["stats", run, "--timing"],
        "stats-cost": ["stats", run, "--cost"],
        "compare": ["compare", run, run],
        "export-jsonl": ["export", run, "--out", out / "rows.jsonl", "--failed-tries"],
        "export-parquet": ["export", run, "--format", "parquet", "--out", out / "rows.parquet"],
        "export-sft": ["export", run, "--format", "sft", "--out", out / "sft.jsonl"],
        "export-atif": ["export", run, "--format", "atif", "--out", out / "atif"],
        "view": ["view", run, "--out", out / "view"],
        "check-logprobs": ["check-logprobs", run, "--model", run.parent],  # no model there: it reads the run first
        "top": ["top", run, "--once"],
        "envs-list": ["envs", "list", run],
        "envs-gc": ["envs", "gc", run],
    }[name]


# The files whose content each command reads.
READS = {
    "stats": ("scheduled.jsonl", "episodes.jsonl", "unsupported.jsonl"),
    "stats-timing": ("scheduled.jsonl", "episodes.jsonl", "metrics.jsonl"),
    "stats-cost": ("run.json", "scheduled.jsonl", "episodes.jsonl", "metrics.jsonl"),
    "compare": ("scheduled.jsonl", "episodes.jsonl"),
    **{f"export-{f}": ("run.json", "episodes.jsonl", TRAJ) for f in ("jsonl", "parquet", "sft", "atif")},
    "view": ("scheduled.jsonl", "episodes.jsonl", TRAJ, "metrics.jsonl", "unsupported.jsonl"),
    "check-logprobs": ("scheduled.jsonl", "episodes.jsonl", TRAJ),
    "top": ("run.json", "scheduled.jsonl", "episodes.jsonl", "metrics.jsonl"),
    "envs-list": ("leases.jsonl",),
    "envs-gc": ("run.json", "leases.jsonl", "env-server.json"),
}
# Files without which a command that reads a finished run once has nothing to read: refused whole.
# `cua top` follows a live run, and says so in its frame instead.
WHOLE = {"scheduled.jsonl", "episodes.jsonl", "leases.jsonl"}


def whole(name: str, file: str) -> bool:
    return file in WHOLE and name != "top"
CASES = [(name, file) for name, files in READS.items() for file in files]


def written(out: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()) if out.exists() else b""


# --- a link out of the run: never opened ------------------------------------------------------------

_IN_OPEN, _IN_ACCESS = 0x20, 0x01
_EVENT = struct.Struct("iIII")  # struct inotify_event without its name


class Opens:
    """The names of the files in `folder` that any process opened or read while this watched (inotify)."""

    def __init__(self, folder: Path):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, os.fsencode(folder), _IN_OPEN | _IN_ACCESS) < 0:
            raise OSError(ctypes.get_errno(), "inotify")

    def seen(self) -> set[str]:
        names = set()
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return names
            at = 0
            while at < len(data):
                _, _, _, size = _EVENT.unpack_from(data, at)
                names.add(data[at + _EVENT.size:at + _EVENT.size + size].rstrip(b"\0").decode() or ".")
                at += _EVENT.size + size

    def close(self) -> None:
        os.close(self.fd)


@pytest.mark.slow  # a cua command in a child process for each of its many cases
@pytest.mark.parametrize("target", ["fifo", "secret"])
@pytest.mark.parametrize("name,file", CASES)
def test_a_run_file_linked_out_of_the_run_is_never_opened(tmp_path, name, file, target):
    run = make_run(tmp_path)
    dest = tmp_path / "outside" / file
    if target == "fifo":
        dest = tmp_path / "outside" / "fifo"
        os.mkfifo(dest)
    (run / file).unlink()
    (run / file).symlink_to(dest)
    out = tmp_path / "out"
    watch = Opens(dest.parent)
    try:
        r = run_cua(*map(str, _args(name, run, out)), timeout=TIMEOUT)
        opened = watch.seen()
    finally:
        watch.close()
    text = r.stdout + r.stderr
    assert not opened, f"{name} opened {opened} outside the run:\n{text}"
    assert "Traceback" not in text and SECRET not in text and SECRET.encode() not in written(out), text
    assert Path(file).name in text, text  # the refusal names the file
    assert "is a link" in text or file == "run.json", text  # a run.json linked to a FIFO is no run.json
    if whole(name, file):
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, text


ROLLOUT = """
run: {name: resumed, results_dir: results}
tasks: {kind: miniwob, miniwob: {names: [click-test], seeds: [0]}}
env: {url: local, local: {max_envs: 1}}
model: {provider: random, seed: 1}
"""


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_resume_refuses_a_leases_file_it_cannot_read(tmp_path, kind):
    """A resume gives back what the run still holds: a leases.jsonl it cannot read is no run holding
    nothing. It stops before it starts anything, naming the file."""
    run = make_run(tmp_path)
    (run / "leases.jsonl").unlink()
    if kind == "fifo":
        os.mkfifo(run / "leases.jsonl")
    else:
        (run / "leases.jsonl").symlink_to(tmp_path / "outside" / "leases.jsonl")
    (tmp_path / "exp.yaml").write_text(ROLLOUT)
    watch = Opens(tmp_path / "outside")
    try:
        r = run_cua("rollout", str(tmp_path / "exp.yaml"), "--resume", str(run), timeout=TIMEOUT)
        assert not watch.seen()
    finally:
        watch.close()
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (  # a file the resume would append its releases to
        f"Error: {run / 'leases.jsonl'}: the file is {'a FIFO, not a regular file' if kind == 'fifo' else 'a link'}; "
        "not written"), r.stderr
    assert not (tmp_path / "results").exists() and not (run / "queue").exists()


# --- a run file that is no file of its kind, or not JSON -------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def no_model():
    """check-logprobs reads the run, then loads its model: not here (torch takes seconds to import)."""
    def load_policy(model_dir, *_):
        raise CuaError(f"no model is loaded in this test ({model_dir})")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logprobs_check, "load_policy", load_policy)
        yield


def _invoke(name: str, run: Path, out: Path):
    """Reader `name` on `run` in this process: (exit code, what it printed); an exception escaping it fails."""
    r = CliRunner().invoke(main, [str(a) for a in _args(name, run, out)])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"cua {name} raised {r.exception!r}:\n{r.output}") from r.exception
    assert "Traceback" not in r.output, r.output
    return r.exit_code, r.output


def _assert_named(file: str, code: int, output: str, refused: bool) -> None:
    """The file named, in a warning or an error; exit 0, or one error line and exit 1 or 2. `refused`:
    a run whose file cannot be read is not one without records: exit 2, the error naming it."""
    assert Path(file).name in output, f"nothing said of {file}:\n{output}"
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert code == 0 or code in (1, 2) and len(errors) == 1, output
    if refused:
        assert code == 2 and Path(file).name in errors[0], output


KINDS = {
    "folder": lambda p: p.mkdir(),
    "fifo": os.mkfifo,
    "device": lambda p: os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(1, 3)),  # as /dev/null
    "not UTF-8": lambda p: p.write_bytes(b'{"task_id": "\xff\xfe", "step": 0}\n\xc3\x28\n'),
    "not JSON": lambda p: p.write_bytes(b"this is not JSON\n{\n"),
    "an array": lambda p: p.write_bytes(b"[1, 2]\n"),
    "a number": lambda p: p.write_bytes(b"12\n"),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("file", RUN_FILES)
def test_a_run_file_of_the_wrong_kind_is_named_never_a_traceback(tmp_path, file, kind):
    run = make_run(tmp_path)
    (run / file).unlink()
    try:
        KINDS[kind](run / file)
    except PermissionError:
        pytest.skip("no permission to make a device here")
    for name in (n for n, files in READS.items() if file in files):
        code, output = _invoke(name, run, tmp_path / f"out-{name}")
        _assert_named(file, code, output, whole(name, file) and kind in ("folder", "fifo", "device"))


@pytest.mark.parametrize("file", RUN_FILES)
def test_an_unreadable_run_file_is_named_never_a_traceback(tmp_path, file, monkeypatch):
    """No permission to read (EACCES), as a root test runner cannot make it: the one call that opens
    a run file fails for this file."""
    run = make_run(tmp_path)
    target, real_open = os.path.realpath(run / file), os.open

    def no_permission(path, flags, *args, **kwargs):
        if os.path.realpath(path) == target and not flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_permission)
    for name in (n for n, files in READS.items() if file in files):
        code, output = _invoke(name, run, tmp_path / f"out-{name}")
        assert "Permission denied" in output, f"{name} read {file} without opening it through cua's one rule:\n{output}"
        _assert_named(file, code, output, whole(name, file))


# --- fields of any wrong type ---------------------------------------------------------------------

# The fields each file's readers use, and the object a line of it holds.
FIELDS = {
    "episodes.jsonl": (episode_line(), ["task_id", "domain", "sample", "attempt", "outcome", "reward", "score",
                                        "steps", "stop_reason", "duration_s", "error", "traj", "instruction",
                                        "evaluator_func", "phases", "started_at", "lane", "claim_wait_s"]),
    TRAJ: (step_line(), ["step", "screenshot", "response", "thought", "action", "commands", "failed_tries",
                         "prompt", "images", "timings", "sampling", "prompt_token_ids", "response_token_ids",
                         "response_logprobs", "observation", "a11y_tree", "width", "height", "time", "model_version",
                         "policy_version", "error", "finish_reason", "image_processor", "token_ids", "logprobs"]),
    "scheduled.jsonl": ({"task_id": "t", "domain": "d", "sample": 0}, ["task_id", "domain", "sample"]),
    "run.json": (json.loads(contents()["run.json"]), ["run_id", "format_version", "config"]),
    "metrics.jsonl": (json.loads(contents()["metrics.jsonl"].splitlines()[0]),
                      ["t", "server", "up", "running", "waiting", "kv_usage", "prompt_tokens", "generation_tokens",
                       "gpu", "util", "mem_used", "mem_total"]),
    "unsupported.jsonl": ({"task_id": "u", "domain": "d", "missing": ["x"]}, ["task_id", "domain", "missing"]),
    "leases.jsonl": ({"lease": "k", "state": "held", "server": "http://127.0.0.1:9", "id": "e"},
                     ["lease", "state", "server", "id", "protocol", "task_id", "traj"]),
    "env-server.json": ({"url": "http://127.0.0.1:9", "pid": 2 ** 22 + 1}, ["url", "pid"]),
}


@pytest.mark.parametrize("file", FIELDS)
@settings(max_examples=examples(12))
@given(data=st.data())
def test_fields_of_any_type_are_warned_about_never_a_traceback(file, data):
    """A line whose fields hold JSON of any wrong kind: every reader warns or refuses, naming the file.
    In a failed try too, and under the config's keys a reader follows."""
    obj, fields = FIELDS[file]
    values = data.draw(st.dictionaries(st.sampled_from(fields), HOSTILE, min_size=1, max_size=3), label="fields")
    if file == TRAJ and data.draw(st.booleans(), label="in a failed try"):
        line = line_with(obj, {"failed_tries": f"[{line_with(obj['failed_tries'][0], values)}]"})
    elif file == "run.json" and data.draw(st.booleans(), label="in the config"):
        config = {k: line_with(v, values) if type(v) is dict else json.dumps(v) for k, v in obj["config"].items()}
        line = line_with(obj, {"config": "{" + ", ".join(f'"{k}": {v}' for k, v in config.items()) + "}"})
    else:
        line = line_with(obj, values)
    # leases.jsonl and metrics.jsonl after a good line, so that a reader has something to follow
    head = contents()[file] if file in ("metrics.jsonl", "leases.jsonl") else ""
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp))
        (run / file).write_text(head + line + "\n")
        for name in (n for n, files in READS.items() if file in files):
            code, output = _invoke(name, run, Path(tmp) / f"out-{name}")
            assert code in (0, 1, 2), output
