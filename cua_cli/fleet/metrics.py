"""Reading vLLM's Prometheus /metrics: load gauges and prefix-cache counters."""

import re

from .server import HTTP

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eE]+|NaN|[+-]?Inf)$")


def parse(text: str) -> dict[str, float]:
    """Sum each metric over its labels (one model per server)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


def fetch(url: str, timeout: float = 3.0) -> dict[str, float]:
    """The server's metrics, within `timeout` for the whole answer; HttpError otherwise."""
    r = HTTP.get(f"{url}/metrics", timeout)
    r.raise_for_status()
    return parse(r.text)
