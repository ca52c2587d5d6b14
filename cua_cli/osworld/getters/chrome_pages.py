"""OSWorld's getters that look at Chrome's live pages through its debugging port (Playwright over CDP,
see chrome_cdp.py): the open tabs, a page loaded afresh, the active tab's elements, a page printed
to PDF, facts read off a website. The active tab is the one whose URL the accessibility tree's
address bar shows (as getters/chrome.py's active_url_from_accessTree reads it).

What the agent left is scored as OSWorld scores it, failures included: a Chrome that does not
answer is launched again as OSWorld launches it; a tab that never settles is `Error encountered`;
a page that cannot be loaded gives OSWorld's stand-in value (`Connection failed`, None, {}, the
task's `backups`). Two of these getters give a task's gold rather than the agent's work
(pdf_from_url, gotoRecreationPage_and_get_html_content): where OSWorld, failing, fabricates one (an
empty PDF, an error record) to score against, cua raises (EnvError: scoring is retried).

Most of them need the live web (the tasks name real sites); see each getter.
"""

from typing import Callable, Optional
from urllib.parse import unquote

from ..._util.atomic import write_atomic
from ..._util.retry import pause
from ...errors import BadTask, EnvError
from .. import chrome_cdp
from ..chrome_cdp import close_quietly, describe, ms
from ..local_files import safe_name
from ..registry import Extra
from .chrome import get_active_url_from_accessTree as active_url
from .context import EvalContext, need

RELAUNCH_WAIT_S = 30.0   # how long a Chrome launched again may take to answer (OSWorld: 5 s, one try)
PAGE_LOAD_S = 60.0       # OSWorld's navigation limits
TABS_IDLE_S = 30.0
FIND_S = 10.0            # info_from_website's wait for an element
ACTION_S = 30.0          # Playwright's own default, which OSWorld leaves in place for the rest


class _NoChrome(Exception):
    """Chrome did not answer, even launched again."""


def _tries(ctx: EvalContext, times: int, wait_s: float, attempt: Callable, fallback: Callable):
    """OSWorld's retry loop: `attempt()` up to `times` times, `wait_s` apart, on Playwright's errors;
    then `fallback(last_error)`."""
    _, Error = chrome_cdp.playwright_api()
    last: Exception = _NoChrome()
    for n in range(times):
        try:
            return attempt()
        except (Error, _NoChrome) as e:
            last = e
        if n + 1 < times:
            pause(wait_s, ctx.budget.should_stop, ctx.budget.deadline)
    return fallback(last)


def _browser(p, ctx: EvalContext):
    browser = chrome_cdp.connect_or_relaunch(p, ctx.desktop, ctx.budget, RELAUNCH_WAIT_S)
    if browser is None:
        raise _NoChrome()
    return browser


def _fresh_page(browser, ctx: EvalContext, limit_s: float):
    """OSWorld's `browser.new_page()`: a tab in a new, empty browser context (none of the profile's
    cookies or logins), gone when closed."""
    page = browser.new_page()
    page.set_default_timeout(ms(ctx.budget, limit_s))
    return page


def _close_fresh(page) -> None:
    if page is not None:
        close_quietly(page.context)


# -- the open tabs


def get_open_tabs_info(ctx: EvalContext, config: dict) -> list:
    """[{title, url}] of every tab of every context, in Playwright's order, once each has gone quiet
    on the network (30 s at most). OSWorld quirk: a tab that does not go quiet in time is titled
    `Error encountered`, not the `Load timeout` its code means (it catches Python's TimeoutError,
    which Playwright's is not). A Chrome that does not answer, even launched again, has no tabs."""
    chrome_cdp.cdp_url(ctx.desktop)
    _, Error = chrome_cdp.playwright_api()

    def attempt():
        with chrome_cdp.session() as p:
            try:
                browser = _browser(p, ctx)
            except _NoChrome:
                return []
            tabs = []
            for context in browser.contexts:
                for page in context.pages:
                    try:
                        page.wait_for_load_state("networkidle", timeout=ms(ctx.budget, TABS_IDLE_S))
                        tabs.append({"title": page.title(), "url": page.url})
                    except Error:
                        tabs.append({"title": "Error encountered", "url": page.url})
            return tabs

    return _tries(ctx, 2, 3.0, attempt, lambda e: [])


# -- a page loaded afresh


def get_page_info(ctx: EvalContext, config: dict) -> dict:
    """{title, url, content} of `url` loaded in a fresh context until the network is quiet. OSWorld's
    stand-ins: `Error encountered` when the loaded page cannot be read, `Connection failed` (no
    content) when it cannot be loaded twice. Its one task (a Steam cart) needs the web."""
    chrome_cdp.cdp_url(ctx.desktop)
    url = need(config, "url")
    _, Error = chrome_cdp.playwright_api()

    def attempt():
        with chrome_cdp.session() as p:
            page = _fresh_page(_browser(p, ctx), ctx, PAGE_LOAD_S)
            try:
                page.goto(url, wait_until="networkidle", timeout=ms(ctx.budget, PAGE_LOAD_S))
                try:
                    page.wait_for_load_state("networkidle", timeout=ms(ctx.budget, PAGE_LOAD_S))
                    return {"title": page.title(), "url": page.url, "content": page.content()}
                except Error:
                    return {"title": "Error encountered", "url": page.url, "content": page.content()}
            finally:
                _close_fresh(page)

    return _tries(ctx, 2, 3.0, attempt, lambda e: {"title": "Connection failed", "url": url, "content": ""})


def get_active_tab_info(ctx: EvalContext, config: dict) -> Optional[dict]:
    """{title, url, content} of the active tab's URL (the address bar's, after `goto_prefix`) loaded
    again in a fresh context, as OSWorld does (a page that needs the tab's cookies or state loads as a
    stranger sees it). None when there is no active tab, Chrome does not answer (OSWorld launches no
    new one here) or the page cannot be loaded. Its tasks' pages are on the web."""
    chrome_cdp.cdp_url(ctx.desktop)
    url = active_url(ctx, config)
    if url is None:
        return None
    _, Error = chrome_cdp.playwright_api()

    def attempt():
        with chrome_cdp.session() as p:
            browser = chrome_cdp.connect(p, chrome_cdp.cdp_url(ctx.desktop), ctx.budget, 0)
            if browser is None:
                return None
            page = _fresh_page(browser, ctx, PAGE_LOAD_S)
            try:
                page.goto(url, wait_until="networkidle", timeout=ms(ctx.budget, PAGE_LOAD_S))
                page.wait_for_load_state("networkidle", timeout=ms(ctx.budget, PAGE_LOAD_S))
                return {"title": page.title(), "url": page.url, "content": page.content()}
            except Error:
                return None
            finally:
                _close_fresh(page)

    return _tries(ctx, 2, 3.0, attempt, lambda e: None)


def get_pdf_from_url(ctx: EvalContext, config: dict) -> str:
    """The local path of `path` (a URL) loaded in a fresh context and printed to PDF, named `dest` in
    the episode folder's `expected/` (it is a task's gold). OSWorld waits 3 s more after the network
    is quiet, for the page to render; so does cua. Where OSWorld, failing three times, writes an
    empty PDF to score against, cua raises. Its one task's page is on the web."""
    chrome_cdp.cdp_url(ctx.desktop)
    url, dest = need(config, "path"), need(config, "dest")
    folder = ctx.folder / "expected"
    folder.mkdir(exist_ok=True)
    local = folder / safe_name(dest)

    def attempt():
        with chrome_cdp.session() as p:
            page = _fresh_page(_browser(p, ctx), ctx, PAGE_LOAD_S)
            try:
                page.goto(url, wait_until="networkidle", timeout=ms(ctx.budget, PAGE_LOAD_S))
                page.wait_for_load_state("networkidle", timeout=ms(ctx.budget, PAGE_LOAD_S))
                pause(3.0, ctx.budget.should_stop, ctx.budget.deadline)
                write_atomic(local, page.pdf())
                return str(local)
            finally:
                _close_fresh(page)

    def failed(e: Exception):
        raise EnvError(f"could not print {url} to PDF: {describe(e) or 'Chrome does not answer'}")

    return _tries(ctx, 3, 5.0, attempt, failed)


def get_chrome_saved_address(ctx: EvalContext, config: dict) -> str:
    """The HTML of chrome://settings/addresses in a fresh context ("" when it cannot be had). No task
    of OSWorld's uses it (its own comment says it does not work: a fresh context has no addresses)."""
    chrome_cdp.cdp_url(ctx.desktop)
    def attempt():
        with chrome_cdp.session() as p:
            page = _fresh_page(_browser(p, ctx), ctx, TABS_IDLE_S)
            try:
                page.goto("chrome://settings/addresses", wait_until="networkidle", timeout=ms(ctx.budget, TABS_IDLE_S))
                page.wait_for_load_state("networkidle", timeout=ms(ctx.budget, TABS_IDLE_S))
                return page.content()
            finally:
                _close_fresh(page)

    return _tries(ctx, 2, 3.0, attempt, lambda e: "")


def get_number_of_search_results(ctx: EvalContext, config: dict) -> int:
    """How many `.search-result` elements Google's results for "query" have (OSWorld hard-codes both;
    Google has no such class, so in practice 0); 0 when the page cannot be loaded. No task uses it."""
    chrome_cdp.cdp_url(ctx.desktop)
    def attempt():
        with chrome_cdp.session() as p:
            page = _fresh_page(_browser(p, ctx), ctx, 45.0)
            try:
                page.goto("https://google.com/search?q=query", wait_until="networkidle", timeout=ms(ctx.budget, 45.0))
                page.wait_for_load_state("networkidle", timeout=ms(ctx.budget, 45.0))
                return len(page.query_selector_all(".search-result"))
            finally:
                _close_fresh(page)

    return _tries(ctx, 2, 3.0, attempt, lambda e: 0)


# -- facts read off a website


_INFO_ACTIONS = ("inner_text", "attribute", "click_and_inner_text", "click_and_attribute")


def get_info_from_website(ctx: EvalContext, config: dict):
    """The texts or attributes `infos` asks for, read off `url` in a new tab of Chrome's own profile
    (each read starts again from `url` if a click left it; a `click_and_*` clicks through all its
    selectors but the last, then reads the last). Any failure gives the task's `backups` (None when
    it has none), as OSWorld: its one task (a Google Scholar profile) has them, so it scores offline.
    OSWorld quirk: the tab it opened stays open."""
    url = need(config, "url")
    infos = config.get("infos", [])
    if not isinstance(infos, list):
        raise BadTask("getter 'info_from_website': 'infos' must be a list")
    for n, info in enumerate(infos):
        action = info.get("action", "inner_text") if isinstance(info, dict) else None
        if action not in _INFO_ACTIONS:
            raise BadTask(f"getter 'info_from_website': infos[{n}] has no action cua knows ({action!r})")
        selector = info.get("selector")
        many = action.startswith("click_")
        if not (isinstance(selector, list) and selector and all(isinstance(s, str) for s in selector) if many
                else isinstance(selector, str)):
            raise BadTask(f"getter 'info_from_website': infos[{n}] needs a selector "
                          f"({'a list of strings' if many else 'a string'})")
        if "attribute" in action and not isinstance(info.get("attribute"), str):
            raise BadTask(f"getter 'info_from_website': infos[{n}] needs an 'attribute'")
    _, Error = chrome_cdp.playwright_api()
    chrome_cdp.cdp_url(ctx.desktop)  # a desktop that publishes no port is no failure the backups stand in for
    try:
        with chrome_cdp.session() as p:
            page = chrome_cdp.default_context(_browser(p, ctx)).new_page()
            page.goto(url, timeout=ms(ctx.budget, ACTION_S))
            page.wait_for_load_state("load", timeout=ms(ctx.budget, ACTION_S))
            out = []
            for info in infos:
                if page.url != url:
                    page.goto(url, timeout=ms(ctx.budget, ACTION_S))
                    page.wait_for_load_state("load", timeout=ms(ctx.budget, ACTION_S))
                action = info.get("action", "inner_text")
                selectors = info["selector"] if action.startswith("click_") else [info["selector"]]
                for sel in selectors[:-1]:
                    page.wait_for_selector(sel, state="attached", timeout=ms(ctx.budget, FIND_S)).click(
                        timeout=ms(ctx.budget, ACTION_S))
                    page.wait_for_load_state("load", timeout=ms(ctx.budget, ACTION_S))
                # OSWorld waits 10 s for the element read, but 30 s (Playwright's default) for the
                # last one of a click_and_attribute
                find = ACTION_S if action == "click_and_attribute" else FIND_S
                element = page.wait_for_selector(selectors[-1], state="attached", timeout=ms(ctx.budget, find))
                out.append(element.inner_text() if action.endswith("inner_text")
                           else element.get_attribute(info["attribute"]))
            return out
    except (Error, _NoChrome):
        return config.get("backups")


# -- the active tab


def get_active_tab_html_parse(ctx: EvalContext, config: dict) -> Optional[dict]:
    """Texts of the active tab's elements (the tab itself, not a fresh load: the first tab, once quiet
    on the network, whose URL is the address bar's, both percent-decoded and without trailing
    slashes), keyed as `category` asks (see `_extract`). None when there is no active tab, {} when no
    tab has its URL. OSWorld quirk: a tab that does not go quiet on the network within 60 s is
    passed over, even the active one. A Chrome that does not answer is launched again; one that still
    does not answer is an EnvError (OSWorld's getter crashes)."""
    chrome_cdp.cdp_url(ctx.desktop)
    category = need(config, "category")
    url = active_url(ctx, config)
    if url is None:
        return None
    _, Error = chrome_cdp.playwright_api()
    with chrome_cdp.session() as p:
        try:
            browser = _browser(p, ctx)
        except _NoChrome:
            raise EnvError("Chrome's debugging port does not answer, even after launching Chrome again") from None
        target = None
        for context in browser.contexts:
            for page in context.pages:
                try:
                    page.wait_for_load_state("networkidle", timeout=ms(ctx.budget, PAGE_LOAD_S))
                except Error:
                    continue
                if not page.is_closed() and _plain_url(page.url) == _plain_url(url):
                    target = page
                    break
            if target is not None:
                break
        if target is None:
            return {}
        return _extract(target, category, config, ctx)


def _plain_url(url: str) -> str:
    return unquote(url).rstrip("/")


def _extract(page, category: str, config: dict, ctx: EvalContext) -> dict:
    """What OSWorld reads for each category:
      class:      class_multiObject {class: {index: key}} the index-th element's text ("" past the end);
                  class_multiObject_child the same over the first element's own text nodes;
                  class_multiObject_only_child over each element's first h3; class_singleObject
                  {class: key} the first element's text; class_multiObject_search_exist {class:
                  [texts]} whether each text is among the elements', and `is_other_exist` whether
                  one element's is not in the list (when the list names it)
      label:      labelObject {text: key} the text of the first element showing it
      xpath:      xpathObject {xpath: key} the first match's text
      input:      inputObject {xpath: key} the first match's value
      class&url:  class_multiObject {class: [texts]} and class_multiObject_li (its li.catAllProducts'
                  spans) true for each text an element has (case aside), `is_other_exist` whether some
                  element's text is in none of them; url_include_expected [words] and
                  url_include_expected_multichoice {word: key} whether the tab's URL has the word
    Texts are stripped; an element that cannot be read reads as "" (OSWorld logs and goes on). An
    unknown category gives {}."""
    _, Error = chrome_cdp.playwright_api()
    wait = ms(ctx.budget, ACTION_S)
    out: dict = {}

    def texts(selector: str) -> list:
        try:
            return [e.text_content().strip() for e in page.query_selector_all(selector) if e]
        except Error:
            return []

    def own_texts(selector: str) -> list:
        try:
            found = [e.evaluate("n => Array.from(n.childNodes).filter(c => c.nodeType === Node.TEXT_NODE)"
                                ".map(c => c.textContent.trim()).filter(Boolean)")
                     for e in page.query_selector_all(selector)]
            return found[0] if found else []
        except Error:
            return []

    def li_texts(selector: str) -> list:
        try:
            return [e.query_selector("span").inner_text().strip()
                    for e in page.query_selector_all(selector + " li.catAllProducts") if e.query_selector("span")]
        except Error:
            return []

    def h3_texts(selector: str) -> list:
        try:
            return [e.query_selector("h3").text_content().strip()
                    for e in page.query_selector_all(selector) if e.query_selector("h3")]
        except Error:
            return []

    def by_index(objects, read: Callable[[str], list]) -> None:
        for cls, picks in _mapping(objects, "class_multiObject").items():
            found = read("." + cls)
            for index, key in _mapping(picks, "class_multiObject").items():
                i = int(index)
                out[key] = found[i] if len(found) > i else ""

    def first_text(locator, value: bool = False) -> str:
        text = locator.first.input_value(timeout=wait) if value else locator.first.text_content(timeout=wait)
        return text.strip() if text else ""

    if category == "class":
        by_index(config.get("class_multiObject", {}), texts)
        by_index(config.get("class_multiObject_child", {}), own_texts)
        by_index(config.get("class_multiObject_only_child", {}), h3_texts)
        for cls, wanted in _mapping(config.get("class_multiObject_search_exist", {}), "search_exist").items():
            found = texts("." + cls)
            for text in wanted:
                if text != "is_other_exist":
                    out[text] = text in found
            if "is_other_exist" in wanted:
                if any(text not in wanted for text in found):
                    out["is_other_exist"] = True
                out.setdefault("is_other_exist", False)
        for cls, key in _mapping(config.get("class_singleObject", {}), "class_singleObject").items():
            found = texts("." + cls)
            out[key] = found[0] if found else ""
    elif category == "label":
        for label, key in _mapping(config.get("labelObject", {}), "labelObject").items():
            try:
                out[key] = "" if page.is_closed() else first_text(page.locator(f"text={label}"))
            except Error:
                out[key] = ""
    elif category == "xpath":
        for xpath, key in _mapping(config.get("xpathObject", {}), "xpathObject").items():
            try:
                found = page.locator(f"xpath={xpath}")
                if found.count() == 0:
                    # OSWorld tries the bare selector too (Playwright takes one starting with // as XPath)
                    found = page.locator(xpath)
                out[key] = first_text(found) if found.count() > 0 else ""
            except Error:
                out[key] = ""
    elif category == "input":
        for xpath, key in _mapping(config.get("inputObject", {}), "inputObject").items():
            try:
                found = page.locator(f"xpath={xpath}")
                out[key] = first_text(found, value=True) if found.count() > 0 else ""
            except Error:
                out[key] = ""
    elif category == "class&url":
        for name, read in (("class_multiObject", texts), ("class_multiObject_li", li_texts)):
            for cls, wanted in _mapping(config.get(name, {}), name).items():
                found = read("." + cls)
                for text in wanted:
                    if any(text.lower() == f.lower() for f in found):
                        out[text.lower()] = True
                if any(all(f.lower() not in w.lower() for w in wanted) for f in found):
                    out["is_other_exist"] = True
                out.setdefault("is_other_exist", False)
        here = page.url.lower()
        for word in config.get("url_include_expected", []):
            out.setdefault(word.lower(), word.lower() in here)
        for word, key in _mapping(config.get("url_include_expected_multichoice", {}), "multichoice").items():
            out.setdefault(key.lower(), word.lower() in here)
    return out


def _mapping(value, name: str):
    if not isinstance(value, (dict, list)):
        raise BadTask(f"getter 'active_tab_html_parse': {name!r} must be an object or a list")
    return value


# -- recreation.gov


def get_gotoRecreationPage_and_get_html_content(ctx: EvalContext, config: dict) -> dict:
    """{"expected": {class: text}}: OSWorld's walk through recreation.gov (search "Diamond", open the
    first result, ask for the next available dates), then the text of the `order`-th (else the first)
    element of class `class` ("__EVALUATION_FAILED__" when there is none). It is a task's gold and
    needs the web: where OSWorld, failing three times, returns an error record to score against,
    cua raises. cua waits for each page's elements where OSWorld sleeps 10 s and 30 s."""
    chrome_cdp.cdp_url(ctx.desktop)
    selector = config.get("selector")
    cls = need(config, "class") if selector == "class" else None
    _, Error = chrome_cdp.playwright_api()

    def attempt():
        with chrome_cdp.session() as p:
            page = _fresh_page(_browser(p, ctx), ctx, PAGE_LOAD_S)
            try:
                page.set_extra_http_headers({"Accept-Language": "en-US,en;q=0.9", "DNT": "1",
                                             "Upgrade-Insecure-Requests": "1"})
                for url in ("https://www.recreation.gov/", "http://www.recreation.gov/", "https://recreation.gov/"):
                    try:
                        page.goto(url, wait_until="domcontentloaded", timeout=ms(ctx.budget, PAGE_LOAD_S))
                        break
                    except Error as e:
                        last = e
                else:
                    raise last
                try:
                    page.wait_for_load_state("networkidle", timeout=ms(ctx.budget, 30.0))
                except Error:
                    pass
                page.wait_for_selector("input#hero-search-input", state="visible")
                page.fill("input#hero-search-input", "Diamond")
                page.wait_for_selector("button.nav-search-button", state="visible")
                page.click("button.nav-search-button")
                page.wait_for_selector(".search-result-highlight--success", state="visible")
                with page.expect_popup() as popup:
                    page.click(".search-result-highlight--success")
                site = popup.value
                site.set_default_timeout(ms(ctx.budget, PAGE_LOAD_S))
                site.wait_for_load_state("networkidle")
                for button in ("button.next-available", "button[class*='next-available']", "button[class*='next']",
                               ".next-available", "[data-testid*='next']"):
                    try:
                        site.wait_for_selector(button, state="visible", timeout=ms(ctx.budget, 30.0))
                        site.click(button, timeout=ms(ctx.budget, 30.0))
                        break
                    except Error:
                        continue
                expected: dict = {}
                if cls is not None:
                    try:
                        if "order" in config:
                            found = site.query_selector_all("." + cls)
                            i = int(config["order"])
                            element = found[i] if len(found) > i else None
                        else:
                            element = site.query_selector("." + cls)
                        text = element.text_content() if element is not None else None
                        expected[cls] = (text.strip() if text else text) if element is not None \
                            else "__EVALUATION_FAILED__"
                    except Error:
                        expected[cls] = "__EVALUATION_FAILED__"
                return {"expected": expected}
            finally:
                _close_fresh(page)

    def failed(e: Exception):
        raise EnvError(f"recreation.gov could not be walked through: {describe(e) or 'Chrome does not answer'}")

    return _tries(ctx, 3, 5.0, attempt, failed)


GETTERS = {
    "open_tabs_info": get_open_tabs_info,
    "page_info": get_page_info,
    "active_tab_info": get_active_tab_info,
    "pdf_from_url": get_pdf_from_url,
    "chrome_saved_address": get_chrome_saved_address,
    "number_of_search_results": get_number_of_search_results,
    "info_from_website": get_info_from_website,
    "active_tab_html_parse": get_active_tab_html_parse,
    "gotoRecreationPage_and_get_html_content": get_gotoRecreationPage_and_get_html_content,
}
EXTRA = Extra("web", {"playwright": "playwright", "lxml": "lxml", "cssselect": "cssselect"})
