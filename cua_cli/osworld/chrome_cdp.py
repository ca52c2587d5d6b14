"""Chrome on a desktop, reached from the client through the desktop's published remote debugging port
with Playwright's `connect_over_cdp`, as OSWorld's setup controller and getters reach it from their
host. Setup steps (chrome_open_tabs, chrome_close_tabs) and the live-page getters
(getters/chrome_pages.py) share this.

Playwright (the `web` extra) is imported only here and only when a step or getter runs, so cua
imports without it. It needs no browser of its own: it drives the desktop's Chrome. Its driver is a
process of its own, started for each use (`session`) and stopped after it; nothing of it outlives a
step or a getter but the tabs a task asked for.
"""

import re
import time
from contextlib import contextmanager
from typing import Iterator, Optional
from urllib.parse import ParseResult, urlparse, urlunparse

from .._util.budget import Budget
from .._util.retry import pause
from .._util.text import clip
from ..errors import EnvError
from .desktop_api import Desktop
from .registry import Extra

# How OSWorld's getters start Chrome again when it does not answer (the agent may have closed it):
# the port OSWorld's image starts Chrome on, which the desktop publishes (9222 on OSWorld's VMs is a
# socat relay to it, started by the task's own setup; cua's desktops publish 1337 itself).
LAUNCH = ["google-chrome", "--remote-debugging-port=1337"]
RETRY_PAUSE_S = 0.5       # between connection attempts
CONNECT_LIMIT_S = 30.0    # any one connection attempt


def cdp_url(desktop: Desktop) -> str:
    """The base URL of the desktop's Chrome debugging port, or EnvError when it publishes none."""
    url = desktop.app_url("chromium")
    if not url:
        raise EnvError("the desktop publishes no Chrome debugging port (its source gave no chromium port)")
    return url


# what reaching Chrome needs of cua's extras (its steps' and getters')
EXTRA = Extra("web", {"playwright": "playwright"})


def playwright_api():
    """(sync_playwright, Playwright's Error); EnvError on a host without the `web` extra: the task is
    not at fault, another host may score it."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        raise EnvError("this host lacks playwright to reach Chrome: pip install 'cua[web]'") from None
    return sync_playwright, Error


@contextmanager
def session() -> Iterator:
    """Playwright's driver, for the span of a step or getter. A driver that does not start is this
    host's failure (EnvError), never a Chrome that does not answer (which getters score)."""
    sync_playwright, Error = playwright_api()
    manager = sync_playwright()
    try:
        p = manager.__enter__()
    except (Error, OSError) as e:
        raise EnvError(f"Playwright's driver did not start: {describe(e)}") from None
    try:
        yield p
    finally:
        manager.__exit__(None, None, None)


def connect(p, url: str, budget: Budget, within_s: float):
    """A Browser over CDP, trying until `within_s` has passed (never past the deadline); None when
    Chrome never answered. The first attempt is always made."""
    _, Error = playwright_api()
    end = min(time.monotonic() + within_s, budget.deadline)
    while True:
        try:
            return p.chromium.connect_over_cdp(url, timeout=_ms(budget, CONNECT_LIMIT_S))
        except Error:
            if time.monotonic() + RETRY_PAUSE_S >= end:
                return None
        pause(RETRY_PAUSE_S, budget.should_stop, end)


def connect_or_relaunch(p, desktop: Desktop, budget: Budget, within_s: float):
    """A Browser over CDP; when Chrome does not answer, OSWorld's getters launch it again (its own
    command, through the desktop API) and try once more: cua tries for `within_s` after the launch
    (OSWorld sleeps 5 s, then tries once). None when it still does not answer."""
    url = cdp_url(desktop)
    browser = connect(p, url, budget, 0)
    if browser is None:
        desktop.launch(LAUNCH, budget)
        browser = connect(p, url, budget, within_s)
    return browser


def must_connect(p, desktop: Desktop, budget: Budget, within_s: float):
    """A Browser over CDP, trying for `within_s` (Chrome may still be starting: OSWorld's setup tries
    15 times 5 s apart); EnvError when it never answers."""
    browser = connect(p, cdp_url(desktop), budget, within_s)
    if browser is None:
        raise EnvError(f"Chrome's debugging port did not answer within {within_s:.0f} s")
    return browser


def ms(budget: Budget, limit_s: float) -> float:
    """A Playwright timeout (ms): `limit_s`, cut short by the budget."""
    return _ms(budget, limit_s)


def _ms(budget: Budget, limit_s: float) -> float:
    return max(1.0, budget.timeout(limit_s) * 1000.0)


def describe(e: Exception) -> str:
    """Playwright's message without its call log."""
    return clip(str(e).split("\nCall log:")[0].strip(), 300)


def default_context(browser):
    """The browser's first context (Chrome's own profile), as OSWorld takes it; EnvError when there is
    none (Chrome answered but has no profile context: not a state a task can be set up in)."""
    if not browser.contexts:
        raise EnvError("Chrome answered but has no browser context")
    return browser.contexts[0]


def close_quietly(thing: Optional[object]) -> None:
    """Close a Playwright page, context or browser connection, ignoring one already gone."""
    if thing is None:
        return
    _, Error = playwright_api()
    try:
        thing.close()
    except Error:
        pass


def same_page_url(a: str, b: str) -> bool:
    """Whether two URLs name one page as OSWorld's `compare_urls` judges it (chrome_close_tabs closes
    a tab by it): scheme and host lower-cased (http:// assumed without a scheme), a lone `www`
    subdomain, the public suffix and the port dropped, a path of `/` as none; params, query and
    fragment kept. OSWorld's tldextract may fetch the current public suffix list; cua reads the one
    tldextract ships, offline (they differ only for suffixes added since)."""
    return _normal_url(a) == _normal_url(b)


_EXTRACT = None


def _normal_url(url: str) -> str:
    global _EXTRACT
    if _EXTRACT is None:
        try:
            import tldextract
        except ImportError:
            raise EnvError("this host lacks tldextract to compare URLs: pip install 'cua[web]'") from None
        _EXTRACT = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
    if not re.match(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://", url):
        url = "http://" + url
    parts = urlparse(url)
    found = _EXTRACT(parts.netloc.lower())
    sub = "" if found.subdomain == "www" else found.subdomain
    host = f"{sub}.{found.domain}" if sub else found.domain
    return urlunparse(ParseResult(parts.scheme.lower(), host, "" if parts.path == "/" else parts.path,
                                  parts.params, parts.query, parts.fragment))
