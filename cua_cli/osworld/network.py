"""Which OSWorld tasks need the live web from the desktop. cua's own desktops have no network (each
runs in a network namespace of its own with loopback only), so such a task cannot be played there:
its pages would not load and the agent's failure would be counted as its own. OSWorld's VMs and
DART's desktops have the network.

A task needs it when a setup step or getter loads a page from a host that is not this machine
(Chrome's tabs, an opened URL, a command that fetches one) or when it is scored on what Chrome
shows (its tabs, their pages): the agent browses the live web there. Downloads (`download`,
`cloud_file`) are fetched by the client, with its own network or the offline files folder.
"""

import re
from urllib.parse import urlsplit

from .support import as_list, steps_and_evaluator

# getters that read Chrome's live tabs or load a page themselves
LIVE_GETTERS = ("open_tabs_info", "active_tab_info", "active_tab_html_parse", "active_tab_url_parse",
                "active_url_from_accessTree", "url_dashPart", "page_info", "info_from_website", "pdf_from_url",
                "gotoRecreationPage_and_get_html_content", "number_of_search_results", "chrome_saved_address")
# setup steps that fetch from the desktop (the client fetches `download`'s files)
FETCHING_STEPS = ("chrome_open_tabs", "open", "launch", "execute", "command")
_URL = re.compile(r"https?://[^\s\"'<>]+")
_LOCAL = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def needs_network(task: dict) -> list[str]:
    """Why the task needs the live web from its desktop ([] when it does not), e.g.
    ["network (step 'chrome_open_tabs' opens www.delta.com)", "network (getter 'active_tab_info')"]."""
    steps, evaluator = steps_and_evaluator(task)
    reasons: list[str] = []
    for step in steps + as_list(evaluator.get("postconfig")):
        if isinstance(step, dict) and step.get("type") in FETCHING_STEPS:
            hosts = _remote_hosts(step.get("parameters"))
            if hosts:
                reasons.append(f"network (step {step['type']!r} opens {', '.join(sorted(hosts)[:3])})")
    for key in ("result", "expected"):
        for getter in as_list(evaluator.get(key)):
            if isinstance(getter, dict) and getter.get("type") in LIVE_GETTERS:
                reasons.append(f"network (getter {getter['type']!r})")
    return list(dict.fromkeys(reasons))


def _remote_hosts(value) -> set[str]:
    if isinstance(value, dict):
        return set().union(*(_remote_hosts(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_remote_hosts(v) for v in value)) if value else set()
    if not isinstance(value, str):
        return set()
    hosts = set()
    for url in _URL.findall(value):
        try:
            host = urlsplit(url).hostname
        except ValueError:
            continue
        if host and host not in _LOCAL and not host.startswith("127."):
            hosts.add(host)
    return hosts

