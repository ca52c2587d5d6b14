"""Reading a model server's Prometheus /metrics (vLLM's names): its load, cache and token counters.

The text is parsed with prometheus-client's own parser; a server that sends
something it cannot parse has no metrics, as one without the route.
"""

from prometheus_client.parser import text_string_to_metric_families

from .server import HTTP

# A sample's fields and the vLLM metrics they are read from, summed over labels (engines, models).
# vLLM named the KV-cache gauge gpu_cache_usage_perc before it became kv_cache_usage_perc.
LOAD = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "queue_s_sum": ("vllm:request_queue_time_seconds_sum",),
    "queue_count": ("vllm:request_queue_time_seconds_count",),
}


def parse(text: str) -> dict[str, float]:
    """Each sample's value by its name, summed over its labels (histogram buckets left out);
    ValueError if the text is not Prometheus's exposition format."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.name.endswith("_bucket"):
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def load(metrics: dict[str, float]) -> dict[str, float | None]:
    """The LOAD fields of parsed metrics; None for one the server does not report."""
    out = {}
    for field, names in LOAD.items():
        out[field] = next((metrics[n] for n in names if n in metrics), None)
    return out


def fetch(url: str, timeout: float = 3.0) -> dict[str, float]:
    """The server's metrics, within `timeout` for the whole answer; HttpError, or ValueError for
    an answer that is not Prometheus text."""
    r = HTTP.get(f"{url}/metrics", timeout)
    r.raise_for_status()
    return parse(r.text)
