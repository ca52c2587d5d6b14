"""OSWorld's slide-deck metric, `compare_pptx_files(result, expected, **options)`: 1 when the
agent's deck matches the gold deck in everything OSWorld's version looks at, else 0.

It looks at what python-pptx shows (the `office` extra, imported when a deck is scored), slide by
slide and shape by shape, pairing them in order (a deck with an extra shape is compared on the
shapes both have): the number of slides, each slide's notes, each shape's place and size, each
text's paragraphs (alignment, text, level) and runs (font name, size, bold, italic, RGB color,
underline, strike-through) and the slide's bullets. Options turn checks off (`examine_<what>:
false`) or turn on OSWorld's position checks written for single tasks, which this module keeps
as OSWorld has them (the literal texts, slide numbers and EMU bounds are those tasks' facts).
A key OSWorld does not read (its tasks hold a misspelt `examine_aligment`) changes nothing.

OSWorld also compares slide backgrounds, but its check sets the fill it reads and so always
passes; it is left out. A deck the agent left unreadable scores 0; an unreadable gold deck raises.
"""

from xml.etree import ElementTree

from .ooxml import checked

_NS = {"a": "http://schemas.openxmlformats.org/drawingml/2006/main"}
_DEFAULTS = {
    "examine_number_of_slides": True, "examine_shape": True, "examine_text": True, "examine_indent": True,
    "examine_font_name": True, "examine_font_size": True, "examine_font_bold": True, "examine_font_italic": True,
    "examine_color_rgb": True, "examine_font_underline": True, "examine_strike_through": True,
    "examine_alignment": True, "examine_title_bottom_position": False, "examine_table_bottom_position": False,
    "examine_right_position": False, "examine_top_position": False, "examine_shape_for_shift_size": False,
    "examine_image_size": False, "examine_modify_height": False, "examine_bullets": True, "examine_note": True,
}
_FREEFORM, _PICTURE, _TABLE = 5, 13, 19  # python-pptx's MSO_SHAPE_TYPE values OSWorld tests for


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
    if on["examine_number_of_slides"] and len(mine.slides) != len(gold.slides):
        return 0.0
    for number, (a, b) in enumerate(zip(mine.slides, gold.slides), start=1):
        if on["examine_note"] and _notes(a) != _notes(b):
            return 0.0
        for s1, s2 in zip(a.shapes, b.shapes):
            if not _shapes_match(s1, s2, number, on):
                return 0.0
    return 1.0


def _notes(slide) -> str:
    # python-pptx makes a notes slide where there is none (from the notes master, text ""), as
    # OSWorld's read of it does.
    return slide.notes_slide.notes_text_frame.text.strip()


def _placed_alike(s1, s2) -> bool:
    return (s1.left, s1.top, s1.width, s1.height) == (s2.left, s2.top, s2.width, s2.height)


def _has_text(shape) -> bool:
    return hasattr(shape, "text")


def _shapes_match(s1, s2, slide_number: int, on: dict) -> bool:
    if not _positions_match(s1, s2, slide_number, on):
        return False
    if not (_has_text(s1) and _has_text(s2)):
        return True
    if on["examine_text"] and s1.text.strip() != s2.text.strip():
        return False
    for p1, p2 in zip(s1.text_frame.paragraphs, s2.text_frame.paragraphs):
        if on["examine_alignment"] and p1.alignment != p2.alignment:
            return False
        if on["examine_text"] and p1.text != p2.text:
            return False
        if on["examine_indent"] and p1.level != p2.level:
            return False
        for r1, r2 in zip(p1.runs, p2.runs):
            if not _runs_match(r1, r2, on):
                return False
    return True


def _positions_match(s1, s2, n: int, on: dict) -> bool:
    """OSWorld's shape checks, in its order; each task-specific one names the shape it was written
    for and otherwise asks for the same place and size."""
    if on["examine_title_bottom_position"]:
        if _has_text(s1) and _has_text(s2) and s1.text == s2.text:
            if s1.text == "Product Comparison" and (s1.top <= s2.top or s1.top < 3600000):
                return False
        elif not _placed_alike(s1, s2):
            return False
    if on["examine_table_bottom_position"]:
        if n == 3 and s1.shape_type == _TABLE and s2.shape_type == _TABLE:
            if s1.top <= s2.top or s1.top < 3600000:
                return False
        elif not _placed_alike(s1, s2):
            return False
    if on["examine_right_position"] and n == 2 and not _has_text(s1) and not _has_text(s2):
        if s1.left <= s2.left or s1.left < 4320000:
            return False
    if on["examine_top_position"]:
        if n == 2 and s1.shape_type == _PICTURE and s2.shape_type == _PICTURE:
            if s1.top >= s2.top or s1.top > 1980000:
                return False
        elif not _placed_alike(s1, s2):
            return False
    if on["examine_shape_for_shift_size"] and not _placed_alike(s1, s2):
        if not (_has_text(s1) and _has_text(s2) and s1.text == s2.text
                and s1.text == "Elaborate on what you want to discuss."):
            return False
    if on["examine_shape"] and not _placed_alike(s1, s2):
        return False
    if on["examine_image_size"]:
        if s1.shape_type == _PICTURE and s2.shape_type == _PICTURE:
            if (s1.width, s1.height) != (s2.width, s2.height):
                return False
        elif not _placed_alike(s1, s2):
            return False
    if on["examine_modify_height"]:
        if (not _has_text(s1) and not _has_text(s2)) or (s1.shape_type == _FREEFORM and s2.shape_type == _FREEFORM):
            if s1.height != s2.height:
                return False
        elif not _placed_alike(s1, s2):
            return False
    return True


def _runs_match(r1, r2, on: dict) -> bool:
    f1, f2 = r1.font, r2.font
    for key, a, b in (("examine_font_name", f1.name, f2.name), ("examine_font_size", f1.size, f2.size),
                      ("examine_font_bold", f1.bold, f2.bold), ("examine_font_italic", f1.italic, f2.italic)):
        if on[key] and a != b:
            return False
    if on["examine_color_rgb"] and hasattr(f1.color, "rgb") and hasattr(f2.color, "rgb") \
            and f1.color.rgb != f2.color.rgb:
        return False
    if on["examine_font_underline"] and f1.underline != f2.underline:
        return False
    if on["examine_strike_through"] and _strike(f1) != _strike(f2):
        return False
    return not on["examine_bullets"] or _bullets(r1.part.blob) == _bullets(r2.part.blob)


def _strike(font) -> str:
    return font._element.attrib.get("strike", "noStrike")


def _bullets(slide_xml: bytes) -> list[tuple]:
    """Every paragraph of the slide the run is on: (level, bullet character, text, bullet color),
    with OSWorld's words for what is not set."""
    out = []
    for p in ElementTree.fromstring(slide_xml).iter(f"{{{_NS['a']}}}p"):
        props = p.find("a:pPr", _NS)
        if props is None:
            level, char, color = "No Level", "No Bullet", "No Color"
        else:
            level = props.get("lvl")
            bullet, rgb = props.find("a:buChar", _NS), props.find("a:buClr/a:srgbClr", _NS)
            char = bullet.get("char") if bullet is not None else "No Bullet"
            color = rgb.get("val") if rgb is not None else "No Color"
        out.append((level, char, "".join(t.text or "" for t in p.iter(f"{{{_NS['a']}}}t")), color))
    return out
