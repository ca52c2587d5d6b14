"""Every command that reads a run folder reads only inside it (issue 21, item 4).

A record's path that is absolute, climbs out with `..` or goes through a link,
and a file that is a link, a FIFO or a folder, are refused with a warning naming
the record, never followed and never waited on. Each case runs the real command
line in a child process with a generous timeout: a reader that opened a FIFO
would wait for a writer for ever.
"""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import CUA, ROOT
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from cua_cli.runfolder.confined import Refused, confine

TIMEOUT = 120  # s: the commands take about one; a hang shows as a timeout
SECRET = "OUTSIDE-SECRET"


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buf, "PNG")
    return buf.getvalue()


def step_line(response: str, image: str = "step_0000.png") -> dict:
    return {"step": 0, "screenshot": image, "response": response, "action": [{"type": "click", "x": 1, "y": 2}],
            "width": 8, "height": 6, "timings": {"env_s": 0.1},
            "prompt": [{"role": "user", "content": [{"type": "text", "text": "go"},
                                                    {"type": "image_file", "file": image}]}],
            "prompt_token_ids": [1, 2, 3], "response_token_ids": [4, 5], "response_logprobs": [-0.1, -0.2],
            "sampling": {"guided": False}}


def trajectory(folder: Path, response: str) -> None:
    folder.mkdir(parents=True)
    (folder / "step_0000.png").write_bytes(png())
    (folder / "traj.jsonl").write_text(json.dumps(step_line(response)) + "\n")


def episodes(task_id: str, traj: str) -> str:
    return json.dumps({"task_id": task_id, "domain": "d", "sample": 0, "attempt": 0, "outcome": "success",
                       "reward": 1.0, "score": 1.0, "steps": 1, "stop_reason": "finished", "duration_s": 1.0,
                       "error": None, "traj": traj}) + "\n"


def make_run(root: Path) -> Path:
    """A run of one pair whose trajectory answers `finished`, and beside it a folder `outside`
    holding a trajectory, run files and a screenshot that say SECRET."""
    run = root / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"format_version": 2, "run_id": "run"}))
    (run / "scheduled.jsonl").write_text(json.dumps({"task_id": "t", "domain": "d", "sample": 0}) + "\n")
    (run / "episodes.jsonl").write_text(episodes("t", "trajectories/t/0_0"))
    trajectory(run / "trajectories" / "t" / "0_0", "Action: finished(content='inside')")
    outside = root / "outside"
    trajectory(outside, SECRET)
    (outside / "run.json").write_text(json.dumps({"run_id": SECRET}))
    (outside / "scheduled.jsonl").write_text(json.dumps({"task_id": SECRET, "domain": "d", "sample": 0}) + "\n")
    (outside / "episodes.jsonl").write_text(episodes(SECRET, str(outside)))
    return run


def set_traj(run: Path, traj: str) -> None:
    (run / "episodes.jsonl").write_text(episodes("t", traj))


def link_trajectory(run: Path) -> None:
    folder = run / "trajectories" / "t" / "0_0"
    os.rename(folder, run.parent / "moved")
    folder.symlink_to(run.parent / "outside", target_is_directory=True)


def link_trajectories(run: Path) -> None:
    elsewhere = run.parent / "elsewhere"
    os.rename(run / "trajectories", elsewhere)
    (run / "trajectories").symlink_to(elsewhere, target_is_directory=True)
    (elsewhere / "t" / "0_0" / "traj.jsonl").write_text(json.dumps(step_line(SECRET)) + "\n")


def replace(kind: str, path: Path, target: Path) -> None:
    """Put a link to `target`, a FIFO or a folder where the file `path` is."""
    path.unlink()
    {"link": lambda: path.symlink_to(target), "fifo": lambda: os.mkfifo(path), "folder": path.mkdir}[kind]()


WHY = {"link": "is a link", "fifo": "is a FIFO, not a regular file", "folder": "is a folder, not a regular file"}


def run_cua(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*CUA, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)


REPLAY = """
import json, sys
from cua_cli.errors import CuaError
from cua_cli.models.replay import Replay
try:
    session = Replay(sys.argv[1]).session("t", 0)
except CuaError as e:  # as the CLI reports it when a rollout's config names the run
    print(f"Error: {e}", file=sys.stderr)
    sys.exit(e.exit_code)
print(json.dumps(session.calls))
"""


def replay(run: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", REPLAY, str(run)], cwd=ROOT, capture_output=True, text=True,
                          timeout=TIMEOUT)


def command(name: str, run: Path, tmp: Path) -> tuple[subprocess.CompletedProcess, list[Path]]:
    """Run one reading command on `run`; what it printed, and the files it wrote."""
    out = tmp / "out"
    if name == "stats":
        return run_cua("stats", run, "--by", "task", "--format", "json"), []
    if name.startswith("export-"):
        fmt = name.removeprefix("export-")
        r = run_cua("export", run, "--format", fmt, "--out", out / f"rows.{fmt}")
        return r, list(out.glob("*"))
    if name == "view":
        r = run_cua("view", run, "--out", out)
        return r, [p for p in out.rglob("*") if p.is_file()]
    if name == "check-logprobs":
        return run_cua("check-logprobs", run, "--model", tmp), []
    assert name == "replay"
    return replay(run), []


def assert_confined(r: subprocess.CompletedProcess, files: list[Path], warning: str) -> None:
    assert "Traceback" not in r.stderr, r.stderr
    assert warning in r.stderr, r.stderr
    assert SECRET not in r.stdout + r.stderr
    for f in files:
        assert SECRET.encode() not in f.read_bytes(), f


TRAJ_READERS = ["export-jsonl", "export-parquet", "export-sft", "view", "check-logprobs", "replay"]
TRAJS = {  # how the episode line's traj leads out, and the warning that says so
    "climbs out": (lambda run: set_traj(run, "../outside"), "traj '../outside' climbs out of its folder with '..'"),
    "absolute": (lambda run: set_traj(run, str(run.parent / "outside")), "is an absolute path; not read"),
    "linked folder": (link_trajectory, "traj 'trajectories/t/0_0' is a link; not read"),
    "linked trajectories/": (link_trajectories, "traj 'trajectories/t/0_0' goes through a link; not read"),
}


@pytest.mark.slow  # a cua command in a child process for each of its many cases
@pytest.mark.parametrize("name", TRAJ_READERS)
@pytest.mark.parametrize("case", TRAJS)
def test_a_traj_leading_out_of_the_run_is_refused_naming_its_line(tmp_path, case, name):
    run = make_run(tmp_path)
    setup, warning = TRAJS[case]
    setup(run)
    r, files = command(name, run, tmp_path)
    assert_confined(r, files, f"{run / 'episodes.jsonl'}:1: {warning}" if case != "absolute" else warning)
    if name == "check-logprobs":
        assert "no model call has recorded tokens" in r.stderr


@pytest.mark.slow  # a cua command in a child process for each of its many cases
@pytest.mark.parametrize("name", TRAJ_READERS)
@pytest.mark.parametrize("kind", WHY)
def test_a_traj_jsonl_that_is_no_regular_file_is_refused(tmp_path, kind, name):
    run = make_run(tmp_path)
    traj = run / "trajectories" / "t" / "0_0" / "traj.jsonl"
    replace(kind, traj, run.parent / "outside" / "traj.jsonl")
    r, files = command(name, run, tmp_path)
    assert_confined(r, files, f"{traj}:1: the file {WHY[kind]}; not read")


@pytest.mark.slow  # a cua command in a child process for each of its many cases
@pytest.mark.parametrize("name", ["export-jsonl", "export-parquet", "export-sft", "view"])
@pytest.mark.parametrize("kind", WHY)
def test_a_screenshot_that_is_no_regular_file_is_refused(tmp_path, kind, name):
    run = make_run(tmp_path)
    shot = run / "trajectories" / "t" / "0_0" / "step_0000.png"
    (run.parent / "outside" / "step_0000.png").write_bytes(png() + SECRET.encode())
    replace(kind, shot, run.parent / "outside" / "step_0000.png")
    r, files = command(name, run, tmp_path)
    what = "screenshot" if name == "view" else "image"
    assert_confined(r, files, f"traj.jsonl:1: {what} 'step_0000.png' {WHY[kind]}; not read")
    assert r.returncode == 0, r.stderr
    if name == "export-sft":
        assert "could not be read; not in the sft file" in r.stderr and files[0].read_text() == ""
    if name == "view":
        assert not (tmp_path / "out" / "shots").exists()


RUN_FILES = {"episodes.jsonl": ["stats", "export-jsonl", "export-parquet", "export-sft", "view", "check-logprobs",
                                "replay"],
             "scheduled.jsonl": ["stats", "view"],
             "run.json": ["export-jsonl"]}


# Not asked, as these never read the file: the replay provider refuses a run without an episodes.jsonl
# regular file before it reads it, and export a folder without a run.json regular file as not a run.
NEVER_READ = {("episodes.jsonl", "replay"), ("run.json", "export-jsonl")}


@pytest.mark.slow  # a cua command in a child process for each of its many cases
@pytest.mark.parametrize("kind,file,name", [(k, f, n) for k in WHY for f, names in RUN_FILES.items() for n in names
                                            if k == "link" or (f, n) not in NEVER_READ])
def test_a_run_file_that_is_no_regular_file_is_refused(tmp_path, kind, file, name):
    run = make_run(tmp_path)
    replace(kind, run / file, run.parent / "outside" / file)
    r, files = command(name, run, tmp_path)
    assert_confined(r, files, f"{run / file}: the file {WHY[kind]}; not read")
    if file.endswith(".jsonl"):  # a run whose records cannot be read is refused, not read as a run without any
        assert r.returncode == 2 and not files and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_sft_image_paths_never_point_out_of_the_run(tmp_path):
    run = make_run(tmp_path)
    folder = run / "trajectories" / "t" / "0_0"
    (folder / "link.png").symlink_to(run.parent / "outside" / "step_0000.png")
    names = ["step_0000.png", "../../../../outside/step_0000.png", "link.png", "sub/../../0_0/step_0000.png"]
    for i, name in enumerate(names):
        (run / "episodes.jsonl").write_text(episodes("t", "trajectories/t/0_0"))
        (folder / "traj.jsonl").write_text(json.dumps(step_line("Action: wait()", name)) + "\n")
        out = tmp_path / f"sft{i}.jsonl"
        r = run_cua("export", run, "--format", "sft", "--out", out)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert len(lines) == (1 if i == 0 else 0), (name, r.stderr)
        for line in lines:
            for path in line["images"]:
                full = os.path.join(line["run_dir"], path)
                assert os.path.realpath(full) == os.path.normpath(full) and full.startswith(line["run_dir"] + "/")


def test_stats_of_other_layouts_reads_only_inside(tmp_path):
    """OSWorld's and DART's folders are run folders too: a score file that is a FIFO or a
    link, and an example folder that is a link, are refused."""
    osworld = tmp_path / "osworld"
    for example in ("a", "b", "c"):
        (osworld / "web" / example).mkdir(parents=True)
        (osworld / "web" / example / "result.txt").write_text("1.0")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "result.txt").write_text("1.0")
    os.unlink(osworld / "web" / "a" / "result.txt")
    os.mkfifo(osworld / "web" / "a" / "result.txt")
    (osworld / "other").symlink_to(tmp_path / "secret" / "..", target_is_directory=True)
    (osworld / "web" / "b" / "result.txt").unlink()
    (osworld / "web" / "b" / "result.txt").symlink_to(tmp_path / "secret" / "result.txt")
    r = run_cua("stats", osworld, "--format", "json", "--by", "task")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"{osworld}/web/a/result.txt: the file is a FIFO, not a regular file; not read" in r.stderr
    assert f"{osworld}/web/b/result.txt: the file is a link; not read" in r.stderr
    assert "goes through a link; not read" in r.stderr  # other/secret
    stats = json.loads(r.stdout)["runs"][0]
    assert (stats["scheduled"], stats["errors"], stats["success_rate"]) == (3, 2, pytest.approx(1 / 3))


# -- the rule itself ----------------------------------------------------------------

PARTS = st.sampled_from(["a", "b", "..", ".", "", "link", "fifo", "/", "\0", "\ud800", "c d", "%2e%2e"])


@given(parts=st.lists(PARTS, max_size=6))
def test_a_record_path_never_resolves_outside_its_folder(tmp_path_factory, parts):
    root = tmp_path_factory.mktemp("confine")
    folder = root / "run"
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "link").symlink_to(root, target_is_directory=True)
    (folder / "a" / "link").symlink_to(folder / "a" / "b", target_is_directory=True)
    rel = "/".join(parts)
    try:
        path = confine(str(folder), rel)
    except Refused:
        return
    assert os.path.realpath(path).startswith(str(folder) + "/"), rel
    assert os.path.realpath(path) == os.path.normpath(path), rel  # no link on the way
