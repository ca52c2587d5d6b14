#!/usr/bin/env python3
"""A stand-in for DART-GUI's decoupled trainer: one policy-gradient step on its `rollout_run` rows.

    python scripts/dart_trainer_example.py --db-url-env CUA_DART_DB --model /ckpt/v0 --out-root /ckpt \\
        --run-id dart-loop --min-rows 8

It waits until the run has --min-rows unused rows (`used = 0`), reads each
row's trajectory folder (split_dir: DART's data_for_step_k.pt files and
image_NNNN.png screenshots), takes one GRPO-style step, saves the model to
<out-root>/v<N> (N: one more than the run's highest checkpoint version), and,
in one transaction, counts the rows as used and inserts the `checkpoint`
row (status PENDING, source train) a `model.reload_from: mysql` rollout
rolls its fleet onto. float32 on the CPU: a worked example, not a trainer.
Needs torch, transformers and PyMySQL.
"""
import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pymysql

from cua_cli.logprobs_check import load_image, load_policy, response_logprobs, save_policy

CLIP = 0.2  # PPO's epsilon
NO_SUCH_TABLE = 1146
ROWS = """SELECT id, task_id, split_dir, reward, model_version FROM rollout_run
WHERE run_id = %s AND used = 0 AND split_dir IS NOT NULL AND reward IS NOT NULL ORDER BY id"""
TOP_VERSION = """SELECT MAX(CAST(SUBSTRING(version, 2) AS UNSIGNED)) FROM checkpoint
WHERE run_id = %s AND version REGEXP '^v[0-9]+$'"""


def connect(url: str):
    u = urlsplit(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306, user=unquote(u.username or ""),
                           password=unquote(u.password or ""), database=unquote(u.path.lstrip("/")),
                           charset="utf8mb4", autocommit=True)


def wait_for_rows(db, run_id: str, need: int, timeout: float) -> list[tuple]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with db.cursor() as cur:
                cur.execute(ROWS, (run_id,))
                rows = cur.fetchall()
        except pymysql.err.ProgrammingError as e:
            if e.args[0] != NO_SUCH_TABLE:
                raise
            rows = ()  # the rollout creates the tables when it first connects
        if len(rows) >= need:
            return rows
        if time.monotonic() > deadline:
            sys.exit(f"only {len(rows)} unused rollout_run rows of run {run_id!r} after {timeout:g} s; "
                     f"--min-rows asks for {need}")
        time.sleep(2)


def steps_of(folder: Path, config, skipped: list):
    """(prompt ids, response ids, rollout logprobs, images) of each trainable step of a DART folder.

    Step k (data_for_step_k.pt) had seen screenshots image_0000..image_{k-1}; its prompt shows
    the last N of them, oldest first, N being its number of <|vision_start|> blocks (the
    agent's history_images window, as DART's splitter windows them). Left out (and added to
    `skipped`): steps without recorded tokens, and answers that sampled <|image_pad|>, which
    vLLM read as text but transformers' Qwen2-VL takes for an image placeholder.
    """
    import torch

    k = 1
    while (pt := folder / f"data_for_step_{k}.pt").is_file():
        d = torch.load(pt)
        prompt, response = d.get("prompt_token_ids", torch.tensor([])).tolist(), d["token_ids"].tolist()
        if not prompt or not response or config.image_token_id in response:
            skipped.append(pt)
        else:
            shown = prompt.count(config.vision_start_token_id)
            if shown > k:
                sys.exit(f"{pt}: the prompt shows {shown} images, but step {k} had seen only {k}")
            yield prompt, response, d["logp"], [load_image(folder / f"image_{i:04d}.png") for i in range(k - shown, k)]
        k += 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db-url-env", required=True, help="NAME of the variable holding mysql://user:pass@host:port/db")
    ap.add_argument("--model", required=True, type=Path, help="the checkpoint that sampled the rows")
    ap.add_argument("--out-root", required=True, type=Path, help="the new checkpoint goes to OUT_ROOT/v<N>")
    ap.add_argument("--run-id", required=True, help="DART's run id: of the rows read and the checkpoint row")
    ap.add_argument("--min-rows", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for --min-rows rows")
    ap.add_argument("--lr", type=float, default=1e-5)
    args = ap.parse_args()
    if not os.environ.get(args.db_url_env):
        sys.exit(f"${args.db_url_env} is not set: it should hold the database's mysql:// URL")

    import torch

    db = connect(os.environ[args.db_url_env])
    rows = wait_for_rows(db, args.run_id, args.min_rows, args.timeout)
    # GRPO without the std: each trajectory's advantage is its reward minus its task's mean over these rows.
    by_task = defaultdict(list)
    for _, task, _, reward, _ in rows:
        by_task[task].append(reward)
    mean = {task: sum(r) / len(r) for task, r in by_task.items()}

    model, processor = load_policy(args.model, "float32", "cpu")
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    optimizer.zero_grad()
    skipped = []
    steps = [(reward - mean[task], *step) for _, task, folder, reward, _ in rows
             for step in steps_of(Path(folder), model.config, skipped)]
    tokens = sum(len(response) for _, _, response, _, _ in steps)
    if not tokens:
        sys.exit(f"{len(rows)} rows, but no step of theirs recorded its tokens (model.record_tokens: true)")
    # PPO's clipped surrogate, with the rollout's logprobs as the old policy (see train_step_example.py).
    total_loss, mismatch, clipped = 0.0, 0.0, 0
    for advantage, prompt, response, rollout_logp, images in steps:
        new_logp = response_logprobs(model, processor, prompt, response, images)
        ratio = torch.exp(new_logp - rollout_logp)
        surrogate = torch.minimum(ratio * advantage, ratio.clamp(1 - CLIP, 1 + CLIP) * advantage)
        loss = -surrogate.sum() / tokens
        loss.backward()
        total_loss += loss.item()
        mismatch = max(mismatch, float((new_logp.detach() - rollout_logp).abs().max()))
        clipped += int(((ratio - 1).abs() > CLIP).sum())
    optimizer.step()
    print(f"rows: {len(rows)} of {len(by_task)} tasks (model_version {sorted({r[4] for r in rows})}); "
          f"steps: {len(steps)} ({len(skipped)} skipped); response tokens: {tokens}")
    print(f"advantages: {sum(a != 0 for a, *_ in steps)} of {len(steps)} steps nonzero; loss {total_loss:.6g}; "
          f"tokens outside the clip range: {clipped}; max |trainer - rollout logprob| {mismatch:.3g}")

    with db.cursor() as cur:
        cur.execute(TOP_VERSION, (args.run_id,))
        (top,) = cur.fetchone()
    version = f"v{(top or 0) + 1}"  # as DART's trainer numbers them: v1 first
    out = (args.out_root / version).resolve()
    if out.exists():
        sys.exit(f"{out} exists already: not overwriting a checkpoint a fleet may serve")
    save_policy(model, args.model, out)
    db.begin()  # the rows count as used exactly when the checkpoint trained on them is announced
    with db.cursor() as cur:
        cur.executemany("UPDATE rollout_run SET used = used + 1 WHERE id = %s", [(r[0],) for r in rows])
        cur.execute("INSERT INTO checkpoint (name, version, run_id, status, path, source) "
                    "VALUES ('', %s, %s, 'PENDING', %s, 'train')", (version, args.run_id, str(out)))
    db.commit()
    print(f"checkpoint {version} of run {args.run_id!r}: {out}; {len(rows)} rows marked used")
    return 0


if __name__ == "__main__":
    sys.exit(main())
