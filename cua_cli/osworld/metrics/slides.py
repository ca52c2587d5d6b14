"""OSWorld's slide-deck metrics (its metrics/slides.py). The main one,
`compare_pptx_files(result, expected, **options)`: 1 when the
agent's deck matches the gold deck in everything OSWorld's current version (desktop-env 1.0.2)
looks at, else 0.

It looks at what python-pptx shows (the `office` extra, imported when a deck is scored), slide by
slide and shape by shape, pairing them in order: the number of slides, each slide's background
colour and notes, the number of shapes, each shape's place and size (equal within
`approximately_tolerance`, 0.5% by default), tables cell by cell, each text's paragraphs (their
number, alignment, text, level) and runs (their number, font name, size, bold, italic, RGB colour,
underline, strike-through), the slide's bullets, and the text of every text shape including those
inside groups. Options turn checks off (`examine_<what>: false`) or turn on OSWorld's position
checks written for single tasks, which this module keeps as OSWorld has them (the literal texts,
slide numbers and EMU bounds are those tasks' facts). A key OSWorld does not read (its tasks hold a
misspelt `examine_aligment`) changes nothing. Unset and off are the same for bold and italic, and
for underline unset is the same as off but not as on, as in OSWorld.

A deck the agent left unreadable scores 0; an unreadable gold deck raises.

The others check one thing each, as OSWorld's do: a picture stretched over the slide and centred,
portrait slides, backgrounds near a colour, a slide's transition, the slide number's colour in the
master, struck-through runs, the slide pane in the accessibility tree, and LibreOffice's settings
(autosave interval, presenter console) in registrymodifications.xcu. Where OSWorld's code fails on
the agent's file, cua scores 0.
"""

import math
import re
import zipfile
from xml.etree import ElementTree

from ..registry import Extra
from .documents import registry_root
from .ooxml import checked

_NS = {"a": "http://schemas.openxmlformats.org/drawingml/2006/main"}
_DEFAULTS = {
    "examine_number_of_slides": True, "examine_shape": True, "examine_text": True, "examine_indent": True,
    "examine_font_name": True, "examine_font_size": True, "examine_font_bold": True, "examine_font_italic": True,
    "examine_color_rgb": True, "examine_font_underline": True, "examine_strike_through": True,
    "examine_alignment": True, "examine_title_bottom_position": False, "examine_table_bottom_position": False,
    "examine_right_position": False, "examine_top_position": False, "examine_shape_for_shift_size": False,
    "examine_image_size": False, "examine_modify_height": False, "examine_bullets": True,
    "examine_background_color": True, "examine_note": True,
}
_FREEFORM, _PICTURE, _TABLE = 5, 13, 19  # python-pptx's MSO_SHAPE_TYPE values OSWorld tests for
_SOLID, _INHERITED = 1, 5                # MSO_FILL: a solid background, or the master's


def compare_pptx_files(result, expected=None, **options) -> float:
    from pptx import Presentation

    if not result:
        return 0.0
    try:
        mine = Presentation(checked(result))
    except Exception:  # the agent left no readable deck
        return 0.0
    gold = Presentation(checked(expected))
    on = {k: options.get(k, v) for k, v in _DEFAULTS.items()}
    tolerance = options.get("approximately_tolerance", 0.005)
    if on["examine_number_of_slides"] and len(mine.slides) != len(gold.slides):
        return 0.0
    for number, (a, b) in enumerate(zip(mine.slides, gold.slides), start=1):
        if not _slides_match(a, b, number, on, tolerance):
            return 0.0
    return 1.0


def _slides_match(a, b, number: int, on: dict, tolerance: float) -> bool:
    if on["examine_background_color"] and _background(a) != _background(b):
        return False
    if on["examine_note"] and _notes(a) != _notes(b):
        return False
    if len(a.shapes) != len(b.shapes):
        return False
    for s1, s2 in zip(a.shapes, b.shapes):
        if not _positions_match(s1, s2, number, on, tolerance):
            return False
        if s1.shape_type == _TABLE and not _tables_match(s1, s2, on):
            return False
        if _has_text(s1) and _has_text(s2) and not _texts_match(s1, s2, on):
            return False
    texts1, texts2 = _text_shapes(a.shapes), _text_shapes(b.shapes)
    if len(texts1) != len(texts2):
        return False
    if on["examine_alignment"]:  # every text shape again, those inside groups too
        for t1, t2 in zip(texts1, texts2):
            if on["examine_text"] and t1.text.strip() != t2.text.strip():
                return False
            if len(t1.text_frame.paragraphs) != len(t2.text_frame.paragraphs):
                return False
            if any(_alignment(p1) != _alignment(p2)
                   for p1, p2 in zip(t1.text_frame.paragraphs, t2.text_frame.paragraphs)):
                return False
    return True


def _background(slide):
    """The slide's solid background colour, its master's when it inherits one, else None.
    (python-pptx gives a slide without a background of its own an inheriting one as it reads it.)"""
    fill = slide.background.fill
    if fill.type == _INHERITED:
        fill = slide.slide_layout.slide_master.background.fill
    return fill.fore_color.rgb if fill.type == _SOLID else None


def _notes(slide) -> str:
    # python-pptx makes a notes slide where there is none (from the notes master, text ""), as
    # OSWorld's read of it does.
    return slide.notes_slide.notes_text_frame.text.strip()


def _has_text(shape) -> bool:
    return hasattr(shape, "text")


def _text_shapes(shapes) -> list:
    out = []
    for shape in shapes:
        if _has_text(shape) and hasattr(shape, "text_frame"):
            out.append(shape)
        if hasattr(shape, "shapes"):  # a group
            out.extend(_text_shapes(shape.shapes))
    return out


def _near(a: int, b: int, tolerance: float) -> bool:
    if a == b:
        return True
    if a == 0 or b == 0:
        return False
    return abs(a - b) / max(abs(a), abs(b)) <= tolerance


def _positions_match(s1, s2, n: int, on: dict, tolerance: float) -> bool:
    """OSWorld's shape checks, in its order; each task-specific one names the shape it was written
    for and otherwise asks for about the same place and size."""
    def placed_alike() -> bool:
        return all(_near(getattr(s1, k), getattr(s2, k), tolerance) for k in ("left", "top", "width", "height"))

    if on["examine_title_bottom_position"]:
        if _has_text(s1) and _has_text(s2) and s1.text == s2.text:
            if s1.text == "Product Comparison" and (s1.top <= s2.top or s1.top < 3600000):
                return False
        elif not placed_alike():
            return False
    if on["examine_table_bottom_position"]:
        if n == 3 and s1.shape_type == _TABLE and s2.shape_type == _TABLE:
            if s1.top <= s2.top or s1.top < 3600000:
                return False
        elif not placed_alike():
            return False
    if on["examine_right_position"] and n == 2 and not _has_text(s1) and not _has_text(s2):
        if s1.left <= s2.left or s1.left < 4320000:
            return False
    if on["examine_top_position"] and n == 2 and s1.shape_type == _PICTURE and s2.shape_type == _PICTURE:
        if s1.top >= s2.top or s1.top > 1980000:
            return False
    if on["examine_shape_for_shift_size"] and not placed_alike():
        if not (_has_text(s1) and _has_text(s2) and s1.text == s2.text
                and s1.text == "Elaborate on what you want to discuss."):
            return False
    if on["examine_shape"] and not placed_alike():
        return False
    if on["examine_image_size"]:
        if s1.shape_type == _PICTURE and s2.shape_type == _PICTURE:
            if not (_near(s1.width, s2.width, tolerance) and _near(s1.height, s2.height, tolerance)):
                return False
        elif not placed_alike():
            return False
    if on["examine_modify_height"]:
        if (not _has_text(s1) and not _has_text(s2)) or (s1.shape_type == _FREEFORM and s2.shape_type == _FREEFORM):
            if not _near(s1.height, s2.height, tolerance):
                return False
        elif not placed_alike():
            return False
    return True


def _tables_match(s1, s2, on: dict) -> bool:
    """Cell by cell: paragraphs and runs in equal numbers, runs alike in colour, bold, italic and
    underline. A table paired with a shape that is none scores 0 (OSWorld's comparison fails there)."""
    if not getattr(s2, "has_table", False):
        return False
    t1, t2 = s1.table, s2.table
    if len(t1.rows) != len(t2.rows) or len(t1.columns) != len(t2.columns):
        return False
    for row in range(len(t1.rows)):
        for col in range(len(t1.columns)):
            ps1, ps2 = t1.cell(row, col).text_frame.paragraphs, t2.cell(row, col).text_frame.paragraphs
            if len(ps1) != len(ps2):
                return False
            for p1, p2 in zip(ps1, ps2):
                if len(p1.runs) != len(p2.runs):
                    return False
                for r1, r2 in zip(p1.runs, p2.runs):
                    f1, f2 = r1.font, r2.font
                    if on["examine_color_rgb"] and not _same_colour(f1, f2):
                        return False
                    if not (_same_flag(f1.bold, f2.bold) and _same_flag(f1.italic, f2.italic)
                            and _same_underline(f1.underline, f2.underline)):
                        return False
    return True


def _texts_match(s1, s2, on: dict) -> bool:
    if on["examine_text"] and s1.text.strip() != s2.text.strip():
        return False
    ps1, ps2 = s1.text_frame.paragraphs, s2.text_frame.paragraphs
    if len(ps1) != len(ps2):
        return False
    for p1, p2 in zip(ps1, ps2):
        if on["examine_alignment"] and _alignment(p1) != _alignment(p2):
            return False
        if on["examine_text"] and p1.text != p2.text:
            return False
        if on["examine_indent"] and p1.level != p2.level:
            return False
        if len(p1.runs) != len(p2.runs):
            return False
        if not all(_runs_match(r1, r2, on) for r1, r2 in zip(p1.runs, p2.runs)):
            return False
    return True


def _alignment(paragraph):
    from pptx.enum.text import PP_ALIGN

    return paragraph.alignment if paragraph.alignment is not None else PP_ALIGN.LEFT  # unset is left


def _runs_match(r1, r2, on: dict) -> bool:
    f1, f2 = r1.font, r2.font
    if on["examine_font_name"] and f1.name != f2.name:
        return False
    if on["examine_font_size"] and f1.size != f2.size:
        return False
    if on["examine_font_bold"] and not _same_flag(f1.bold, f2.bold):
        return False
    if on["examine_font_italic"] and not _same_flag(f1.italic, f2.italic):
        return False
    if on["examine_color_rgb"] and not _same_colour(f1, f2):
        return False
    if on["examine_font_underline"] and not _same_underline(f1.underline, f2.underline):
        return False
    if on["examine_strike_through"] and _strike(f1) != _strike(f2):
        return False
    return not on["examine_bullets"] or _same_bullets(r1.part.blob, r2.part.blob)


def _same_flag(a, b) -> bool:
    return a == b or (not a and not b)  # unset (None) and off (False) alike


def _same_underline(a, b) -> bool:
    if a == b:
        return True
    if a is not None and b is not None:
        return False
    return True not in (a, b)  # unset is off, not on


def _same_colour(f1, f2) -> bool:
    # A run without an explicit colour has no .rgb (python-pptx raises), and then colours are not compared.
    return not (hasattr(f1.color, "rgb") and hasattr(f2.color, "rgb")) or f1.color.rgb == f2.color.rgb


def _strike(font) -> str:
    return font._element.attrib.get("strike", "noStrike")


def _same_bullets(xml1: bytes, xml2: bytes) -> bool:
    """The slides' bullets alike: the same paragraphs with text, each with the same text, bullet
    character and level (unset is level 0); their colours are not compared. A slide whose XML cannot be
    read so is not compared (OSWorld skips it)."""
    b1, b2 = _bullets(xml1), _bullets(xml2)
    if b1 is None or b2 is None:
        return True
    def level(lvl):
        return "0" if lvl is None else lvl
    return len(b1) == len(b2) and all(
        (text1, char1, level(level1)) == (text2, char2, level(level2))
        for (level1, char1, text1), (level2, char2, text2) in zip(b1, b2))


def _bullets(slide_xml: bytes) -> list[tuple] | None:
    """Every paragraph of the slide that has text: (level, bullet character, text), with OSWorld's
    words for what is not set; None when an empty text element makes OSWorld's reading fail."""
    out = []
    try:
        root = ElementTree.fromstring(slide_xml.decode("utf-8"))
    except (ValueError, ElementTree.ParseError):
        return None
    for p in root.iter(f"{{{_NS['a']}}}p"):
        texts = [t.text for t in p.iter(f"{{{_NS['a']}}}t")]
        if None in texts:
            return None
        props = p.find("a:pPr", _NS)
        if props is None:
            level, char = "No Level", "No Bullet"
        else:
            bullet = props.find("a:buChar", _NS)
            level, char = props.get("lvl"), bullet.get("char") if bullet is not None else "No Bullet"
        if "".join(texts).strip():
            out.append((level, char, "".join(texts)))
    return out


# -- OSWorld's checks of one thing in a deck, or in LibreOffice's settings

_EMU_HALF_INCH = 457200
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_OOR = "{http://openoffice.org/2001/registry}"


def _agent_deck(path):
    """The agent's deck, or None when it left none that python-pptx reads."""
    from pptx import Presentation

    if not path:
        return None
    try:
        return Presentation(checked(path))
    except Exception:  # the agent left no readable deck
        return None


def check_image_stretch_and_center(result, expected=None) -> float:
    """The gold (original) deck's first picture on slide 1 is, in the agent's deck (the last picture
    of its slide 1 with the same image bytes), stretched to the gold deck's slide size and centred,
    each within half an inch."""
    from pptx import Presentation

    original = Presentation(checked(expected))
    width, height = original.slide_width, original.slide_height
    pictures = [s for s in original.slides[0].shapes if s.shape_type == _PICTURE]
    mine = _agent_deck(result)
    if mine is None:
        return 0.0
    try:
        if not pictures:
            return 0.0  # OSWorld looks at the agent's first slide before it sees there is nothing to find
        blob = pictures[0].image.blob
        found = None
        for shape in mine.slides[0].shapes:
            if shape.shape_type == _PICTURE and shape.image.blob == blob:
                found = shape
        if found is None:
            return 0.0
        return float(abs(found.width - width) <= _EMU_HALF_INCH and abs(found.height - height) <= _EMU_HALF_INCH
                     and abs(found.left - (width - found.width) / 2) <= _EMU_HALF_INCH
                     and abs(found.top - (height - found.height) / 2) <= _EMU_HALF_INCH)
    except Exception:  # OSWorld fails on the agent's deck (no slide, a linked picture, no size)
        return 0.0


def check_slide_orientation_Portrait(result) -> float:  # noqa: N802 - OSWorld's name
    deck = _agent_deck(result)
    try:
        return float(deck is not None and deck.slide_width < deck.slide_height)
    except TypeError:  # a deck without a slide size
        return 0.0


def evaluate_presentation_fill_to_rgb_distance(result, rules=None) -> float:
    """1 less the mean over slides of each background's RGB distance to `rules.rgb` (a fraction of
    black to white's); a slide whose background is no solid RGB colour (its own, or its master's
    when it inherits one), or is `rules.original_rgb`, counts as the full distance."""
    if not isinstance(rules, dict) or "rgb" not in rules:
        raise ValueError("the rule needs 'rgb'")
    target, original = rules["rgb"], rules.get("original_rgb")
    if len(target) != 3 or (original is not None and len(original) != 3):
        raise ValueError("'rgb' and 'original_rgb' must be three numbers")
    deck = _agent_deck(result)
    if deck is None or len(deck.slides) == 0:  # OSWorld divides by the number of slides
        return 0.0
    try:
        distances = [_fill_distance(slide, target, original) for slide in deck.slides]
    except Exception:  # OSWorld fails on the agent's deck
        return 0.0
    return 1 - sum(distances) / len(deck.slides)


def _fill_distance(slide, target, original) -> float:
    fill = slide.background.fill
    if fill.type == _INHERITED:
        fill = slide.slide_layout.slide_master.background.fill
    if fill.type != _SOLID:
        return 1
    try:
        rgb = fill.fore_color.rgb
    except Exception:  # a theme colour has no RGB value of its own
        return 1
    if rgb is None:
        return 1
    (r1, g1, b1), (r2, g2, b2) = rgb, target
    if original is not None and (r1, g1, b1) == tuple(original):
        return 1
    return math.sqrt((r1 - r2) ** 2 + (g1 - g2) ** 2 + (b1 - b2) ** 2) / math.sqrt(255 ** 2 + 255 ** 2 + 255 ** 2)


def check_left_panel(result) -> float:
    """The accessibility tree has a document-frame named "Slides View" (Impress's slide pane)."""
    if not result:
        return 0.0
    try:
        root = ElementTree.fromstring(result)
    except ElementTree.ParseError:
        return 0.0
    return float(any(frame.get("name") == "Slides View" for frame in root.iter("document-frame")))


def check_transition(result, rules=None) -> float:
    """The slide `rules.slide_idx` (its file, ppt/slides/slide<n+1>.xml) has a transition whose
    first transition element holds a `rules.transition_type` element (e.g. dissolve)."""
    if not isinstance(rules, dict) or "slide_idx" not in rules or "transition_type" not in rules:
        raise ValueError("the rule needs 'slide_idx' and 'transition_type'")
    kind = rules["transition_type"]
    if not isinstance(kind, str) or not re.fullmatch(r"[A-Za-z][\w.-]*", kind):
        raise ValueError(f"transition type {kind!r} is no element name")
    root = _slide_part(result, f"ppt/slides/slide{int(rules['slide_idx']) + 1}.xml")
    if root is None:
        return 0.0
    transition = next(root.iter(f"{_P}transition"), None)
    return float(transition is not None and next(
        (e for e in transition.iter(f"{_P}{kind}") if e is not transition), None) is not None)


def _slide_part(path, name: str):
    """A part of the agent's deck, parsed; None when the deck or the part cannot be read."""
    if not path:
        return None
    try:
        with zipfile.ZipFile(checked(path)) as z:
            return ElementTree.fromstring(z.read(name))
    except Exception:  # no such deck or part, or not XML: OSWorld fails or finds nothing
        return None


def check_page_number_colors(result, rules=None) -> float:
    """The next-to-last solid RGB fill colour of the first slide master (where LibreOffice keeps the
    slide number's colour) is `rules.color` (red, blue, green or black; any other name passes).

    OSWorld quirk: it reads the colour's hex digits as if they started with "#" (srgbClr values
    have none): red is digits 2-3, green 4-5 and blue the sixth alone. cua reads them so."""
    if not isinstance(rules, dict) or "color" not in rules:
        raise ValueError("the rule needs 'color'")
    root = _slide_part(result, "ppt/slideMasters/slideMaster1.xml")
    if root is None:
        return 0.0
    colours = root.findall(".//a:solidFill//a:srgbClr", _NS)
    if len(colours) < 2:
        return 0.0
    value = colours[-2].get("val")
    if value is None:
        return 0.0
    wanted = rules["color"]
    if wanted not in ("red", "blue", "green", "black"):
        return 1.0  # OSWorld checks these four names only: any other passes
    try:
        r, g, b = int(value[1:3], 16), int(value[3:5], 16), int(value[5:7], 16)
    except ValueError:  # OSWorld fails on a value that short or not hexadecimal
        return 0.0
    return float({"red": r > g + 50 and r > b + 50, "blue": b > g + 50 and b > r + 50,
                  "green": g > r + 50 and g > b + 50, "black": r < 50 and g < 50 and b < 50}[wanted])


def check_auto_saving_time(result, rules=None) -> float:
    """LibreOffice's autosave interval (AutoSaveTimeIntervall under
    /org.openoffice.Office.Common/Save/Document; the last such item counts) is `rules.minutes`."""
    if not isinstance(rules, dict) or "minutes" not in rules:
        raise ValueError("the rule needs 'minutes'")
    try:
        root = registry_root(result)
        value = None
        for item in root.iter("item"):
            if item.get(f"{_OOR}path") != "/org.openoffice.Office.Common/Save/Document":
                continue
            for prop in item.iter("prop"):
                if prop is not item and prop.get(f"{_OOR}name") == "AutoSaveTimeIntervall":
                    value = next(e for e in prop.iter("value") if e is not prop).text
                    break
        return float(value is not None and int(value) == rules["minutes"])
    except Exception:  # no readable configuration, or a value OSWorld cannot read
        return 0.0


def check_presenter_console_disable(result) -> float:
    """The first EnablePresenterScreen setting of /org.openoffice.Office.Impress/Misc/Start is false."""
    try:
        root = registry_root(result)
        for item in root.findall(".//item"):
            if item.get(f"{_OOR}path") != "/org.openoffice.Office.Impress/Misc/Start":
                continue
            for prop in item.findall("prop"):
                if prop.get(f"{_OOR}name") == "EnablePresenterScreen":
                    return float(prop.find("value").text.lower() == "false")
    except Exception:  # no readable configuration, or a setting without a value
        return 0.0
    return 0.0


def check_strikethrough(result, rules=None) -> float:
    """The first run of each paragraph `rules.paragraph_index_s` of each shape `shape_index_s` of each
    slide `slide_index_s` has a strike attribute (of any kind, noStrike too)."""
    if not isinstance(rules, dict) or not all(k in rules for k in ("slide_index_s", "shape_index_s",
                                                                   "paragraph_index_s")):
        raise ValueError("the rule needs 'slide_index_s', 'shape_index_s' and 'paragraph_index_s'")
    deck = _agent_deck(result)
    if deck is None:
        return 0.0
    try:
        for i in rules["slide_index_s"]:
            slide = deck.slides[i]
            for j in rules["shape_index_s"]:
                paragraphs = slide.shapes[j].text_frame.paragraphs
                for k in rules["paragraph_index_s"]:
                    if "strike" not in paragraphs[k].runs[0].font._element.attrib:
                        return 0.0
    except Exception:  # no such slide, shape, paragraph or run
        return 0.0
    return 1.0


def check_slide_numbers_color(result) -> float:
    """When some slide has a text shape whose text is all digits (a slide number), the first master
    "<number>" placeholder's first paragraph is red; 0 otherwise."""
    deck = _agent_deck(result)
    if deck is None:
        return 0.0
    try:
        numbered = any(hasattr(shape, "text") and shape.text.isdigit() for slide in deck.slides
                       for shape in slide.shapes)
        if not numbered:
            return 0.0
        for master in deck.slide_masters:
            for placeholder in master.placeholders:
                if placeholder.has_text_frame and placeholder.text == "<number>":
                    paragraphs = placeholder.text_frame.paragraphs
                    if paragraphs:
                        return float(paragraphs[0].font.color.rgb == (255, 0, 0))
        return 0.0
    except Exception:  # a colour without an RGB value
        return 0.0


METRICS = {f.__name__: f for f in (
    compare_pptx_files, check_image_stretch_and_center, check_slide_orientation_Portrait,
    evaluate_presentation_fill_to_rgb_distance, check_left_panel, check_transition, check_page_number_colors,
    check_auto_saving_time, check_presenter_console_disable, check_strikethrough, check_slide_numbers_color)}
EXTRA = Extra("office", {"pptx": "python-pptx"})
