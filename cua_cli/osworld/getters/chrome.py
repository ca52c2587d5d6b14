"""OSWorld's Chrome getters that need no browser connection: they read Chrome's profile files off
the desktop (Preferences, Local State, Bookmarks as JSON; History and Cookies as SQLite), the
shortcuts on its Desktop folder, or the address bar in the accessibility tree. The getters that
drive Chrome over its debugging port are in chrome_pages.py.

Where the profile is. OSWorld asks its VM for the path by the VM's platform; its tasks run on Linux,
where (on an x86 host) it reads `~/.config/google-chrome/` (`Default/<file>`, `Local State`), so
that is the path asked for here (the desktop's server expands `~`, as OSWorld's does). On cua's
desktops `google-chrome` is Debian's Chromium, started by a wrapper that must keep its profile
there (Chromium's own default is `~/.config/chromium`).

What a getter returns for a file that is missing or broken is OSWorld's, fallback values
included, even the odd ones (see the "OSWorld quirk" notes): the metrics score those values as
OSWorld's do. A desktop that fails raises EnvError (the evaluator's EvalError).

The SQLite files are copied into the episode folder and opened read-only, as immutable files,
with untrusted schemas off and a bound on the work a query may do: they are the agent's files.
"""

import json
import sqlite3
import time
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, unquote, urlparse

from ..._util.atomic import write_atomic
from ...errors import BadTask
from ..local_files import safe_name
from ..registry import Extra
from .context import EvalContext, need, pull

PROFILE = "~/.config/google-chrome"
PREFERENCES = f"{PROFILE}/Default/Preferences"
LOCAL_STATE = f"{PROFILE}/Local State"
SQL_WORK_S = 30.0  # how long a query over the agent's SQLite file may run

_BROKEN = object()  # a file that is missing, not JSON, or not shaped as the getter reads it


# -- reading the profile's JSON files

def _json_file(ctx: EvalContext, path: str):
    """The parsed file, or _BROKEN when it is missing or no JSON (`json.loads` on the bytes, as
    OSWorld parses them: UTF-8/16/32 by their first bytes)."""
    data = pull(ctx, path)
    if data is None:
        return _BROKEN
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return _BROKEN


def _get(obj, key, default):
    """`obj.get(key, default)` as OSWorld chains it; _BROKEN where `obj` is no mapping (OSWorld's
    AttributeError, caught by its getter's fallback)."""
    if not isinstance(obj, dict):
        return _BROKEN
    return obj.get(key, default)


def _dig(obj, *steps):
    """A chain of `.get(key, default)` steps (key, default), stopping at the first _BROKEN."""
    for key, default in steps:
        obj = _get(obj, key, default)
        if obj is _BROKEN:
            return _BROKEN
    return obj


def _preference(ctx: EvalContext, fallback, *steps, path: str = PREFERENCES):
    value = _dig(_json_file(ctx, path), *steps)
    return fallback if value is _BROKEN else value


def _flag(value) -> str:
    return "true" if value else "false"


def get_default_search_engine(ctx: EvalContext, config: dict):
    return _preference(ctx, "Google", ("default_search_provider_data", {}), ("template_url_data", {}),
                       ("short_name", "Google"))


def get_enabled_experiments(ctx: EvalContext, config: dict):
    return _preference(ctx, [], ("browser", {}), ("enabled_labs_experiments", []), path=LOCAL_STATE)


def get_chrome_language(ctx: EvalContext, config: dict):
    return _preference(ctx, "en-US", ("intl", {}), ("app_locale", "en-US"), path=LOCAL_STATE)


def get_profile_name(ctx: EvalContext, config: dict):
    return _preference(ctx, None, ("profile", {}), ("name", None))


def get_chrome_font_size(ctx: EvalContext, config: dict):
    # OSWorld quirk: the default when the file is unreadable lacks the minimum size its default has
    # when the file has no webkit.webprefs.
    return _preference(ctx, {"default_fixed_font_size": 13, "default_font_size": 16},
                       ("webkit", {}), ("webprefs", {"default_fixed_font_size": 13, "default_font_size": 16,
                                                     "minimum_font_size": 13}))


def get_enable_do_not_track(ctx: EvalContext, config: dict) -> str:
    value = _dig(_json_file(ctx, PREFERENCES), ("enable_do_not_track", {}))
    return "false" if value is _BROKEN else _flag(value)


def get_enable_enhanced_safety_browsing(ctx: EvalContext, config: dict) -> str:
    value = _dig(_json_file(ctx, PREFERENCES), ("safebrowsing", {}), ("enhanced", {}))
    # OSWorld quirk: an unreadable Preferences gives "Google", not "false" (it scores as "false" does)
    return "Google" if value is _BROKEN else _flag(value)


def get_enable_safe_browsing(ctx: EvalContext, config: dict) -> str:
    safebrowsing = _dig(_json_file(ctx, PREFERENCES), ("safebrowsing", {}))
    if not isinstance(safebrowsing, dict):
        return "false"
    return _flag(safebrowsing.get("enhanced", False) or safebrowsing.get("enabled", False))


def get_new_startup_page(ctx: EvalContext, config: dict) -> str:
    """"true" when Chrome opens the New Tab page on start: no `session` preference at all (a fresh
    profile), or session.restore_on_startup 5."""
    data = _json_file(ctx, PREFERENCES)
    if not isinstance(data, dict):
        return "Google"  # OSWorld quirk: its fallback for an unreadable file
    if "session" not in data:
        return "true"
    value = _dig(data, ("session", {}), ("restore_on_startup", {}))
    return "Google" if value is _BROKEN else _flag(value == 5)


def _extensions(ctx: EvalContext, pick: Callable[[Any], Any]):
    """`pick` of each entry of extensions.settings, in the file's order; OSWorld quirk: "Google" when
    the file is unreadable or any entry lacks what `pick` reads (OSWorld's fallback string, which its
    metrics then take for a list of letters)."""
    settings = _dig(_json_file(ctx, PREFERENCES), ("extensions", {}), ("settings", {}))
    if not isinstance(settings, dict):
        return "Google"
    out = []
    for entry in settings.values():
        try:
            out.append(pick(entry))
        except (KeyError, TypeError, IndexError):
            return "Google"
    return out


def get_find_unpacked_extension_path(ctx: EvalContext, config: dict):
    return _extensions(ctx, lambda entry: _key(entry, "path"))


def get_find_installed_extension_name(ctx: EvalContext, config: dict):
    return _extensions(ctx, lambda entry: _key(_key(entry, "manifest"), "name"))


def _key(obj, key: str):
    """`obj[key]` as Python subscripts a JSON value: a mapping by its key; a list or string raises."""
    if isinstance(obj, dict):
        return obj[key]
    raise TypeError(f"{type(obj).__name__} is not a mapping")


def get_data_delete_automacally(ctx: EvalContext, config: dict) -> str:
    """OSWorld's reading of "delete site data on exit": "true" when profile.default_content_setting_values
    exists (with any value but null; a fresh profile has it too)."""
    data = _json_file(ctx, PREFERENCES)
    if not isinstance(data, dict) or "profile" not in data or not isinstance(data["profile"], dict):
        return "Google"  # OSWorld quirk: its fallback for an unreadable file
    return _flag(data["profile"].get("default_content_setting_values") is not None)


def get_bookmarks(ctx: EvalContext, config: dict):
    """The `roots` of the Bookmarks file ({} without them); [] when there is no such file or it is
    empty. A file that is not a JSON object crashes OSWorld's getter; the agent broke it: [] here,
    which every bookmark metric scores 0."""
    data = pull(ctx, f"{PROFILE}/Default/Bookmarks")
    if not data:
        return []
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):
        return []
    if not isinstance(parsed, dict):
        return []
    return parsed.get("roots", {})


# -- the SQLite files

def _rows(ctx: EvalContext, config: dict, path: str, sql: str) -> Optional[list]:
    """The rows of `sql` over the desktop's SQLite file at `path`, copied to the episode folder as
    the task's `dest`; None when the file is missing or is no database with that table (OSWorld's
    getter logs and returns None)."""
    dest = need(config, "dest")
    data = pull(ctx, path)
    if data is None:
        return None
    local = ctx.folder / safe_name(dest)
    write_atomic(local, data)
    try:
        connection = sqlite3.connect(local.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return None
    stop_at = time.monotonic() + SQL_WORK_S
    connection.set_progress_handler(lambda: int(time.monotonic() > stop_at), 10_000)
    try:
        connection.execute("PRAGMA trusted_schema = OFF")
        return connection.execute(sql).fetchall()
    except sqlite3.Error:  # no database, no such table, a view that runs too long: the agent's file
        return None
    finally:
        connection.close()


def get_cookie_data(ctx: EvalContext, config: dict) -> Optional[list]:
    """Every row of the Cookies file's `cookies` table (SELECT *: the host is the second column)."""
    return _rows(ctx, config, f"{PROFILE}/Default/Cookies", "SELECT * FROM cookies")


def get_history(ctx: EvalContext, config: dict) -> Optional[list]:
    """(url, title, last_visit_time) of every row of the History file's `urls` table."""
    return _rows(ctx, config, f"{PROFILE}/Default/History", "SELECT url, title, last_visit_time FROM urls")


# -- the Desktop folder

def get_shortcuts_on_desktop(ctx: EvalContext, config: dict) -> Optional[dict]:
    """{file name: text} of each `*.desktop` file in the Desktop folder (OSWorld's Linux shortcuts),
    or None where OSWorld's getter crashes (no Desktop folder, a shortcut it cannot read or that is
    not UTF-8): the agent's doing, scored 0."""
    folder = ctx.desktop.desktop_path(ctx.budget)
    tree = ctx.desktop.list_directory(folder, ctx.budget) if folder else None
    if not isinstance(tree, dict) or not isinstance(tree.get("children"), list):
        return None
    shortcuts = {}
    for child in tree["children"]:
        name = child.get("name") if isinstance(child, dict) else None
        if not isinstance(name, str) or not name.endswith(".desktop"):
            continue
        # OSWorld lists the folder the server names but reads each file from ~/Desktop
        data = pull(ctx, f"~/Desktop/{name}")
        if data is None:
            return None
        try:
            shortcuts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return shortcuts


# -- the address bar, from the accessibility tree

_ADDRESS_BARS = ("application[name=Google\\ Chrome] entry[name=Address\\ and\\ search\\ bar]",
                 "application[name=Chromium] entry[name=Address\\ and\\ search\\ bar]")


def parse_tree(xml):
    """The accessibility tree's root, or None when it is not one XML document. No DTD is loaded and
    no entity resolved: the tree comes from the desktop."""
    import lxml.etree

    if not isinstance(xml, (str, bytes)):
        return None
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        return lxml.etree.fromstring(xml, parser)
    except (ValueError, lxml.etree.XMLSyntaxError):
        return None


def get_active_url_from_accessTree(ctx: EvalContext, config: dict) -> Optional[str]:
    """The address bar's text after `goto_prefix` ("https://" by default; the bar shows no scheme),
    or None when there is no tree, no address bar or no text in it.

    OSWorld's selector (on an x86 host) is Google Chrome's address bar; cua's desktops run
    Chromium, whose bar OSWorld selects on ARM hosts: it is asked for when Chrome's is not there.
    OSWorld quirk: it checks the text of the last address bar found and returns the first's (None
    becomes the text "None")."""
    from lxml.cssselect import CSSSelector

    root = parse_tree(ctx.desktop.accessibility(ctx.budget))
    if root is None:
        return None
    for selector in _ADDRESS_BARS:
        bars = CSSSelector(selector)(root)
        if bars:
            break
    else:
        return None
    if not bars[-1].text:
        return None
    return f"{config.get('goto_prefix', 'https://')}{bars[0].text}"


def get_active_tab_url_parse(ctx: EvalContext, config: dict) -> Optional[dict]:
    """The first value of each of `parse_keys` in the active URL's query ("" when absent); `replace`
    renames keys, `split_list` splits each value at commas."""
    keys = need(config, "parse_keys", list)
    replace = config.get("replace")
    if replace is not None and not (isinstance(replace, dict) and all(k in keys for k in replace)):
        raise BadTask("getter 'active_tab_url_parse': 'replace' must map keys of 'parse_keys' to new names")
    url = get_active_url_from_accessTree(ctx, config)
    if url is None:
        return None
    query = parse_qs(urlparse(url).query)
    out = {key: query.get(key, [""])[0] for key in keys}
    for key, new in (replace or {}).items():
        out[new] = out.pop(key)
    if config.get("split_list", False):
        out = {key: value.split(",") for key, value in out.items()}
    return out


def get_url_dashPart(ctx: EvalContext, config: dict):
    """The `partIndex`-th part of the active URL split at "/" (without its query with `needDeleteId`),
    as a string or, with returnType "json", as {key: part}; None when there is no such part."""
    if "partIndex" not in config or "returnType" not in config:
        raise BadTask("getter 'url_dashPart': 'partIndex' and 'returnType' are required")
    if config["returnType"] == "json":
        need(config, "key", (str, int, float))
    url = get_active_url_from_accessTree(ctx, config)
    if url is None:
        return None
    try:
        index = int(config["partIndex"])
    except (ValueError, TypeError):
        return None
    parts = url.split("/")
    if not -len(parts) <= index < len(parts):  # OSWorld crashes on a short URL and a negative index
        return None
    part = parts[index]
    if config.get("needDeleteId", False):
        part = part.split("?")[0]
    if config["returnType"] == "string":
        return part
    if config["returnType"] == "json":
        return {config["key"]: part}
    return None


_MACYS_FIELDS = ("Men_regular_size_t", "Price_discount_range")
_FIFTY_OFF, _NOT_FIFTY_OFF = "50_PERCENT_ off & more", "not_50_PERCENT_ off & more"


def get_macys_product_url_parse(ctx: EvalContext, config: dict) -> Optional[dict]:
    """What one Macy's task asks of a product list's URL path: whether it is under mens-clothing and
    shirts and short sleeves, and the facets of the first pair of comma lists in the path (facet
    names, then their values; price ranges split at "|"), for `parse_keys`."""
    keys = need(config, "parse_keys", list)
    url = get_active_url_from_accessTree(ctx, config)
    if url is None:
        return None
    path = unquote(urlparse(url).path)
    parts = path.strip("/").split("/")
    facets: dict = {}
    shirts, short_sleeve = "shirts" in path, "short-sleeve" in path
    for names, values in zip(parts, parts[1:]):
        if "," in names and "," in values:
            for name, value in zip((n.strip() for n in names.split(",")), (v.strip() for v in values.split(","))):
                if name == "Price_discount_range":
                    facets[name] = [item.strip() for item in value.split("|")] if value else None
                else:
                    facets[name] = value or None
                shirts = shirts or (name == "Product_department" and value in ("shirts", "Shirts", "Shirt"))
                short_sleeve = short_sleeve or (name == "Sleeve_length" and value in ("short-sleeve", "Short Sleeve"))
            break
    for name in _MACYS_FIELDS:
        facets.setdefault(name, None)
    out = {"mens_clothing": True if "mens-clothing" in path else None, "shirts": shirts or None,
           "short_sleeve": short_sleeve or None}
    for key in keys:
        if key not in facets:
            continue
        if key == "Price_discount_range":
            ranges = facets[key]
            only_fifty = (ranges is not None and _FIFTY_OFF in ranges and "30_PERCENT_ off & more" not in ranges
                          and "20_PERCENT_ off & more" not in ranges)
            out[key] = _FIFTY_OFF if only_fifty else _NOT_FIFTY_OFF
        else:
            out[key] = facets[key]
    return out


get_url_path_parse = get_macys_product_url_parse  # OSWorld's older name of the same getter


GETTERS: dict[str, Callable[[EvalContext, dict], Any]] = {
    "default_search_engine": get_default_search_engine, "enabled_experiments": get_enabled_experiments,
    "chrome_language": get_chrome_language, "profile_name": get_profile_name,
    "chrome_font_size": get_chrome_font_size, "enable_do_not_track": get_enable_do_not_track,
    "enable_enhanced_safety_browsing": get_enable_enhanced_safety_browsing,
    "enable_safe_browsing": get_enable_safe_browsing, "new_startup_page": get_new_startup_page,
    "find_unpacked_extension_path": get_find_unpacked_extension_path,
    "find_installed_extension_name": get_find_installed_extension_name,
    "data_delete_automacally": get_data_delete_automacally, "bookmarks": get_bookmarks,
    "cookie_data": get_cookie_data, "history": get_history, "shortcuts_on_desktop": get_shortcuts_on_desktop,
    "active_url_from_accessTree": get_active_url_from_accessTree, "active_tab_url_parse": get_active_tab_url_parse,
    "url_dashPart": get_url_dashPart, "macys_product_url_parse": get_macys_product_url_parse,
    "url_path_parse": get_url_path_parse,
}
EXTRA = Extra("web", {"lxml": "lxml", "cssselect": "cssselect"})
