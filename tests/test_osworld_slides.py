"""OSWorld's slide-deck metric (cua_cli/osworld/slides.py) on real .pptx files written by python-pptx:
what it compares, what each option turns off or on, and decks the agent broke."""

import io

import pytest
from helpers.osworld_standin import tiny_png
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Emu, Pt

from cua_cli.osworld.metrics.slides import compare_pptx_files

SLIDES = [("Quarterly review", ["Revenue grew", "Costs fell"]), ("Next steps", ["Hire", "Ship"])]


def deck(path, slides=SLIDES, change=None, notes=None, picture_at=None) -> str:
    """A deck of title-and-content slides; `change(prs)` edits it before it is saved."""
    prs = Presentation()
    for title, points in slides:
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = title
        body = slide.placeholders[1].text_frame
        body.text = points[0]
        for point in points[1:]:
            body.add_paragraph().text = point
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
        if picture_at:
            slide.shapes.add_picture(io.BytesIO(tiny_png(8, 8)), *picture_at)
    if change:
        change(prs)
    prs.save(path)
    return str(path)


def first_run(prs):
    return prs.slides[0].placeholders[1].text_frame.paragraphs[0].runs[0]


def test_a_deck_matches_its_twin_and_not_a_deck_that_differs(tmp_path):
    gold = deck(tmp_path / "gold.pptx")
    assert compare_pptx_files(deck(tmp_path / "same.pptx"), gold) == 1.0
    other_text = deck(tmp_path / "t.pptx", slides=[SLIDES[0], ("Next steps", ["Hire", "Sell"])])
    assert compare_pptx_files(other_text, gold) == 0.0
    assert compare_pptx_files(deck(tmp_path / "n.pptx", slides=SLIDES[:1]), gold) == 0.0
    assert compare_pptx_files(deck(tmp_path / "n.pptx", slides=SLIDES[:1]), gold, examine_number_of_slides=False) == 1.0
    assert compare_pptx_files(deck(tmp_path / "notes.pptx", notes="say hello"), gold) == 0.0
    assert compare_pptx_files(deck(tmp_path / "notes.pptx", notes="say hello"), gold, examine_note=False) == 1.0


@pytest.mark.parametrize("edit, option", [
    (lambda r: setattr(r.font, "bold", True), "examine_font_bold"),
    (lambda r: setattr(r.font, "italic", True), "examine_font_italic"),
    (lambda r: setattr(r.font, "size", Pt(40)), "examine_font_size"),
    (lambda r: setattr(r.font, "name", "DejaVu Serif"), "examine_font_name"),
    (lambda r: setattr(r.font, "underline", True), "examine_font_underline"),
    (lambda r: r.font._element.set("strike", "sngStrike"), "examine_strike_through"),
])
def test_each_run_property_counts_unless_its_option_is_off(tmp_path, edit, option):
    gold = deck(tmp_path / "gold.pptx")
    edited = deck(tmp_path / "edited.pptx", change=lambda prs: edit(first_run(prs)))
    assert compare_pptx_files(edited, gold) == 0.0
    assert compare_pptx_files(edited, gold, **{option: False}) == 1.0


def test_colors_alignment_levels_and_bullets(tmp_path):
    gold = deck(tmp_path / "gold.pptx", change=lambda prs: setattr(first_run(prs).font.color, "rgb", RGBColor(0, 0, 0)))
    red = deck(tmp_path / "red.pptx", change=lambda prs: setattr(first_run(prs).font.color, "rgb", RGBColor(255, 0, 0)))
    assert compare_pptx_files(red, gold) == 0.0
    assert compare_pptx_files(red, gold, examine_color_rgb=False) == 1.0
    plain = deck(tmp_path / "plain.pptx")  # no color set: nothing to compare
    assert compare_pptx_files(plain, gold) == 1.0

    def indent(prs):
        prs.slides[0].placeholders[1].text_frame.paragraphs[1].level = 1
    assert compare_pptx_files(deck(tmp_path / "i.pptx", change=indent), plain) == 0.0
    assert compare_pptx_files(deck(tmp_path / "i.pptx", change=indent), plain, examine_indent=False,
                              examine_bullets=False) == 1.0

    def star(prs):
        p_pr = prs.slides[0].placeholders[1].text_frame.paragraphs[0]._p.get_or_add_pPr()
        p_pr.append(p_pr.makeelement("{http://schemas.openxmlformats.org/drawingml/2006/main}buChar", {"char": "*"}))
    assert compare_pptx_files(deck(tmp_path / "b.pptx", change=star), plain) == 0.0
    assert compare_pptx_files(deck(tmp_path / "b.pptx", change=star), plain, examine_bullets=False) == 1.0
    # OSWorld reads examine_alignment; a task's misspelt key turns nothing off.
    centred = deck(tmp_path / "c.pptx", change=lambda prs: setattr(
        prs.slides[0].placeholders[1].text_frame.paragraphs[0], "alignment", 2))
    assert compare_pptx_files(centred, plain, examine_aligment=False, examine_bullets=False) == 0.0
    assert compare_pptx_files(centred, plain, examine_alignment=False, examine_bullets=False) == 1.0
    # As in OSWorld, the paragraph's new properties also change its bullet reading (a level of None
    # where there was "No Level").
    assert compare_pptx_files(centred, plain, examine_alignment=False) == 0.0


def test_shape_places_and_the_task_specific_position_checks(tmp_path):
    gold = deck(tmp_path / "gold.pptx", picture_at=(Emu(100000), Emu(100000), Emu(500000), Emu(500000)))
    moved = deck(tmp_path / "moved.pptx", picture_at=(Emu(900000), Emu(100000), Emu(500000), Emu(500000)))
    bigger = deck(tmp_path / "bigger.pptx", picture_at=(Emu(100000), Emu(100000), Emu(800000), Emu(800000)))
    assert compare_pptx_files(moved, gold) == 0.0
    assert compare_pptx_files(moved, gold, examine_shape=False) == 1.0
    # examine_image_size: a picture must keep its size, wherever it went.
    assert compare_pptx_files(moved, gold, examine_shape=False, examine_image_size=True) == 1.0
    assert compare_pptx_files(bigger, gold, examine_shape=False, examine_image_size=True) == 0.0
    # examine_right_position (written for one task): on slide 2, a shape without text must have moved
    # right of the gold's and past 4,320,000 EMU.
    far = deck(tmp_path / "far.pptx", picture_at=(Emu(5000000), Emu(100000), Emu(500000), Emu(500000)))
    assert compare_pptx_files(far, gold, examine_shape=False, examine_right_position=True) == 1.0
    assert compare_pptx_files(moved, gold, examine_shape=False, examine_right_position=True) == 0.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slides=st.lists(st.tuples(st.text("abc XYZ", min_size=1, max_size=12),
                                 st.lists(st.text("abc xyz.", min_size=1, max_size=12), min_size=1, max_size=3)),
                       min_size=1, max_size=3))
def test_any_deck_matches_itself(tmp_path_factory, slides):
    folder = tmp_path_factory.mktemp("d")
    assert compare_pptx_files(deck(folder / "a.pptx", slides=slides), deck(folder / "b.pptx", slides=slides)) == 1.0
