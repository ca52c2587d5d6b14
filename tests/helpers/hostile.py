"""Hostile run folders: a small run whose every file some reader reads is there, a folder beside it
holding what must never be read, and JSON values of every wrong kind for the fields readers use."""

import io
import json
from pathlib import Path

from hypothesis import strategies as st
from PIL import Image

SECRET = "OUTSIDE-SECRET-7f3a"  # in every file outside the run: it must never reach an output

# Each file of a run folder, relative to it.
TRAJ = "trajectories/t/0_0/traj.jsonl"
RUN_FILES = ("run.json", "scheduled.jsonl", "episodes.jsonl", TRAJ, "metrics.jsonl", "unsupported.jsonl",
             "leases.jsonl", "env-server.json")


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buf, "PNG")
    return buf.getvalue()


def step_line(response: str = "Action: finished(content='inside')") -> dict:
    return {"step": 0, "screenshot": "step_0000.png", "response": response, "thought": "t",
            "action": [{"type": "click", "x": 1, "y": 2}], "commands": [], "width": 8, "height": 6,
            "timings": {"env_s": 0.1},
            "prompt": [{"role": "user", "content": [{"type": "text", "text": "go"},
                                                    {"type": "image_file", "file": "step_0000.png"}]}],
            "prompt_token_ids": [1, 2, 3], "response_token_ids": [4, 5], "response_logprobs": [-0.1, -0.2],
            "sampling": {"guided": False},
            "failed_tries": [{"response": "no action", "prompt_token_ids": [1, 2, 3], "response_token_ids": [6],
                              "response_logprobs": [-1.5], "error": "parse"}]}


def episode_line(traj: str = "trajectories/t/0_0") -> dict:
    return {"task_id": "t", "domain": "d", "sample": 0, "attempt": 0, "outcome": "success", "reward": 1.0,
            "score": 1.0, "steps": 1, "stop_reason": "finished", "duration_s": 1.0, "error": None, "traj": traj,
            "started_at": 1_700_000_000.0, "claim_wait_s": 0.5, "lane": "0",
            "phases": {"allocate_s": 0.1, "setup_s": 0.1, "observe_s": 0.1, "model_s": 0.4, "act_s": 0.1,
                       "evaluate_s": 0.1, "release_s": 0.05, "other_s": 0.05}}


def contents(secret: str = "inside") -> dict[str, str]:
    """The text of each run file (but traj.jsonl's screenshot), saying `secret` where a reader shows text."""
    metric = {"server": "http://127.0.0.1:9", "up": True, "running": 1, "waiting": 0, "kv_usage": 0.5,
              "prompt_tokens": 10, "generation_tokens": 5}
    return {
        "run.json": json.dumps({"format_version": 2, "run_id": secret, "config": {
            "runner": {"num_envs": 1, "sample_s": 1}, "env": {"kind": "osworld", "url": "local", "token_env": None,
                                                              "osworld": {"limits": {"enforce": True,
                                                                                     "memory_gib": 4}}}}}),
        "scheduled.jsonl": json.dumps({"task_id": "t", "domain": "d", "sample": 0}) + "\n",
        "episodes.jsonl": json.dumps({**episode_line(), "error": secret}) + "\n",
        TRAJ: json.dumps(step_line(secret)) + "\n",
        "metrics.jsonl": "".join(json.dumps({**metric, "t": 1_700_000_000.0 + i, "server": f"http://{secret}"}) + "\n"
                                 for i in range(3)),
        "unsupported.jsonl": json.dumps({"task_id": "u", "domain": "d", "missing": [secret]}) + "\n",
        "leases.jsonl": "",
        "env-server.json": json.dumps({"url": f"http://{secret}", "pid": 2 ** 22 + 1}),
    }


def make_run(root: Path) -> Path:
    """`root`/run, a finished run of one pair with every run file, and `root`/outside holding the same
    files saying SECRET."""
    run, outside = root / "run", root / "outside"
    for folder, secret in ((run, "inside"), (outside, SECRET)):
        (folder / "trajectories" / "t" / "0_0").mkdir(parents=True)
        for name, text in contents(secret).items():
            (folder / name).write_text(text)
        (folder / "trajectories" / "t" / "0_0" / "step_0000.png").write_bytes(png())
    return run


# JSON of every kind a field may wrongly hold, as the text written into a line: the wrong type, null,
# booleans, integers no float or int64 holds, NaN and the infinities (Python's json reads them),
# strings that are no path, objects where lists are due and lists where objects are, nesting deep
# enough to reach the parser's limit.
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
    st.sampled_from([2 ** 63, 2 ** 64, -1, 0, 1, 10 ** 400, -10 ** 400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(["", "/", "..", "../outside", "/etc/passwd", "\x00", "\ud800", "a" * 300]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                       max_leaves=12)
HOSTILE = st.one_of(
    _VALUES.map(json.dumps),
    st.integers(1, 3000).map(lambda depth: "[" * depth + "]" * depth),
    st.integers(1, 3000).map(lambda depth: '{"a":' * depth + "1" + "}" * depth),
    st.sampled_from(['[{"role": 1}]', '[{"role": "user", "content": [5]}]', '[null]',
                     '[{"role": "user", "content": [{"type": "image_file", "file": "../../../../outside/x.png"}]}]',
                     '[{"role": "user", "content": [{"type": "image_file", "file": 3}]}]',
                     '[{"file": 1, "sha256": []}]', '[1, "x", true]', '[1.5, -1e400]', '[-1, 2]']))


def line_with(obj: dict, values: dict[str, str]) -> str:
    """The JSON text of `obj` with the fields in `values` set to their raw JSON text."""
    fields = {k: json.dumps(v) for k, v in obj.items()}
    fields.update(values)
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in fields.items()) + "}"
