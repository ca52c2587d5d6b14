"""OSWorld's VLC metrics over what VLC reports (its web interface's status.xml) and its settings file
(vlcrc), rewritten for cua. compare_images, compare_audios and compare_videos, which OSWorld keeps in
the same module, are media metrics (images.py, media.py); is_vlc_fullscreen is in general.py.

Both files come from the desktop: one the agent broke (missing, not UTF-8, not XML) scores 0 where
OSWorld's metric would crash. A task's rule that lacks what the metric needs raises.

The vlcrc checks reproduce OSWorld's reading on purpose, quirks and all (scores must compare with
published ones): a line counts wherever the option's name followed by "=" appears in it, commented
out ("#qt-bgcone=1", how VLC writes a default) or not; the last such line wins; and the value is
what follows the line's last "=".
"""

import posixpath
from typing import Optional
from urllib.parse import urlparse
from xml.etree import ElementTree

MAX_FILE_BYTES = 64 << 20


def _read(path) -> Optional[str]:
    """The file's text as OSWorld reads it (bytes decoded as UTF-8, lines not translated); None when
    there is no file or it is not UTF-8 (OSWorld's metric crashes on both)."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_FILE_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# -- what VLC plays

_META = 'information/category[@name="meta"]/info[@name="{}"]'
_FILE_FIELDS = [_META.format(n) for n in ("filename", "title", "uri", "location", "name")]
_URL_FIELDS = [_META.format(n) for n in ("url", "URI", "location", "title", "filename")] + [
    f'information/category[@name="Stream 0"]/info[@name="{n}"]' for n in ("Codec", "Type", "Language")]


def _first_text(root, fields: list[str]) -> Optional[str]:
    for field in fields:
        element = root.find(field)
        if element is not None and element.text:
            return element.text
    return None


def _url_matches(shown: str, url: str) -> bool:
    """OSWorld's URL match: the URL within what VLC shows, or VLC showing just the URL path's last
    part (as it does for HLS streams), or VLC showing a URL of the same host whose path contains the
    URL's path. A URL urlparse refuses matches nothing (OSWorld catches its error)."""
    if url in shown:
        return True
    try:
        expected = urlparse(url)
        if shown == posixpath.basename(expected.path):
            # OSWorld quirk: a YouTube URL's path is /watch, so VLC showing a title "watch" matches
            return True
        if "://" in shown:
            actual = urlparse(shown)
            return expected.netloc == actual.netloc and expected.path in actual.path
    except ValueError:
        return False
    return False


def is_vlc_playing(actual_status_path, rule=None) -> float:
    """1 when VLC's status is "playing" and what it plays is the rule's: `{"type": "file_name",
    "file_name": ...}` (the first of the meta fields filename, title, uri, location, name that VLC
    fills ends with the name: OSWorld quirk, "b.mp4" matches "ab.mp4") or `{"type": "url", "url":
    ...}` (see _url_matches)."""
    if not isinstance(rule, dict) or rule.get("type") not in ("file_name", "url") or \
            not isinstance(rule.get(rule.get("type")), str):
        raise ValueError("is_vlc_playing: the rule needs type 'file_name' or 'url' and that key's text")
    text = _read(actual_status_path)
    if text is None:
        return 0.0
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return 0.0
    state = root.find("state")
    if state is None or state.text != "playing":  # no <state> at all: OSWorld crashes, 0 here
        return 0.0
    if rule["type"] == "file_name":
        shown = _first_text(root, _FILE_FIELDS)
        return float(shown is not None and shown.endswith(rule["file_name"]))
    shown = _first_text(root, _URL_FIELDS)
    return float(shown is not None and _url_matches(shown, rule["url"]))


# -- vlcrc settings

def _setting(text: str, marker: str, default: str) -> str:
    """The value (after the last "=") of the last line holding `marker`, else `default`."""
    value = default
    for line in text.split("\n"):
        if marker in line:
            value = line.split("=")[-1].strip()
    return value


def _expected(rule, key: str):
    """OSWorld turns an int (and so a bool: "True") into its text; anything else is compared as it is."""
    if not isinstance(rule, dict) or key not in rule:
        raise ValueError(f"the rule needs {key!r}")
    value = rule[key]
    return str(value) if isinstance(value, int) else value


def _check(path, rule, key: str, option: str, default: str) -> float:
    expected = _expected(rule, key)
    text = _read(path)
    if text is None:
        return 0.0
    return float(_setting(text, option + "=", default) == expected)


def is_vlc_recordings_folder(actual_config_path, rule=None) -> float:
    """The first line that is neither blank nor begins with "#" and mentions input-record-path (with
    or without "=") decides: its value after the last "=" is the rule's `recording_file_path`."""
    if not isinstance(rule, dict) or "recording_file_path" not in rule:
        raise ValueError("is_vlc_recordings_folder: the rule needs 'recording_file_path'")
    text = _read(actual_config_path)
    if text is None:
        return 0.0
    for line in text.split("\n"):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return float(line.split("=")[-1].strip() == rule["recording_file_path"])
    return 0.0


def check_qt_bgcone(actual_config_path, rule=None) -> float:
    return _check(actual_config_path, rule, "expected_qt_bgcone", "qt-bgcone", "1")


def check_qt_max_volume(actual_config_path, rule=None) -> float:
    return _check(actual_config_path, rule, "expected_qt_max_volume", "qt-max-volume", "125")


def check_qt_minimal_view(actual_config_path, rule=None) -> float:
    return _check(actual_config_path, rule, "expected_qt_minimal_view", "qt-minimal-view", "0")


def check_one_instance_when_started_from_file(actual_config_path, rule=None) -> float:
    return _check(actual_config_path, rule, "expected_one_instance_when_started_from_file",
                  "one-instance-when-started-from-file", "1")


def check_global_key_play_pause(actual_config_path, rule=None) -> float:
    """Whether a global play/pause key is set: "1" when the last line holding
    "global-key-play-pause=" has a value (OSWorld quirk: "#global-key-play-pause=Space", a comment,
    counts as set), else "0"."""
    expected = _expected(rule, "expected_global_key_play_pause")
    text = _read(actual_config_path)
    if text is None:
        return 0.0
    value = _setting(text, "global-key-play-pause=", "")
    return float(("1" if value else "0") == expected)


DEFAULT_SLIDER_COLOURS = "153;210;153;20;210;20;255;199;15;245;39;29"


def check_qt_slider_colours(actual_config_path, rule=None) -> float:
    """The volume slider's colours (the last line mentioning qt-slider-colours, even without "="):
    `{"type": "match", "expected_qt_slider_colours": ...}` compares the text; `{"type": "blackish"}`
    wants every whole (r;g;b) triple below 100 in each part. Colours that are not integers score 0
    (OSWorld catches the error); so does a "match" rule without its colours (the same catch)."""
    if not isinstance(rule, dict) or rule.get("type") not in ("match", "blackish"):
        raise ValueError("check_qt_slider_colours: the rule's type must be 'match' or 'blackish'")
    text = _read(actual_config_path)
    if text is None:
        return 0.0
    colours = _setting(text, "qt-slider-colours", DEFAULT_SLIDER_COLOURS)
    if rule["type"] == "match":
        return float("expected_qt_slider_colours" in rule and colours == rule["expected_qt_slider_colours"])
    try:
        values = [int(x) for x in colours.split(";")]
    except ValueError:
        return 0.0
    triples = zip(values[0::3], values[1::3], values[2::3])
    return float(all(all(v < 100 for v in rgb) for rgb in triples))


METRICS = {fn.__name__: fn for fn in (is_vlc_playing, is_vlc_recordings_folder, check_qt_bgcone, check_qt_max_volume,
                                      check_qt_minimal_view, check_one_instance_when_started_from_file,
                                      check_global_key_play_pause, check_qt_slider_colours)}
EXTRA = None
