"""OSWorld's Chrome metrics, rewritten for cua (the PDF and archive ones are with the media
metrics): the active tab's URL, the open tabs, bookmarks, cookies, history, shortcuts, experiments,
font size, extensions, a saved HTML page.

Each is called as OSWorld calls it and scores as OSWorld's scores, quirks included (marked
"OSWorld quirk"). Results come from the desktop and are the agent's doing: where OSWorld's metric
crashes on what the getter found (no Cookies database, a font size that is no number, a result of
the wrong shape), the score here is 0. What is wrong with the task's own rule (an unknown rule type,
a missing key, a regular expression that does not compile) raises.

URLs are compared as OSWorld's `compare_urls` compares them: a scheme added when there is none,
the host without its public suffix and without a lone "www" subdomain, "/" as no path, the rest as
it is. The public suffixes are tldextract's bundled list (OSWorld's tldextract fetches the current
list once where it can: the two differ only for suffixes added since tldextract's release).
"""

import re
from itertools import product
from typing import Any, Callable, Optional
from urllib.parse import ParseResult, urlparse, urlunparse

from ..registry import Extra

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://")
_suffixes = None


def _registered_domain(host: str):
    global _suffixes
    if _suffixes is None:
        import tldextract

        # the bundled list only: no download, no cache on disk
        _suffixes = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=())
    return _suffixes(host)


def _normal_url(url: str) -> str:
    parsed = urlparse(url if _SCHEME.match(url) else f"http://{url}")
    host = _registered_domain(parsed.netloc.lower())
    subdomain = "" if host.subdomain == "www" else host.subdomain
    netloc = f"{subdomain}.{host.domain}" if subdomain else host.domain
    return urlunparse(ParseResult(scheme=parsed.scheme.lower(), netloc=netloc,
                                  path="" if parsed.path == "/" else parsed.path,
                                  params=parsed.params, query=parsed.query, fragment=parsed.fragment))


class _Crash(Exception):
    """Where OSWorld's metric crashes on what the agent left: the metric scores 0."""


def same_url(a, b) -> bool:
    """OSWorld's compare_urls. _Crash where it crashes: a URL that is no string, or one urlparse
    refuses (an unbalanced "[" in the host)."""
    if a is None or b is None:
        return a == b
    if not isinstance(a, str) or not isinstance(b, str):
        raise _Crash
    try:
        return _normal_url(a) == _normal_url(b)
    except ValueError:
        raise _Crash from None


def _same_lists(expected: list, actual: list) -> bool:
    """OSWorld's are_lists_equal: as many, and each expected URL matches some actual one (an actual
    URL may be matched twice and another not at all: OSWorld quirk)."""
    return len(expected) == len(actual) and all(any(same_url(e, a) for a in actual) for e in expected)


def _or_zero(score: Callable[[], float]) -> float:
    try:
        return score()
    except _Crash:
        return 0.0


def _url_of(info) -> Any:
    return info.get("url", None) if isinstance(info, dict) else info


# -- the active tab and the open tabs

def is_expected_active_tab(active_tab_info, rule=None) -> float:
    if not active_tab_info:
        return 0.0
    if rule["type"] != "url":
        return 0.0  # OSWorld logs an unknown type and scores 0
    return _or_zero(lambda: float(same_url(rule["url"], _url_of(active_tab_info))))


def is_expected_active_tab_approximate(active_tab_info, rule=None) -> float:
    """The URL without its query is the expected one without its query (no other normalisation)."""
    if not active_tab_info:
        return 0.0
    if rule["type"] != "url":
        return 0.0
    expected, actual = rule["url"], _url_of(active_tab_info)
    if not isinstance(actual, str):  # OSWorld crashes on a tab without a URL
        return 0.0
    try:
        return float(_without_query(expected) == _without_query(actual))
    except ValueError:
        return 0.0


def _without_query(url: str) -> str:
    return urlunparse(urlparse(url)._replace(query=""))


def is_expected_url_pattern_match(result, rules=None) -> float:
    """Every regular expression of `rules["expected"]` is found in the URL (the result, or its "url").
    OSWorld quirk: a string of `expected` is taken letter by letter, each letter a pattern."""
    if not result:
        return 0.0
    if isinstance(result, str):
        url = result
    elif isinstance(result, dict) and "url" in result:
        url = result["url"]
    else:
        return 0.0
    for pattern in [re.compile(p) for p in rules["expected"]]:
        if not isinstance(url, str) or not pattern.search(url):  # a URL that is no text crashes OSWorld
            return 0.0
    return 1.0


def is_expected_search_query(active_tab_info, rules=None) -> float:
    if not active_tab_info:
        return 0.0
    pattern = re.compile(rules["expect"]["pattern"])
    url = active_tab_info.get("url") if isinstance(active_tab_info, dict) else None
    if not isinstance(url, str):  # OSWorld crashes on a result without a "url"
        return 0.0
    return float(pattern.search(url) is not None)


def is_expected_tabs(open_tabs, rule=None) -> float:
    """The open tabs' URLs are the expected ones, in any order, as `compare_urls` compares them."""
    if not open_tabs:
        return 0.0
    if rule["type"] != "url":
        return 0.0
    expected = rule["urls"]
    try:
        actual = [tab["url"] for tab in open_tabs]
    except (KeyError, TypeError, IndexError):  # OSWorld crashes on tabs without URLs
        return 0.0
    return _or_zero(lambda: float(_same_lists(expected, actual)))


def is_added_to_steam_cart(active_tab_info, rule=None) -> float:
    items = rule["items"]
    try:
        content = active_tab_info["content"]
        return float(all(item in content for item in items))
    except (KeyError, TypeError, IndexError):  # no page content to look in: OSWorld crashes
        return 0.0


# -- the profile's settings

_BOOKMARK_RULES = ("bookmark_bar_folders_names", "bookmark_bar_websites_urls", "liked_authors_websites_urls")


def is_expected_bookmarks(bookmarks, rule=None) -> float:
    """The bookmark bar's folder names, or its site URLs, are the expected set; or its folder
    "Liked Authors" holds one URL of each expected author (an author is a URL or a list of them)."""
    if not bookmarks:
        return 0.0
    kind = rule["type"]
    if kind not in _BOOKMARK_RULES:
        raise ValueError(f"is_expected_bookmarks: rule type {kind!r} is not one of {_BOOKMARK_RULES}")
    wanted = set(rule["names"]) if kind == "bookmark_bar_folders_names" else None
    if kind == "bookmark_bar_websites_urls":
        wanted = set(rule["urls"])
    choices = [[u] if isinstance(u, str) else u for u in rule["urls"]] if kind == "liked_authors_websites_urls" else []
    try:
        bar = bookmarks["bookmark_bar"]["children"]
        if kind == "bookmark_bar_folders_names":
            return float(set(b["name"] for b in bar if b["type"] == "folder") == wanted)
        if kind == "bookmark_bar_websites_urls":
            return float(set(b["url"] for b in bar if b["type"] == "url") == wanted)
        folder = next((b for b in bar if b["type"] == "folder" and b["name"] == "Liked Authors"), None)
        if folder is None:
            return 0.0
        liked = set(b["url"] for b in folder["children"] if b["type"] == "url")
    except (KeyError, TypeError, IndexError, AttributeError):  # what the agent left is no bookmark tree
        return 0.0
    return float(any(set(pick) == liked for pick in product(*choices)))


def is_cookie_deleted(cookie_data, rule=None) -> float:
    """No cookie's host matches any of the rule's domains (as compare_urls compares them)."""
    if rule["type"] != "domains":
        raise ValueError(f"is_cookie_deleted: rule type {rule['type']!r} is not 'domains'")
    hosts = _column(cookie_data, 1)
    if hosts is None:  # no Cookies database: OSWorld crashes
        return 0.0
    # a host that is no text crashes OSWorld's compare_urls: 0 as well
    return _or_zero(lambda: float(not any(same_url(domain, host) for domain in rule["domains"] for host in hosts)))


def check_history_deleted(history_data, rule=None) -> float:
    """No visited URL holds any of the rule's keywords."""
    if rule["type"] != "keywords":
        raise ValueError(f"check_history_deleted: rule type {rule['type']!r} is not 'keywords'")
    urls = _column(history_data, 0)
    if urls is None:  # no History database: OSWorld crashes
        return 0.0
    for keyword in rule["keywords"]:
        for url in urls:
            if not isinstance(url, str):
                return 0.0  # OSWorld crashes on a URL that is no text
            if keyword in url:
                return 0.0
    return 1.0


def _column(rows, index: int) -> Optional[list]:
    """The column of the getter's rows; None where OSWorld's indexing crashes (no rows at all)."""
    try:
        return [row[index] for row in rows]
    except (IndexError, TypeError, KeyError):
        return None


def is_shortcut_on_desktop(shortcuts, rule=None) -> float:
    """A Desktop shortcut has the line `Name=<name>` (or `Exec=<exec>`), ending in a line break."""
    kind = rule["type"]
    if kind not in ("name", "exec"):
        raise ValueError(f"is_shortcut_on_desktop: rule type {kind!r} is not supported (OSWorld's neither)")
    line = ("Name=" + rule["name"] if kind == "name" else "Exec=" + rule["exec"]) + "\n"
    if not isinstance(shortcuts, dict):  # no Desktop folder or an unreadable shortcut: OSWorld crashes
        return 0.0
    return float(any(isinstance(text, str) and line in text for text in shortcuts.values()))


def check_enabled_experiments(enabled_experiments, rule=None) -> float:
    """The enabled chrome://flags experiments, without their "@<option>", are the expected list in order."""
    if rule["type"] != "names":
        raise ValueError(f"check_enabled_experiments: rule type {rule['type']!r} is not 'names'")
    try:
        names = [experiment.split("@")[0] for experiment in enabled_experiments]
    except (TypeError, AttributeError):  # not a list of texts: OSWorld crashes
        return 0.0
    return float(names == rule["names"])


def check_font_size(font_size, rule=None) -> float:
    """The default font size equals `value`, or lies strictly between `min` and `max`."""
    kind = rule["type"]
    if kind not in ("value", "range"):
        raise ValueError(f"check_font_size: rule type {kind!r} is neither 'value' nor 'range'")
    if not isinstance(font_size, dict) or "default_font_size" not in font_size:
        return 0.0  # OSWorld crashes
    size = font_size["default_font_size"]
    if kind == "value":
        return float(size == rule["value"])
    try:
        return float(rule["min"] < size < rule["max"])
    except TypeError:  # a size that is no number: OSWorld crashes
        return 0.0


def is_expected_installed_extensions(installed_extensions, expected=None) -> float:
    """The expected extension names are all among the installed ones. OSWorld quirk: its getter's
    fallback "Google" is taken as the letters G, o, g, l, e."""
    if not installed_extensions:
        return 0.0
    wanted = set(expected["expected"])
    try:
        installed = set(installed_extensions)
    except TypeError:  # names that are no text: OSWorld crashes
        return 0.0
    return float(wanted <= installed)


# -- a saved page

def compare_htmls(html_path1, html_path2=None, **options) -> float:
    """The two pages' elements, walked in document order (BeautifulSoup over lxml, as OSWorld parses
    them), have the same names, stripped texts and attributes (`ignore_sdnum`: but for LibreOffice's
    number formats); texts and comments between them are equal. OSWorld quirk: the walk stops at the
    end of the shorter page, so a page that is the start of the other matches it."""
    from bs4 import BeautifulSoup, Tag

    mine = _page(html_path1)
    if mine is None:
        return 0.0
    gold = _page(html_path2, strict=True)
    soup1, soup2 = BeautifulSoup(mine, "lxml"), BeautifulSoup(gold, "lxml")
    ignore_sdnum = options.get("ignore_sdnum", None)

    def same(a, b) -> bool:
        if not (isinstance(a, Tag) and isinstance(b, Tag)):
            return a == b
        if a.name != b.name or a.text.strip() != b.text.strip():
            return False
        if a.attrs != b.attrs:
            if ignore_sdnum:
                return ({k: v for k, v in a.attrs.items() if k != "sdnum"}
                        == {k: v for k, v in b.attrs.items() if k != "sdnum"})
            return False
        return True

    return float(all(same(a, b) for a, b in zip(soup1.descendants, soup2.descendants)))


def _page(path, strict: bool = False) -> Optional[str]:
    """The file's text, read as OSWorld reads it (UTF-8, universal newlines); None for the agent's
    file when it is missing or not UTF-8 (OSWorld crashes), an exception for the task's own."""
    if not strict and not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        if strict:
            raise
        return None


METRICS: dict[str, Callable[..., Any]] = {f.__name__: f for f in (
    is_expected_active_tab, is_expected_active_tab_approximate, is_expected_url_pattern_match,
    is_expected_search_query, is_expected_tabs, is_added_to_steam_cart, is_expected_bookmarks, is_cookie_deleted,
    check_history_deleted, is_shortcut_on_desktop, check_enabled_experiments, check_font_size,
    is_expected_installed_extensions, compare_htmls)}
EXTRA = Extra("web", {"tldextract": "tldextract", "bs4": "beautifulsoup4", "lxml": "lxml"})
