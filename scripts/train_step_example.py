#!/usr/bin/env python3
"""One GRPO policy-gradient step on the rows of a `cua export` file: how cua's export plugs into a trainer.

    cua export results/exp-20261121-0900 --format jsonl --out rows.jsonl
    python scripts/train_step_example.py rows.jsonl --model /ckpt/step-0 --out /ckpt/step-1
    cua models reload /ckpt/step-1 --version step-1

Each row is one model call: the prompt's and the response's token ids and the
response's logprobs as vLLM sampled them, the images the prompt showed, and
the episode's reward with its GRPO group's statistics. The model runs in
float32 on the CPU and is saved in float32 (a worked example, not a trainer:
a real one batches rows and shards the model). Needs `pip install -e .[check]`
(torch, transformers).
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

from cua_cli.logprobs_check import load_image, load_policy, response_logprobs, save_policy

CLIP = 0.2  # PPO's epsilon


def read_rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def usable(row: dict) -> bool:
    """Rows a policy gradient can use: a scored episode (not an infra error) with its tokens recorded."""
    return (row.get("outcome") != "error" and row.get("traj_reward") is not None and row.get("group_std") is not None
            and bool(row.get("prompt_token_ids")) and bool(row.get("response_token_ids"))
            and len(row.get("response_logprobs") or []) == len(row["response_token_ids"]))


def json_field(row: dict, key: str):
    """A field that is JSON in jsonl and a JSON string in parquet (`sampling`, `image_processor`)."""
    value = row.get(key)
    return json.loads(value) if isinstance(value, str) else value


def guided(row: dict) -> bool:
    """Sampled under a grammar."""
    sampling = json_field(row, "sampling")
    return isinstance(sampling, dict) and sampling.get("guided") is True


def images_of(row: dict) -> list:
    """The prompt's images, in order, checked against the hashes the export recorded."""
    images = []
    for im in row.get("images") or []:
        path = Path(row["run_dir"]) / im["path"]
        if im.get("sha256") is None or hashlib.sha256(path.read_bytes()).hexdigest() != im["sha256"]:
            sys.exit(f"{path}: missing, or not the image the model saw (sha256 differs)")
        images.append(load_image(path))
    return images


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export", type=Path, help="a `cua export` file: .jsonl or .parquet")
    ap.add_argument("--model", required=True, type=Path, help="the checkpoint that sampled the rows")
    ap.add_argument("--out", required=True, type=Path, help="folder for the updated checkpoint")
    ap.add_argument("--lr", type=float, default=1e-5)
    args = ap.parse_args()

    import torch

    rows = read_rows(args.export)
    train = [r for r in rows if usable(r)]
    if not train:
        sys.exit(f"{args.export}: no usable rows (need outcome != error and recorded tokens)")
    model, processor = load_policy(args.model, "float32", "cpu")
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    tokens = sum(len(r["response_token_ids"]) for r in train)

    # GRPO advantage from the export's group statistics: cua computed them over each group's
    # trajectories (one reward each, infra errors left out); recomputing them from these rows would
    # weigh every trajectory by its number of steps. Each step of a trajectory shares its advantage.
    # Loss: PPO's clipped surrogate with the rollout's own logprobs as the "old" policy, so
    # ratio = exp(new_logp - rollout_logp) per token. On the first step after sampling, new_logp is the
    # trainer's view of the same weights, so the ratio measures exactly the vLLM/trainer mismatch, and
    # clipping drops the gradient of tokens whose ratio already left [1-CLIP, 1+CLIP] in the advantage's
    # direction. (DART's truncated importance weight
    # clamp(exp(old - rollout), max=1) is the alternative when several steps reuse the same rows.)
    # Rows sampled with guided decoding (`sampling.guided`) have logprobs after vLLM's grammar mask,
    # above the model's own: their ratio is below 1 (for every token the grammar constrained).
    total_loss, clipped, ratio_sum = 0.0, 0, 0.0
    optimizer.zero_grad()
    for row in train:
        advantage = (row["traj_reward"] - row["group_mean"]) / (row["group_std"] + 1e-6)
        new_logp = response_logprobs(model, processor, row["prompt_token_ids"], row["response_token_ids"],
                                     images_of(row), json_field(row, "image_processor"))
        ratio = torch.exp(new_logp - torch.tensor(row["response_logprobs"]))
        surrogate = torch.minimum(ratio * advantage, ratio.clamp(1 - CLIP, 1 + CLIP) * advantage)
        loss = -surrogate.sum() / tokens  # a mean over every token of the batch (gradients accumulate)
        loss.backward()
        total_loss += loss.item()
        clipped += int(((ratio - 1).abs() > CLIP).sum())
        ratio_sum += float(ratio.detach().sum())
    optimizer.step()

    print(f"rows: {len(train)} used ({sum(map(guided, train))} guided), {len(rows) - len(train)} skipped; "
          f"groups: {len({r['group_id'] for r in train})}; response tokens: {tokens}")
    print(f"loss {total_loss:.6g}; mean ratio {ratio_sum / tokens:.6f}; tokens outside the clip range: {clipped}")

    save_policy(model, args.model, args.out)
    print(f"updated model written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
