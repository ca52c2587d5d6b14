"""cua's Chrome metrics and check_accessibility_tree against OSWorld's own code (desktop-env 1.0.2,
see helpers/osworld_reference.py), on generated results and the rules OSWorld's real task files
pass: the score must be OSWorld's, or 0 where OSWorld's metric crashes on what the agent left.

OSWorld's compare_urls asks tldextract's module-level extractor, which downloads the public suffix
list once where it can; here both sides use tldextract's bundled list (as cua always does)."""

import copy
import json
import string
import sys

import pytest
import tldextract
from helpers.osworld_reference import reference_apart
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cua_cli.osworld.metrics import METRICS, accessibility, chrome

CRASH = "crash"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def osw():
    """OSWorld's metrics/chrome.py, its compare_urls on tldextract's bundled list."""
    module = reference_apart("metrics.chrome", ("fitz", "borb.pdf", "imagehash", "PIL"))
    utils = sys.modules["desktop_env.evaluators.metrics.utils"]
    before = utils.tldextract
    offline = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=())
    utils.tldextract = type("Offline", (), {"extract": staticmethod(offline)})
    yield module
    utils.tldextract = before


def theirs(fn, *args, **options):
    """OSWorld's score, or CRASH where its metric raises (the rule and result are copied: some of
    its metrics change the rule they are given)."""
    try:
        return float(fn(*copy.deepcopy(args), **options))
    except Exception:  # noqa: BLE001 - any crash of OSWorld's metric
        return CRASH


def agree(ours: float, osworld) -> None:
    event(f"OSWorld: {osworld}")  # --hypothesis-show-statistics: how many cases score 1, 0, crash
    if osworld == CRASH:
        assert ours == 0.0
    else:
        assert ours == osworld


# -- URLs: hosts with and without www and suffixes, paths, queries, and what is no URL at all

SCHEMES = ["http://", "https://", "", "HTTPS://", "chrome://", "file://"]
HOSTS = ["www.airbnb.com", "airbnb.com", "airbnb.com.sg", "www.lonelyplanet.com", "lonelyplanet.com", "drugs.com",
         "www.drugs.com", ".amazon.com", "amazon.com", "www.amazon.co.uk", "scholar.google.com", "localhost",
         "127.0.0.1:8080", "WWW.Apple.com", "shop.www.apple.com", "password-manager", "[::1]", "[bad", "github.com",
         "docs.python.org"]
PATHS = ["", "/", "/npc/", "/npp/", "/a/b", "/scores/2019/POST4", "/passwords", "/3/", "/manchester/may-weather",
         "/citations", "/search"]
QUERIES = ["", "?q=1", "?modelList=iphone-15-pro", "?hl=en&user=qRAQ5BsAAAAJ", "?q=Nereida&oq=x",
           "?search=spider-man%20toys&S=4&AgeAppropriate:Kids"]
URLS = st.one_of(st.builds(lambda *p: "".join(p), st.sampled_from(SCHEMES), st.sampled_from(HOSTS),
                           st.sampled_from(PATHS), st.sampled_from(QUERIES), st.sampled_from(["", "#side-effects"])),
                 st.sampled_from(["https://www.drugs.com/npc/", "chrome://password-manager/passwords",
                                  "https://www.nfl.com/scores/2019/POST4", "https://www.lonelyplanet.com",
                                  "https://www.apple.com/", "file:///home/user/Desktop/a.html"]))
ODD = st.sampled_from([None, "", 42, [], {}, ["https://github.com"], b"https://github.com"])
INFOS = st.one_of(URLS, st.fixed_dictionaries({"url": st.one_of(URLS, ODD)}), ODD,
                  st.fixed_dictionaries({"title": URLS}))


@SETTINGS
@given(info=INFOS, url=URLS, kind=st.sampled_from(["url", "url", "url", "title"]))
def test_the_active_tab_is_compared_as_osworld_compares_it(osw, info, url, kind):
    rule = {"type": kind, "url": url}
    agree(chrome.is_expected_active_tab(info, rule), theirs(osw.is_expected_active_tab, info, rule))
    agree(chrome.is_expected_active_tab_approximate(info, rule),
          theirs(osw.is_expected_active_tab_approximate, info, rule))


@SETTINGS
@given(tabs=st.one_of(st.lists(st.one_of(st.fixed_dictionaries({"url": URLS}), st.sampled_from([{"title": "x"}, "x"])),
                               max_size=4), ODD),
       urls=st.lists(URLS, max_size=4), kind=st.sampled_from(["url", "url", "title"]))
def test_the_open_tabs_are_compared_as_osworld_compares_them(osw, tabs, urls, kind):
    rule = {"type": kind, "urls": urls}
    agree(chrome.is_expected_tabs(tabs, rule), theirs(osw.is_expected_tabs, tabs, rule))


@SETTINGS
@given(data=st.data())
def test_the_tabs_of_osworlds_tasks_match_their_own_urls_in_any_order(osw, data):
    urls = data.draw(st.sampled_from([
        ["https://www.lonelyplanet.com", "https://www.airbnb.com", "https://www.tripadvisor.com"],
        ["https://github.com", "https://docs.python.org/3/"],
        ["https://www.apple.com/", "https://scholar.google.com/", "https://www.amazon.com/"]]))
    # the scheme counts; "www." and a last "/" do not
    tabs = [{"url": u.replace("https://www.", data.draw(st.sampled_from(["https://", "https://www."])))
             + data.draw(st.sampled_from(["", "/"] if u.count("/") == 2 else [""]))}
            for u in data.draw(st.permutations(urls))]
    tabs = tabs[:data.draw(st.integers(len(tabs) - 1, len(tabs)))]
    rule = {"type": "url", "urls": urls}
    ours = chrome.is_expected_tabs(tabs, rule)
    assert ours == theirs(osw.is_expected_tabs, tabs, rule)
    assert ours == float(len(tabs) == len(urls))


PATTERNS = ["/manchester/", "forms\\?title=&field_component_target_id=431", "AgeAppropriate:Kids",
            "search=spider[-%20]?man%20toys", "S=4", "reservation#/vehicles", "Buying-Tickets",
            "https://scholar.google.com/citations", "user=qRAQ5BsAAAAJ", "/women-jerseys/",
            "checked-bag-fee-calculator"]


@SETTINGS
@given(result=INFOS, patterns=st.one_of(st.lists(st.sampled_from(PATTERNS), max_size=3),
                                        st.sampled_from(["/npc/", "chrome", "S=4"])))
def test_url_patterns_are_searched_as_osworld_searches_them(osw, result, patterns):
    rules = {"expected": patterns}
    agree(chrome.is_expected_url_pattern_match(result, rules), theirs(osw.is_expected_url_pattern_match, result, rules))


@SETTINGS
@given(info=st.one_of(INFOS, *[st.fixed_dictionaries({"url": st.sampled_from([
    "https://www.google.com/search?q=Nereida&oq=Nereida", "https://google.com/search?q=Nereida&",
    "https://www.google.com/search?q=nereida&"])})] * 3))
def test_the_search_query_is_matched_as_osworld_matches_it(osw, info):
    rules = {"expect": {"pattern": "www\\.google\\.com.*?/search\\?q=Nereida&"}}
    agree(chrome.is_expected_search_query(info, rules), theirs(osw.is_expected_search_query, info, rules))


# -- bookmarks, cookies, history, shortcuts, experiments, font sizes, extensions

AUTHORS = [["https://jimfan.me/", "https://research.nvidia.com/person/linxi-jim-fan"],
           ["https://research.nvidia.com/person/de-an-huang", "https://ai.stanford.edu/~dahuang/"],
           ["https://yukezhu.me/", "https://www.cs.utexas.edu/people/faculty-researchers/yuke-zhu",
            "https://experts.utexas.edu/yuke_zhu", "https://research.nvidia.com/person/yuke-zhu"],
           ["http://tensorlab.cms.caltech.edu/users/anima/", "https://www.eas.caltech.edu/people/anima"]]
SITES = [u for author in AUTHORS for u in author] + ["https://jalammar.github.io/illustrated-transformer/"]
LINK = st.builds(lambda url: {"type": "url", "name": "site", "url": url}, st.sampled_from(SITES))
FOLDER = st.builds(lambda name, children: {"type": "folder", "name": name, "children": children},
                   st.sampled_from(["Favorites", "Liked Authors", "Work"]), st.lists(LINK, max_size=5))
BROKEN_NODES = st.sampled_from([{"name": "no type"}, {"type": "url", "name": "no url"}, {"type": "folder"}, "text"])
BOOKMARKS = st.one_of(
    st.builds(lambda bar: {"bookmark_bar": {"children": bar, "type": "folder"}, "other": {"children": []}},
              st.lists(st.one_of(LINK, FOLDER, FOLDER), max_size=5)),
    st.builds(lambda bar: {"bookmark_bar": {"children": bar}}, st.lists(st.one_of(LINK, BROKEN_NODES), max_size=3)),
    st.sampled_from([[], {}, {"other": {}}, ["x"], None, {"bookmark_bar": {}}]))
BOOKMARK_RULES = st.one_of(
    st.builds(lambda names: {"type": "bookmark_bar_folders_names", "names": names},
              st.lists(st.sampled_from(["Favorites", "Work"]), max_size=2)),
    st.builds(lambda urls: {"type": "bookmark_bar_websites_urls", "urls": urls},
              st.lists(st.sampled_from(SITES[-3:]), max_size=2)),
    st.just({"type": "liked_authors_websites_urls", "names": ["Liked Authors"], "urls": AUTHORS}),
    st.builds(lambda urls: {"type": "liked_authors_websites_urls", "urls": urls},
              st.lists(st.one_of(st.sampled_from(SITES), st.sampled_from(AUTHORS)), max_size=3)))


@SETTINGS
@given(bookmarks=BOOKMARKS, rule=BOOKMARK_RULES)
def test_bookmarks_are_checked_as_osworld_checks_them(osw, bookmarks, rule):
    agree(chrome.is_expected_bookmarks(bookmarks, rule), theirs(osw.is_expected_bookmarks, bookmarks, rule))


@SETTINGS
@given(picks=st.permutations(range(4)), data=st.data())
def test_liked_authors_pass_with_one_page_of_each_author(osw, picks, data):
    urls = [data.draw(st.sampled_from(AUTHORS[i])) for i in picks]
    urls = urls[:data.draw(st.integers(3, 4))]
    bookmarks = {"bookmark_bar": {"children": [{"type": "folder", "name": "Liked Authors", "children": [
        {"type": "url", "name": "x", "url": u} for u in urls]}]}}
    rule = {"type": "liked_authors_websites_urls", "names": ["Liked Authors"], "urls": copy.deepcopy(AUTHORS)}
    ours = chrome.is_expected_bookmarks(bookmarks, rule)
    assert ours == theirs(osw.is_expected_bookmarks, bookmarks, rule) == float(len(urls) == 4)


def test_an_unknown_bookmark_rule_raises_as_osworlds_does(osw):
    bookmarks = {"bookmark_bar": {"children": []}}
    with pytest.raises(ValueError):
        chrome.is_expected_bookmarks(bookmarks, {"type": "other_bookmarks"})
    assert theirs(osw.is_expected_bookmarks, bookmarks, {"type": "other_bookmarks"}) == CRASH


COOKIE_HOSTS = st.one_of(st.sampled_from([".amazon.com", "amazon.com", "www.amazon.com", ".www.amazon.com",
                                          "smile.amazon.com", "amazon.co.uk", ".google.com", "localhost", ""]),
                         st.sampled_from([None, 5, b".amazon.com"]))
COOKIES = st.one_of(st.lists(st.builds(lambda host, name: (13340000000000000, host, "", name, "v"),
                                       COOKIE_HOSTS, st.sampled_from(["sid", "session-id"])), max_size=4),
                    st.sampled_from([None, [], [(1,)], "rows"]))


@SETTINGS
@given(cookies=COOKIES, domains=st.lists(st.sampled_from([".amazon.com", "amazon.com", "google.com"]), max_size=2))
def test_deleted_cookies_are_checked_as_osworld_checks_them(osw, cookies, domains):
    rule = {"type": "domains", "domains": domains}
    agree(chrome.is_cookie_deleted(cookies, rule), theirs(osw.is_cookie_deleted, cookies, rule))


HISTORY = st.one_of(st.lists(st.tuples(st.one_of(URLS.filter(lambda u: isinstance(u, str)),
                                                 st.sampled_from(["https://www.youtube.com/watch?v=1",
                                                                  "https://m.YouTube.com", None, 7, b"youtube"])),
                                       st.sampled_from(["a title", ""]), st.integers(0, 10**17)), max_size=4),
                    st.sampled_from([None, [], [()], "rows"]))


@SETTINGS
@given(history=HISTORY, keywords=st.lists(st.sampled_from(["youtube", "amazon", "www"]), max_size=2))
def test_deleted_history_is_checked_as_osworld_checks_it(osw, history, keywords):
    rule = {"type": "keywords", "keywords": keywords}
    agree(chrome.check_history_deleted(history, rule), theirs(osw.check_history_deleted, history, rule))


SHORTCUT_LINES = ["[Desktop Entry]", "Name=Play Puzzle Game 2048", "Name=Play Puzzle Game 2048 ", "Type=Application",
                  "Exec=/opt/google/chrome/google-chrome --profile-directory=Default --app-id=x",
                  "Exec=google-chrome https://play2048.co/", "name=Play Puzzle Game 2048"]
SHORTCUTS = st.one_of(st.dictionaries(st.sampled_from(["a.desktop", "chrome-x-Default.desktop"]),
                                      st.builds(lambda lines, end: "\n".join(lines) + end,
                                                st.lists(st.sampled_from(SHORTCUT_LINES), max_size=4),
                                                st.sampled_from(["", "\n", "\r\n"])), max_size=2),
                      st.sampled_from([None]))


@SETTINGS
@given(shortcuts=SHORTCUTS, rule=st.sampled_from([{"type": "name", "name": "Play Puzzle Game 2048"},
                                                  {"type": "exec", "exec": "google-chrome https://play2048.co/"}]))
def test_desktop_shortcuts_are_checked_as_osworld_checks_them(osw, shortcuts, rule):
    agree(chrome.is_shortcut_on_desktop(shortcuts, rule), theirs(osw.is_shortcut_on_desktop, shortcuts, rule))


def test_shortcut_rules_osworld_lacks_raise():
    for kind in ("url", "id", "title"):
        with pytest.raises(ValueError):
            chrome.is_shortcut_on_desktop({}, {"type": kind})


EXPERIMENTS = st.one_of(st.just(["chrome-refresh-2023@1", "chrome-webui-refresh-2023@2"]),
                        st.lists(st.sampled_from(["chrome-refresh-2023@1", "chrome-webui-refresh-2023@2",
                                                  "chrome-refresh-2023", "tab-groups@1"]), max_size=3),
                        st.sampled_from([[], None, 5, "chrome-refresh-2023", [1], {"chrome-refresh-2023": 1}]))


@SETTINGS
@given(enabled=EXPERIMENTS)
def test_enabled_experiments_are_checked_as_osworld_checks_them(osw, enabled):
    rule = {"type": "names", "names": ["chrome-refresh-2023", "chrome-webui-refresh-2023"]}
    agree(chrome.check_enabled_experiments(enabled, rule), theirs(osw.check_enabled_experiments, enabled, rule))


FONT_SIZES = st.one_of(st.fixed_dictionaries({"default_font_size": st.one_of(
    st.integers(8, 40), st.sampled_from([16.0, 16.5, None, "20", True])), "minimum_font_size": st.just(13)}),
    st.sampled_from([{}, {"minimum_font_size": 20}, None, [], "16"]))


@SETTINGS
@given(size=FONT_SIZES, rule=st.sampled_from([{"type": "range", "min": 16, "max": 99999},
                                              {"type": "value", "value": 20}, {"type": "value", "value": 16}]))
def test_font_sizes_are_checked_as_osworld_checks_them(osw, size, rule):
    agree(chrome.check_font_size(size, rule), theirs(osw.check_font_size, size, rule))


EXTENSIONS = ["Zoom Chrome Extension", "Speechify Text to Speech Voice Reader", "React Developer Tools", "Momentum",
              "Google Translate"]


@SETTINGS
@given(installed=st.one_of(st.lists(st.sampled_from(EXTENSIONS + ["uBlock Origin"]), max_size=7),
                           st.sampled_from(["Google", None, [], [["x"]]])),
       expected=st.one_of(st.just(EXTENSIONS), st.lists(st.sampled_from(EXTENSIONS + ["G", "o"]), max_size=2)))
def test_installed_extensions_are_checked_as_osworld_checks_them(osw, installed, expected):
    rules = {"expected": expected}
    agree(chrome.is_expected_installed_extensions(installed, rules),
          theirs(osw.is_expected_installed_extensions, installed, rules))


@SETTINGS
@given(info=st.one_of(st.fixed_dictionaries({"content": st.sampled_from([
    "<div>The Dota 2 Official Soundtrack</div><div>Portal 2</div>", "<div>Your cart is empty</div>", ""])}),
    st.sampled_from([None, {}, "The Dota 2 Official Soundtrack", {"content": None}, {"content": ["x"]}])),
    items=st.lists(st.sampled_from(["The Dota 2 Official Soundtrack", "Portal 2"]), max_size=2))
def test_the_steam_cart_is_checked_as_osworld_checks_it(osw, info, items):
    rule = {"items": items}
    agree(chrome.is_added_to_steam_cart(info, rule), theirs(osw.is_added_to_steam_cart, info, rule))


# -- a saved HTML page

CELL_TEXT = st.sampled_from(["", "Total", " 1,234 ", "1234", "é", "<b>bold</b>", "<br>", "a &amp; b", "<!-- c -->"])
CELL_ATTRS = st.dictionaries(st.sampled_from(["sdnum", "sdval", "class", "align"]),
                             st.sampled_from(["1033;0;0.00", "1033;1033;@", "a b", "left", "1234"]), max_size=2)
ROWS = st.lists(st.lists(st.tuples(CELL_ATTRS, CELL_TEXT), min_size=1, max_size=3), min_size=1, max_size=4)


def _html(rows, tail: str = "") -> str:
    body = "".join("<tr>" + "".join("<td" + "".join(f' {k}="{v}"' for k, v in attrs.items()) + f">{text}</td>"
                                    for attrs, text in row) + "</tr>\n" for row in rows)
    return f"<html><head><title>Survey</title></head><body><table>\n{body}</table>{tail}</body></html>\n"


@settings(SETTINGS, max_examples=80)
@given(rows=ROWS, data=st.data(), ignore_sdnum=st.sampled_from([None, True, False]))
def test_saved_pages_are_compared_as_osworld_compares_them(osw, tmp_path, rows, data, ignore_sdnum):
    other = copy.deepcopy(rows)
    change = data.draw(st.sampled_from(["none", "text", "attrs", "drop_row", "tail", "crlf"]))
    r = data.draw(st.integers(0, len(other) - 1))
    c = data.draw(st.integers(0, len(other[r]) - 1))
    if change == "text":
        other[r][c] = (other[r][c][0], data.draw(CELL_TEXT))
    elif change == "attrs":
        other[r][c] = (data.draw(CELL_ATTRS), other[r][c][1])
    elif change == "drop_row":
        del other[r]
    gold, mine = tmp_path / "gold.html", tmp_path / "mine.html"
    gold.write_text(_html(rows), encoding="utf-8")
    text = _html(other, "<p>more</p>" if change == "tail" else "")
    mine.write_bytes(text.replace("\n", "\r\n").encode() if change == "crlf" else text.encode())
    options = {} if ignore_sdnum is None else {"ignore_sdnum": ignore_sdnum}
    agree(chrome.compare_htmls(str(mine), str(gold), **options),
          theirs(osw.compare_htmls, str(mine), str(gold), **options))


def test_a_saved_page_the_agent_broke_scores_zero(osw, tmp_path):
    gold = tmp_path / "gold.html"
    gold.write_text(_html([[({}, "x")]]), encoding="utf-8")
    latin = tmp_path / "latin.html"
    latin.write_bytes(_html([[({}, "é")]]).encode("latin-1"))
    for mine in (None, str(tmp_path / "missing.html"), str(latin)):
        assert theirs(osw.compare_htmls, mine, str(gold)) == CRASH
        assert chrome.compare_htmls(mine, str(gold)) == 0.0
    with pytest.raises(FileNotFoundError):  # the task's gold file
        chrome.compare_htmls(str(gold), str(tmp_path / "no-gold.html"))


# -- the accessibility tree

NS = {"st": "state", "attr": "attributes", "cp": "component", "txt": "text"}
XMLNS = " ".join(f'xmlns:{p}="https://accessibility.ubuntu.example.org/ns/{path}"' for p, path in NS.items())
MAILS = ["fox@someuniversity.edu", "iron@someuniversity.edu", "nancy@someuniversity.edu", "stella@someuniversity.edu",
         "fox@elsewhere.org"]
TABS = ["About Profiles", "Inbox", "Write: (no subject)", "about:profiles"]
TEXTS = st.sampled_from(["", "Inbox", "inbox", "About Profiles", "About Profile", "fox", "x & y"])


def _tree(app: str, tabs: list, recipients: list, texts: list) -> str:
    tab_xml = "".join(f'<page-tab name="{t}" st:selectable="true">{x}</page-tab>'
                      for t, x in zip(tabs, texts + [""] * 9))
    pills = "".join(f'<section attr:class="address-pill"><label attr:class="pill-label" name="{m}">{m}</label>'
                    f'</section>' for m in recipients)
    return (f'<desktop-frame {XMLNS} name="main"><application name="{app}">'
            f'<page-tab-list attr:id="tabmail-tabs">{tab_xml}</page-tab-list>'
            f'<tool-bar attr:id="MsgHeadersToolbar"><label name="From"/><label name="To"/>{pills}</tool-bar>'
            f'</application></desktop-frame>')


def _tasks_rules() -> list:
    """The rules of OSWorld's real check_accessibility_tree tasks."""
    return [
        [{"selectors": ["application[name=Thunderbird] page-tab-list[attr|id=\"tabmail-tabs\"]>page-tab"
                        "[name=\"About Profiles\"]"]}],
        [{"selectors": ["tool-bar[attr|id=MsgHeadersToolbar] label[name=To]~[attr|class=\"address-pill\"]>"
                        f"label[attr|class=\"pill-label\"][name*=\"{m}\"]"]} for m in MAILS[:4]],
    ]


GENERATED_RULES = st.lists(st.one_of(
    st.builds(lambda x: {"xpath": x}, st.sampled_from(["//page-tab[@name='Inbox']", "//label[@attr:class='pill-label']",
                                                       "//page-tab[@st:selectable='true']", "//nothing"])),
    st.builds(lambda sel, text, exact: {"selectors": sel, "text": text, "exact": exact},
              st.lists(st.sampled_from(["page-tab", "label[name*=fox]", "application > page-tab-list > page-tab",
                                        "[attr|id=tabmail-tabs] page-tab"]), min_size=1, max_size=2),
              TEXTS, st.booleans())), min_size=1, max_size=3)


@settings(SETTINGS, max_examples=100)
@given(app=st.sampled_from(["Thunderbird", "Google Chrome"]), tabs=st.lists(st.sampled_from(TABS), max_size=3),
       recipients=st.lists(st.sampled_from(MAILS), max_size=5), texts=st.lists(TEXTS, max_size=3),
       rules=st.one_of(st.sampled_from(_tasks_rules()), GENERATED_RULES))
def test_accessibility_trees_are_checked_as_osworld_checks_them(app, tabs, recipients, texts, rules):
    general = reference_apart("metrics.general", ("pdfplumber",))
    tree = _tree(app, tabs, recipients, texts)
    agree(accessibility.check_accessibility_tree(tree, rules),
          theirs(general.check_accessibility_tree, tree, rules))


def test_the_real_tasks_pass_on_the_tree_they_ask_for():
    tree = _tree("Thunderbird", ["Inbox", "About Profiles"], MAILS[:4], [])
    for rules in _tasks_rules():
        assert accessibility.check_accessibility_tree(tree, rules) == 1.0
    assert accessibility.check_accessibility_tree(_tree("Thunderbird", ["Inbox"], MAILS[:3], []),
                                                  _tasks_rules()[1]) == 0.0


def test_a_tree_that_is_no_xml_scores_zero_and_a_rule_that_is_none_raises():
    rules = _tasks_rules()[0]
    for tree in (None, "", "<a><b></a>", '<?xml version="1.0" encoding="UTF-8"?><a/>', "<a>\x01</a>"):
        assert accessibility.check_accessibility_tree(tree, rules) == 0.0
    with pytest.raises(ValueError):
        accessibility.check_accessibility_tree("<a/>", [{"text": "x"}])
    with pytest.raises(ValueError):
        accessibility.check_accessibility_tree("<a/>", [{"selectors": ["a"], "text": "x"}])


def test_entities_in_the_tree_are_not_resolved(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    tree = (f'<!DOCTYPE a [<!ENTITY x SYSTEM "{secret.as_uri()}">]><a><b name="n">&x;</b></a>')
    rule = [{"selectors": ["b"], "text": "secret", "exact": True}]
    assert accessibility.check_accessibility_tree(tree, rule) == 0.0


def test_fuzzy_texts_score_as_rapidfuzz_does():
    from rapidfuzz import fuzz

    words = ["", "Inbox", "inbox", "About Profiles", "About Profile", "x", "Ünïcode ✓", string.ascii_letters]
    for a in words:
        for b in words:
            if b:
                assert accessibility._fuzzy(a, b) == fuzz.ratio(a, b) / 100.0, (a, b)


def test_the_metrics_are_registered():
    for name in ("is_expected_active_tab", "is_expected_url_pattern_match", "is_expected_tabs", "is_expected_bookmarks",
                 "is_cookie_deleted", "is_shortcut_on_desktop", "check_history_deleted", "check_enabled_experiments",
                 "check_font_size", "is_added_to_steam_cart", "compare_htmls", "is_expected_search_query",
                 "is_expected_installed_extensions", "is_expected_active_tab_approximate", "check_accessibility_tree"):
        assert name in METRICS
    assert json.dumps(sorted(chrome.METRICS))
