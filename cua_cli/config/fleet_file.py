"""Reading the fleet file `cua start-models` writes (a contract: docs and DESIGN.md).

`{"supervisor_pid": int, "servers": [{"url", "pid", "gpus", "model",
"served_model_name", "started_at", ...}, ...]}`; a server is listed once it
answers /health. The rollout config's model.fleet names one; `cua models`,
`cua stop-models` and the model client read it too. The writer is fleet/server.py.
"""

import json
import os
from pathlib import Path

from .._util.text import clip
from ..errors import FleetFileError


def api_base(url: str) -> str:
    """The OpenAI-compatible base URL of a fleet server."""
    return url.rstrip("/") + "/v1"


def read_fleet(path: Path) -> dict:
    """The fleet file's contents, checked as far as readers rely on them; FleetFileError otherwise."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FleetFileError(f"{path}: no fleet file (start one with `cua start-models`)") from None
    except OSError as e:  # a folder, no permission
        raise FleetFileError(f"{path}: cannot read the fleet file: {e.strerror}") from None
    except (ValueError, RecursionError) as e:  # not JSON, not UTF-8, nested without end
        raise FleetFileError(f"{path}: not a fleet file: {clip(str(e), 200)}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("servers"), list):
        raise FleetFileError(f"{path}: not a fleet file: no 'servers' list")
    for i, server in enumerate(doc["servers"]):
        if not isinstance(server, dict) or not isinstance(server.get("url"), str) \
                or not isinstance(server.get("served_model_name", ""), str):
            raise FleetFileError(f"{path}: not a fleet file: servers[{i}] needs a 'url' string")
    return doc


class FleetVersions:
    """Each endpoint's (model version, policy version) and fleet file entry, from a fleet file read afresh
    whenever it changes."""

    def __init__(self, path):
        self.path = path
        self._seen: tuple[float, dict, dict] = (-1.0, {}, {})

    def table(self) -> dict[str, tuple[str | None, int | None]]:
        return self._read()[1]

    def entries(self) -> dict[str, dict]:
        """Each endpoint's server entry, as the fleet file lists it."""
        return self._read()[2]

    def _read(self) -> tuple[float, dict, dict]:
        try:
            mtime = os.stat(self.path).st_mtime
            if mtime != self._seen[0]:
                servers = read_fleet(self.path)["servers"]
                self._seen = (mtime, {api_base(s["url"]): (s.get("model_version") or s.get("model"),
                                                           _policy(s.get("policy_version")))
                                      for s in servers},
                              {api_base(s["url"]): s for s in servers})
        except (OSError, FleetFileError):
            pass  # mid-rewrite or gone: keep the versions last read
        return self._seen


def _policy(v) -> int | None:
    return v if type(v) is int and v >= 0 else None
