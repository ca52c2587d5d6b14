"""GPU specs (`0-7`, `0,2,4`, `0-3,6`) and their grouping into tensor-parallel groups."""

from ..errors import GpuSpecError

MAX_GPU_ID = 1023  # no host has more; a bigger id is a typo, and a huge range would never end


def parse_gpus(spec: str) -> list[int]:
    """`0-3,6` -> [0, 1, 2, 3, 6]; duplicates and bad ranges are errors."""
    out: list[int] = []
    if len(spec) > 4096:
        raise GpuSpecError("bad GPU spec: longer than 4096 characters")
    for part in spec.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            ids = range(int(lo), int(hi) + 1) if sep else [int(part)]
        except ValueError:
            raise GpuSpecError(f"bad GPU spec {spec!r}: {part!r} is not a number or a range like 0-3") from None
        if sep and int(lo) > int(hi):
            raise GpuSpecError(f"bad GPU spec {spec!r}: range {part!r} runs backwards")
        if ids and ids[-1] > MAX_GPU_ID:
            raise GpuSpecError(f"bad GPU spec {spec!r}: GPU ids go up to {MAX_GPU_ID}")
        for i in ids:
            if i < 0:
                raise GpuSpecError(f"bad GPU spec {spec!r}: negative GPU id {i}")
            if i in out:
                raise GpuSpecError(f"bad GPU spec {spec!r}: GPU {i} listed twice")
            out.append(i)
    return out


def group_gpus(gpus: list[int], tp: int) -> list[list[int]]:
    """Consecutive groups of `tp` GPUs, one server each."""
    if tp < 1:
        raise GpuSpecError(f"--tp must be >= 1, got {tp}")
    if len(gpus) % tp:
        raise GpuSpecError(f"{len(gpus)} GPUs do not split into groups of --tp {tp}")
    return [gpus[i:i + tp] for i in range(0, len(gpus), tp)]
