"""The desktop's accessibility tree as OSWorld's prompt agents show it to a model: a table of the
elements a person could see and use, cut to a token budget.

`/accessibility` answers AT-SPI's tree as XML: one element per accessible, named by its role, with
its states, attributes and screen geometry in namespaced attributes and its text as content. A row
is kept for an element whose role is one OSWorld lists, that is showing and visible, enabled,
editable, expandable or checkable, has a name or a text, and sits on the screen with a size; its
columns are tag, name, text, class, description, position (top-left x and y) and size (w and h).

Two deliberate differences from OSWorld's PromptAgent: it reads class and description from the
Windows namespace, so on Ubuntu those columns are always empty (here they come from the tree's own
attributes); and a text holding a tab or line break is quoted as one holding a quote is (and so is
a name, class or description holding one), so every element stays one row.
"""

import re
from xml.etree import ElementTree as ET

_NS = "https://accessibility.ubuntu.example.org/ns/"
STATE, ATTRIBUTES, COMPONENT = _NS + "state", _NS + "attributes", _NS + "component"

HEADER = "tag\tname\ttext\tclass\tdescription\tposition (top-left x&y)\tsize (w&h)"
_ROLE_ENDINGS = ("item", "button", "heading", "label", "scrollbar", "searchbox", "textbox", "link", "tabelement",
                 "textfield", "textarea", "menu")
_ROLES = {"alert", "canvas", "check-box", "combo-box", "entry", "icon", "image", "paragraph", "scroll-bar", "section",
          "slider", "static", "table-cell", "terminal", "text"}
_USABLE = ("enabled", "editable", "expandable", "checkable")
_PAIR = re.compile(r"\(\s*(-?[0-9]{1,9})\s*,\s*(-?[0-9]{1,9})\s*\)")  # no screen is wider than 9 digits

# The pieces GPT-4's tokenizer (cl100k) splits text into before merging bytes: a contraction, a word
# with the character before it, up to three digits, a run of punctuation, whitespace. Each piece is
# one token at least, and in a table like this one most are exactly one.
_PIECE = re.compile(r"'(?i:[sdmt]|ll|ve|re)|(?:[^\r\n\w]|_)?[^\W\d_]+|\d{1,3}| ?(?:[^\s\w]|_)+[\r\n]*"
                    r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CUT_MARK = "[...]\n"


def parse(xml: str) -> ET.Element:
    """The tree's root; ValueError when `xml` is not one XML document."""
    try:
        return ET.fromstring(xml)
    except (ET.ParseError, ValueError) as e:  # a str that is no XML, or one no UTF-8 can carry
        raise ValueError(f"not XML: {e}") from None


def table(xml: str) -> str:
    """The tree as OSWorld's table: its header, then a row per element a person could see and use."""
    rows = [HEADER]
    for node in parse(xml).iter():
        if _kept(node):
            rows.append("\t".join((node.tag, _cell(node.get("name", "")), _text(node.text or ""),
                                   _cell(node.get(f"{{{ATTRIBUTES}}}class", "")),
                                   _cell(node.get(f"{{{ATTRIBUTES}}}description", "")),
                                   _cell(node.get(f"{{{COMPONENT}}}screencoord")),
                                   _cell(node.get(f"{{{COMPONENT}}}size")))))
    return "\n".join(rows)


def cut(text: str, max_tokens: int) -> str:
    """`text` up to its `max_tokens`-th token (as counted above), then OSWorld's mark of a cut."""
    for n, piece in enumerate(_PIECE.finditer(text)):
        if n == max_tokens:
            return text[:piece.start()] + CUT_MARK
    return text


def _kept(node: ET.Element) -> bool:
    tag = node.tag
    if not (tag.startswith("document") or tag.endswith(_ROLE_ENDINGS) or tag in _ROLES):
        return False
    if not all(node.get(f"{{{STATE}}}{s}") == "true" for s in ("showing", "visible")):
        return False
    if not any(node.get(f"{{{STATE}}}{s}") == "true" for s in _USABLE):
        return False
    if not (node.get("name") or node.text):
        return False
    x, y = _pair(node.get(f"{{{COMPONENT}}}screencoord"))
    w, h = _pair(node.get(f"{{{COMPONENT}}}size"))
    return x >= 0 and y >= 0 and w > 0 and h > 0


def _pair(value: str | None) -> tuple[int, int]:
    """"(x, y)" as numbers; (-1, -1) for anything else (such an element is left out)."""
    m = _PAIR.fullmatch(value.strip()) if value else None
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def _text(text: str) -> str:
    """As OSWorld writes it: "" when empty, quoted (quotes doubled) when it holds a quote (or a tab or
    line break)."""
    return '""' if not text else _quote(text) if any(c in text for c in '"\t\n\r') else text


def _cell(value: str) -> str:
    return _quote(value) if any(c in value for c in "\t\n\r") else value


def _quote(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'
