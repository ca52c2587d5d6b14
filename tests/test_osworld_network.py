"""Which OSWorld tasks need the live web from their desktop (cua's own desktops have none)."""

from hypothesis import given
from hypothesis import strategies as st

from cua_cli.osworld.network import needs_network


def test_pages_a_task_opens_or_scores_need_the_network_and_local_ones_do_not():
    tabs = {"config": [{"type": "chrome_open_tabs", "parameters": {
        "urls_to_open": ["https://www.delta.com/", "http://127.0.0.1:8000/page", "https://www.apple.com"]}}],
        "evaluator": {"func": "is_expected_active_tab", "result": {"type": "active_tab_info"},
                      "expected": {"type": "rule", "rules": {"url": "https://www.example.org/"}}}}
    assert needs_network(tabs) == ["network (step 'chrome_open_tabs' opens www.apple.com, www.delta.com)",
                                   "network (getter 'active_tab_info')"]
    # a URL that is only data for the metric (a rule), a history entry, or a file the client downloads: none
    data_only = {"config": [
        {"type": "download", "parameters": {"files": [{"url": "https://drive.google.com/x", "path": "/tmp/x"}]}},
        {"type": "update_browse_history", "parameters": {"history": [{"url": "https://www.nba.com"}]}},
        {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
        {"type": "execute", "parameters": {"command": "curl -s http://localhost:8080/x", "shell": True}}],
        "evaluator": {"func": "exact_match", "result": {"type": "cloud_file", "path": "https://x.org/a", "dest": "a"},
                      "expected": {"type": "rule", "rules": {"expected": "https://www.nba.com"}}}}
    assert needs_network(data_only) == []
    fetch = {"config": [{"type": "execute", "parameters": {"command": ["wget", "https://releases.ubuntu.com/x.iso"]}}],
             "evaluator": {"func": "infeasible"}}
    assert needs_network(fetch) == ["network (step 'execute' opens releases.ubuntu.com)"]


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=40)
                           | st.sampled_from(["https://a.example/x", "http://[::1]:80/", "http://[bad", "https://"]),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=20)


@given(example=st.dictionaries(st.sampled_from(["config", "evaluator", "id"]), json_values, max_size=3))
def test_any_json_a_task_file_holds_gives_reasons_or_none_never_an_error(example):
    reasons = needs_network(example)
    assert isinstance(reasons, list) and all(r.startswith("network (") for r in reasons)
    assert len(reasons) == len(set(reasons))
