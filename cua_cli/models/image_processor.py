"""What resized a prompt's images before the model saw them, as each model call records it
(`image_processor` in docs/reference/run-folder.md).

cua sends every screenshot's bytes as the env captured them and asks for no
processor settings of its own (vLLM refuses per-request ones unless started
with --trust-request-mm-kwargs), so the server's processor resizes them: with
its model folder's image processor config, under the server's own
--mm-processor-kwargs. cua knows both only for the servers of a
`cua start-models` fleet whose model is a local folder, since the fleet file
names the folder and the flags. What cua does not know is recorded as null,
never guessed: a trainer must be able to rebuild the very pixels.
"""

import json
import os

# The processors that resize with Qwen2-VL's smart_resize: both sides multiples of
# patch_size * merge_size, the pixel count within [min_pixels, max_pixels], the aspect ratio
# kept (Qwen2-VL, Qwen2.5-VL and so UI-TARS-1.5, Qwen3-VL). Matched as a prefix (...Fast).
SMART_RESIZE = ("Qwen2VLImageProcessor",)
_MAX_CONFIG_BYTES = 1 << 20

UNKNOWN = {"resized_by": "server", "config": None, "server_kwargs": None, "type": None, "rule": None,
           "factor": None, "min_pixels": None, "max_pixels": None}


def _count(v) -> int | None:
    return v if type(v) is int and v > 0 else None


def _read(path: str) -> dict | None:
    """The image processor settings a config file holds, or None (no such file, not JSON, none in it)."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read(_MAX_CONFIG_BYTES + 1)[:_MAX_CONFIG_BYTES])
    except (OSError, ValueError, RecursionError):
        return None
    if isinstance(doc, dict) and os.path.basename(path) == "processor_config.json":
        doc = doc.get("image_processor")
    return doc if isinstance(doc, dict) and "image_processor_type" in doc else None


def _pixels(settings: dict, low: int | None, high: int | None) -> tuple[int | None, int | None]:
    """(min_pixels, max_pixels) after `settings`: its `size` {shortest_edge, longest_edge}, then its
    min_pixels and max_pixels keys, which win (as transformers' Qwen2-VL processor takes them)."""
    size = settings.get("size")
    if isinstance(size, dict):
        low = _count(size.get("shortest_edge")) if "shortest_edge" in size else low
        high = _count(size.get("longest_edge")) if "longest_edge" in size else high
    low = _count(settings["min_pixels"]) if "min_pixels" in settings else low
    high = _count(settings["max_pixels"]) if "max_pixels" in settings else high
    return low, high


def model_config(model_dir: str) -> tuple[str | None, dict | None]:
    """The image processor config of a model folder, read as transformers 5 reads it (processor_config.json's
    `image_processor`, else preprocessor_config.json), and its file; (None, None) when there is none, or when
    the two files disagree on what resizes (a server's older transformers would read the other)."""
    found = [(p, _read(p)) for p in (os.path.join(model_dir, "processor_config.json"),
                                     os.path.join(model_dir, "preprocessor_config.json"))]
    found = [(p, c) for p, c in found if c is not None]
    if not found:
        return None, None
    if len(found) == 2 and _resize_fields(found[0][1]) != _resize_fields(found[1][1]):
        return None, None
    return found[0]


def _resize_fields(c: dict) -> tuple:
    return c.get("image_processor_type"), c.get("patch_size"), c.get("merge_size"), _pixels(c, None, None)


def _strict(v) -> dict | None:
    """`v` when it is an object strict JSON can hold (a record is written as JSON); else None."""
    try:
        return v if isinstance(v, dict) and json.dumps(v, allow_nan=False) else None
    except (ValueError, TypeError, RecursionError):
        return None


def settings(model_dir: str | None, server_kwargs: dict | None) -> dict:
    """The record of what resizes images on a server serving `model_dir` with `server_kwargs`
    (its --mm-processor-kwargs; None: unknown). The numbers are those in force, or null when cua
    cannot know them all."""
    server_kwargs = _strict(server_kwargs)
    record = dict(UNKNOWN, server_kwargs=server_kwargs)
    path, config = model_config(model_dir) if model_dir else (None, None)
    if config is None:
        return record
    kind = config.get("image_processor_type")
    record.update(config=path, type=kind if isinstance(kind, str) else None)
    if server_kwargs is None or not (record["type"] or "").startswith(SMART_RESIZE):
        return record  # the server's flags may override what the folder says, or the rule is not one cua knows
    patch, merge = _count(config.get("patch_size")), _count(config.get("merge_size"))
    low, high = _pixels(server_kwargs, *_pixels(config, None, None))
    record.update(rule="smart_resize", factor=patch * merge if patch and merge else None, min_pixels=low,
                  max_pixels=high)
    return record


class ServerProcessors:
    """Each served model's record, read once per (folder, flags): a rollout asks on every model call."""

    def __init__(self):
        self._known: dict[str, dict] = {}

    def of(self, entry: dict | None) -> dict:
        """The record for a server with fleet file entry `entry` (None: a server outside any fleet)."""
        if entry is None:
            return UNKNOWN
        model_dir, kwargs = entry.get("model_dir"), _strict(entry.get("mm_processor_kwargs"))
        model_dir = model_dir if isinstance(model_dir, str) and os.path.isabs(model_dir) else None
        key = json.dumps([model_dir, kwargs], sort_keys=True)
        found = self._known.get(key)
        if found is None:
            found = self._known[key] = settings(model_dir, kwargs)
        return found
