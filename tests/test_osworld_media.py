"""cua's image, PDF, audio, video, e-book, archive and tag metrics against OSWorld's own code
(desktop-env 1.0.2, helpers/osworld_reference.py) on files made with the real libraries: generated
images slightly changed, brightened, mirrored, resized, re-saved in other modes; PDFs with a word or
a page changed; tones with noise; short videos; e-books, zips and tarballs; MP3s with tags. Each
score must be OSWorld's; where OSWorld's code crashes on the agent's file, cua's score is 0."""

import collections
import contextlib
import io
import json
import logging
import os
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from helpers.examples import examples
from helpers.osworld_reference import reference_apart
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw, ImageEnhance

from cua_cli.osworld.metrics import images, media, pdf

CASES: collections.Counter = collections.Counter()   # metric -> cases where cua's score was OSWorld's
OUTCOMES: collections.Counter = collections.Counter()  # (metric, OSWorld's outcome: crash, 0, 1 or a fraction)
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def osworld(module: str):
    """OSWorld's metric module, with stand-ins for what it imports at the top but the metrics compared
    here never call (AcoustID, borb, pdfplumber) where this host lacks them, seen by no other test."""
    return reference_apart(f"metrics.{module}", ("acoustid", "borb", "borb.pdf", "pdfplumber"))


@pytest.fixture(scope="module", autouse=True)
def _report_cases():
    yield
    print("\ndifferential cases (cua == OSWorld):", dict(sorted(CASES.items())))
    print("OSWorld's outcomes:", dict(sorted(OUTCOMES.items())))


def properties(quick: int, **strategies):
    """A property test of `quick` generated examples in the suite's run (`--hypothesis-profile=deep`
    runs many more)."""
    def tests(body):
        return settings(max_examples=examples(quick), **SETTINGS)(given(**strategies)(body))
    return tests


def fresh(tmp_path: Path) -> Path:
    """A folder of its own for one generated example (Hypothesis runs many in one test's tmp_path)."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


def agree(name: str, ours, theirs, *args, **options) -> float:
    """cua's score equals OSWorld's; where OSWorld crashes, cua scores 0 or raises (a broken gold);
    cua raises only where OSWorld crashes too, and never with `_never_raises` (a valid gold)."""
    never_raises = options.pop("_never_raises", False)
    logging.disable(logging.CRITICAL)  # OSWorld's code logs every mismatch, some to the root logger
    try:
        want = float(theirs(*args, **options))
    except Exception as e:  # noqa: BLE001 - OSWorld's code crashed
        want = e
    finally:
        logging.disable(logging.NOTSET)
    if name == "compare_images" and not isinstance(want, Exception) and want < 0:
        want = 0.0  # OSWorld quirk: a negative SSIM as a score; cua's floor is 0
    try:
        got = ours(*args, **options)
    except Exception as e:  # noqa: BLE001
        assert isinstance(want, Exception) and not never_raises, (name, args, options, want, e)
        CASES[name] += 1
        return None
    if isinstance(want, Exception):
        assert got == 0.0, (name, args, options, want, got)
    else:
        assert got == want, (name, args, options, want, got)
    CASES[name] += 1
    OUTCOMES[f"{name}: {'crash' if isinstance(want, Exception) else want if want in (0.0, 1.0) else 'fraction'}"] += 1
    return got


# -- images


def _picture(w: int, h: int, seed: int, mode: str = "RGB") -> Image.Image:
    """A picture with structure (a gradient, a few shapes), as SSIM wants one."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 1, w)[None, :, None]
    y = np.linspace(0, 1, h)[:, None, None]
    colours = rng.integers(0, 256, (2, 3))
    base = (colours[0] * x + colours[1] * y) / 2
    image = Image.fromarray(base.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(rng.integers(1, 4)):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(1, w)), y0 + int(rng.integers(1, h))
        fill = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.rectangle if rng.random() < 0.5 else draw.ellipse)([x0, y0, x1, y1], fill=fill)
    if mode == "RGBA":
        image.putalpha(Image.fromarray((rng.random((h, w)) > 0.2).astype(np.uint8) * 255))
        return image
    return image.convert(mode) if mode != "RGB" else image


def _variant(gold: Image.Image, kind: str, amount: float, seed: int) -> Image.Image:
    rgb = gold.convert("RGB") if gold.mode not in ("RGB", "RGBA") else gold
    if kind == "same":
        return gold
    if kind == "brightness":
        return ImageEnhance.Brightness(rgb).enhance(amount)
    if kind == "saturation":
        return ImageEnhance.Color(rgb.convert("RGB")).enhance(amount)
    if kind == "contrast":
        return ImageEnhance.Contrast(rgb.convert("RGB")).enhance(amount)
    if kind == "mirror":
        return gold.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if kind == "resize":
        return gold.resize((max(1, int(gold.width * amount)), max(1, int(gold.height * amount))))
    if kind == "noise":
        noise = np.random.default_rng(seed).normal(0, 40 * amount, (rgb.height, rgb.width, 3))
        return Image.fromarray(np.clip(np.array(rgb.convert("RGB")) + noise, 0, 255).astype(np.uint8))
    if kind == "palette":
        return rgb.convert("RGB").convert("P", palette=Image.Palette.ADAPTIVE, colors=int(4 + 60 * amount))
    if kind == "grey":
        return gold.convert("L")
    if kind == "green":  # the gold's non-black pixels made green
        pixels = np.array(rgb.convert("RGB")).astype(int)
        pixels[..., 1] = np.maximum(pixels[..., 0], pixels[..., 2]) + 1
        return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    if kind == "other":
        return _picture(gold.width, gold.height, seed + 1, gold.mode)
    raise AssertionError(kind)


def _save(image: Image.Image, path: Path, broken: str = "") -> str:
    if broken == "missing":
        return str(path)
    if broken == "empty":
        path.write_bytes(b"")
        return str(path)
    if broken == "text":
        path.write_text("not an image")
        return str(path)
    fmt = "JPEG" if path.suffix == ".jpg" else "PNG"
    if fmt == "JPEG" and image.mode not in ("RGB", "L"):
        image = image.convert("RGB")
    image.save(path, fmt)
    if broken == "truncated":
        path.write_bytes(path.read_bytes()[: max(40, path.stat().st_size // 2)])
    return str(path)


PAIR_METRICS = ["check_structure_sim", "check_structure_sim_resized", "check_brightness_decrease_and_structure_sim",
                "check_saturation_increase_and_structure_sim", "check_contrast_increase_and_structure_sim",
                "check_file_exists_and_structure_sim", "check_palette_and_structure_sim", "check_image_mirror",
                "check_green_background", "compare_image_list", "compare_images", "check_sharper"]
IMAGE_PAIRS = st.fixed_dictionaries({
    "size": st.tuples(st.integers(4, 40), st.integers(4, 40)) | st.sampled_from([(24, 24), (32, 32)]),
    "mode": st.sampled_from(["RGB", "RGB", "RGBA", "L", "P"]),
    "seed": st.integers(0, 10_000),
    "kind": st.sampled_from(["same", "brightness", "saturation", "contrast", "mirror", "resize", "noise", "palette",
                             "grey", "green", "other"]),
    "amount": st.sampled_from([0.5, 0.8, 0.97, 1.0, 1.03, 1.3, 2.0]),
    "suffix": st.sampled_from([".png", ".png", ".jpg"]),
    "broken": st.sampled_from([""] * 8 + ["empty", "text", "truncated"]),
})


@properties(40, case=IMAGE_PAIRS)
def test_image_pairs_scored_as_osworld_scores_them(tmp_path, case):
    tmp_path = fresh(tmp_path)
    gimp, vlc = osworld("gimp"), osworld("vlc")
    gold_image = _picture(*case["size"], case["seed"], case["mode"])
    gold = _save(gold_image, tmp_path / "gold.png")
    mine = _save(_variant(gold_image, case["kind"], case["amount"], case["seed"]), tmp_path / f"mine{case['suffix']}",
                 case["broken"])
    with mock.patch("time.sleep"):  # OSWorld's palette check waits before reading a broken file again
        for name in PAIR_METRICS:
            theirs = vlc.compare_images if name == "compare_images" else getattr(gimp, name)
            agree(name, images.METRICS[name], theirs, mine, gold)
        agree("compare_images", images.compare_images, vlc.compare_images, mine, gold, reference_base_result=0.92)
        agree("compare_image_list", images.compare_image_list, gimp.compare_image_list, [mine, gold], [gold, gold])


SINGLE_RULES = [{"height": 512}, {"height": 128, "width": 128}, {"height": 20, "width": 30},
                {"height": 20, "width": 30, "ignore_transparent": True}, "exact", "exact content"]


@properties(40, case=IMAGE_PAIRS, rule=st.sampled_from(SINGLE_RULES), transparent=st.booleans(),
            scale=st.sampled_from([1, 3, 6]), drawing=st.sampled_from(["picture", "triangle", "text box"]),
            shift=st.sampled_from([0.0, 0.01, 0.04, 0.1, 0.3]))
def test_single_images_scored_as_osworld_scores_them(tmp_path, case, rule, transparent, scale, drawing, shift):
    tmp_path = fresh(tmp_path)
    gimp = osworld("gimp")
    w, h = case["size"][0] * scale, case["size"][1] * scale
    picture = _picture(w, h, case["seed"], case["mode"])
    if drawing == "triangle":  # a triangle whose centroid is `shift` of the width off the centre
        picture = Image.new("RGB", (w, h), "white")
        cx, cy, d = w / 2 + shift * w, h / 2, min(w, h) / 6
        ImageDraw.Draw(picture).polygon([(cx, cy - 2 * d), (cx - 2 * d, cy + d), (cx + 2 * d, cy + d)], fill="yellow")
    elif drawing == "text box":  # dark text starting `shift` of the width from the left
        picture = Image.new("RGB", (w, h), "white")
        ImageDraw.Draw(picture).rectangle([int(shift * w), h // 3, int(shift * w) + w // 4, h // 2], fill="black")
    if transparent and picture.mode == "RGBA":  # a frame of transparency around the content
        framed = Image.new("RGBA", (picture.width + 10, picture.height + 6), (0, 0, 0, 0))
        framed.paste(picture, (5, 3))
        picture = framed
    if rule == "exact":
        rule = {"width": picture.width, "height": picture.height}
    elif rule == "exact content":
        rule = {"width": w, "height": h, "ignore_transparent": True}
    path = _save(picture, tmp_path / f"one{case['suffix']}", case["broken"])
    agree("check_image_size", images.check_image_size, gimp.check_image_size, path, {**rule})
    agree("check_triangle_position", images.check_triangle_position, gimp.check_triangle_position, path)
    agree("check_textbox_on_leftside", images.check_textbox_on_leftside, gimp.check_textbox_on_leftside, path)
    agree("check_image_file_size", images.check_image_file_size, gimp.check_image_file_size, path,
          {"max_size": 400 * scale})


@pytest.mark.parametrize("edit", ["darker", "more saturated", "more contrast", "palette", "resized", "resized content",
                                  "exported", "mirrored", "green background", "sharper"])
def test_the_gimp_tasks_edits_pass_and_their_opposites_fail_as_in_osworld(tmp_path, edit):
    """Each GIMP task's edit done right on a photo-sized picture passes, in cua and in OSWorld; the
    untouched picture (or the opposite edit) fails."""
    from PIL import ImageFilter

    gimp = osworld("gimp")
    photo = _picture(96, 96, 3).filter(ImageFilter.GaussianBlur(1))
    gold = _save(photo, tmp_path / "gold.png")
    metric, right, wrong = {
        "darker": ("check_brightness_decrease_and_structure_sim", ImageEnhance.Brightness(photo).enhance(0.8), photo),
        "more saturated": ("check_saturation_increase_and_structure_sim", ImageEnhance.Color(photo).enhance(1.4),
                           ImageEnhance.Color(photo).enhance(0.6)),
        "more contrast": ("check_contrast_increase_and_structure_sim", ImageEnhance.Contrast(photo).enhance(1.3),
                          ImageEnhance.Contrast(photo).enhance(0.7)),
        "palette": ("check_palette_and_structure_sim", photo.convert("P", palette=Image.Palette.ADAPTIVE), photo),
        "resized": ("check_structure_sim_resized", photo.resize((48, 48)), _picture(48, 48, 4)),
        "resized content": ("check_structure_sim_resized", _framed(photo.resize((40, 40))),
                            _framed(_picture(40, 40, 5))),
        "exported": ("check_file_exists_and_structure_sim", photo, _picture(96, 96, 4)),
        "mirrored": ("check_image_mirror", photo.transpose(Image.Transpose.FLIP_LEFT_RIGHT), photo),
        "green background": ("check_green_background", _variant(photo, "green", 1, 0), photo),
        "sharper": ("check_sharper", photo.filter(ImageFilter.SHARPEN), photo.filter(ImageFilter.GaussianBlur(2))),
    }[edit]
    for image, want in ((right, 1.0), (wrong, 0.0)):
        path = _save(image, tmp_path / "mine.png")
        assert agree(metric, images.METRICS[metric], getattr(gimp, metric), path, gold) == want, (edit, want)


def _framed(image: Image.Image) -> Image.Image:
    framed = Image.new("RGBA", (image.width + 20, image.height + 8), (0, 0, 0, 0))
    framed.paste(image, (10, 4))
    return framed


def test_a_transparent_colour_is_measured_by_content_as_in_osworld(tmp_path):
    """OSWorld quirk kept: a palette image with a transparent colour is measured by its content even
    without ignore_transparent."""
    gimp = osworld("gimp")
    image = Image.new("P", (40, 30), 0)
    image.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    ImageDraw.Draw(image).rectangle([5, 5, 14, 24], fill=1)
    image.info["transparency"] = 0
    path = tmp_path / "t.png"
    image.save(path, transparency=0)
    rule = {"width": 10, "height": 20}
    assert gimp.check_image_size(str(path), rule) == 1.0
    assert images.check_image_size(str(path), rule) == 1.0
    assert images.check_image_size(str(path), {"width": 40, "height": 30}) == 0.0


def test_a_real_brightness_task_passes_and_fails_as_in_osworld(tmp_path):
    gimp = osworld("gimp")
    gold = _picture(64, 48, 7)
    gold_path = _save(gold, tmp_path / "gold.png")
    darker = _save(ImageEnhance.Brightness(gold).enhance(0.7), tmp_path / "darker.png")
    brighter = _save(ImageEnhance.Brightness(gold).enhance(1.3), tmp_path / "brighter.png")
    assert images.check_brightness_decrease_and_structure_sim(darker, gold_path) == 1.0
    assert gimp.check_brightness_decrease_and_structure_sim(darker, gold_path) == 1.0
    assert images.check_brightness_decrease_and_structure_sim(brighter, gold_path) == 0.0
    mirrored = _save(gold.transpose(Image.Transpose.FLIP_LEFT_RIGHT), tmp_path / "mirror.png")
    assert images.check_image_mirror(mirrored, gold_path) == 1.0 == gimp.check_image_mirror(mirrored, gold_path)
    assert images.check_image_mirror(gold_path, gold_path) == 0.0


def test_a_broken_gold_image_raises_and_a_missing_result_scores_0(tmp_path):
    gold = _save(_picture(20, 20, 1), tmp_path / "gold.png")
    broken = _save(None, tmp_path / "broken.png", "text")
    for name in PAIR_METRICS:
        metric = images.METRICS[name]
        with pytest.raises(Exception):
            metric(gold, broken)
        assert metric(None, gold) == 0.0
        assert metric(broken, gold) == 0.0


def test_green_background_on_a_gold_image_that_is_not_square_raises_where_osworld_crashes(tmp_path):
    gimp = osworld("gimp")
    gold_image = Image.new("RGB", (30, 20), "white")
    gold = _save(gold_image, tmp_path / "gold.png")
    green = _save(Image.new("RGB", (30, 20), (0, 200, 0)), tmp_path / "green.png")
    red = _save(Image.new("RGB", (30, 20), (200, 0, 0)), tmp_path / "red.png")
    with pytest.raises(IndexError):
        gimp.check_green_background(green, gold)
    with pytest.raises(ValueError):
        images.check_green_background(green, gold)
    assert gimp.check_green_background(red, gold) == 0.0 == images.check_green_background(red, gold)
    square = _save(Image.new("RGB", (20, 20), "white"), tmp_path / "square.png")
    assert images.check_green_background(green, square) == 1.0 == gimp.check_green_background(green, square)


# -- PDFs

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "Größe", "naïve"]


def _pdf(path: Path, pages: list[list[str]], pictures: list[int] = (), broken: str = "") -> str:
    import pymupdf

    if broken in ("empty", "text", "missing"):
        return _save(None, path, broken)
    document = pymupdf.open()
    for number, words in enumerate(pages):
        page = document.new_page(width=300, height=200)
        page.insert_text((20, 40), " ".join(words), fontsize=11)
        if number == 0:
            for i, seed in enumerate(pictures):
                data = io.BytesIO()
                _picture(24, 24, seed).save(data, "PNG")
                page.insert_image(pymupdf.Rect(20 + 40 * i, 80, 56 + 40 * i, 116), stream=data.getvalue())
    document.save(path)
    document.close()
    if broken == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])
    return str(path)


DOCUMENTS = st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=8), min_size=1, max_size=3)
CHANGES = st.sampled_from(["same", "word", "page+", "page-", "pictures", "broken"])


def _changed(pages, pictures, change: str, seed: int):
    pages = [list(p) for p in pages]
    if change == "word":
        pages[0] = pages[0][:-1] + [WORDS[seed % len(WORDS)]]
    elif change == "page+":
        pages.append([WORDS[seed % len(WORDS)]])
    elif change == "page-" and len(pages) > 1:
        pages.pop()
    elif change == "pictures":
        pictures = [p + 1 for p in pictures][: max(0, len(pictures) - seed % 2)]
    return pages, pictures


@properties(15, pages=DOCUMENTS, pictures=st.lists(st.integers(0, 50), max_size=3), change=CHANGES,
            broken=st.sampled_from(["empty", "text", "truncated"]), seed=st.integers(0, 100),
            relation=st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]), ref=st.integers(0, 4))
def test_pdfs_scored_as_osworld_scores_them(tmp_path, pages, pictures, change, broken, seed, relation, ref):
    tmp_path = fresh(tmp_path)
    chrome, pdfs = osworld("chrome"), osworld("pdf")
    gold = _pdf(tmp_path / "gold.pdf", pages, pictures)
    mine_pages, mine_pictures = _changed(pages, pictures, change, seed)
    mine = _pdf(tmp_path / "mine.pdf", mine_pages, mine_pictures, broken if change == "broken" else "")
    agree("compare_pdfs", pdf.compare_pdfs, chrome.compare_pdfs, mine, gold)
    agree("compare_pdfs", pdf.compare_pdfs, chrome.compare_pdfs, [mine, gold], [gold, gold])
    agree("compare_pdf_images", pdf.compare_pdf_images, chrome.compare_pdf_images, mine, gold)
    agree("check_pdf_pages", pdf.check_pdf_pages, pdfs.check_pdf_pages, mine, {"relation": relation, "ref_value": ref})


def test_compare_pdfs_is_rapidfuzz_ratio_to_the_last_digit(tmp_path):
    chrome = osworld("chrome")
    gold = _pdf(tmp_path / "gold.pdf", [WORDS * 3, WORDS[:4]])
    mine = _pdf(tmp_path / "mine.pdf", [WORDS * 3, WORDS[:3]])
    score = pdf.compare_pdfs(mine, gold)
    assert 0.9 < score < 1.0
    assert score == chrome.compare_pdfs(mine, gold)
    assert pdf.compare_pdfs(None, gold) == 0.0


# -- archives


def _zip(path: Path, members: dict, broken: str = "") -> str:
    if broken:
        return _save(None, path, broken)
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return str(path)


def _tar(path: Path, members: dict) -> str:
    with tarfile.open(path, "w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return str(path)


@contextlib.contextmanager
def _inside(folder: Path):
    """OSWorld's compare_zip_files writes temp.pdf in the working folder: the test's own."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@properties(15, pages=DOCUMENTS,
            names=st.lists(st.sampled_from(["a", "b", "c d"]), min_size=1, max_size=3, unique=True),
            change=CHANGES, seed=st.integers(0, 100), text_change=st.booleans(),
            where=st.sampled_from(["", "lecture_slides"]), tarball=st.booleans())
def test_archives_scored_as_osworld_scores_them(tmp_path, pages, names, change, seed, text_change, where, tarball):
    tmp_path = fresh(tmp_path)
    chrome, vscode = osworld("chrome"), osworld("vscode")
    folder = f"{where}/" if where else ""

    def members(which: str) -> dict:
        out = {}
        for i, name in enumerate(names):
            p = pages if which == "gold" or i else _changed(pages, [], change, seed)[0]
            raw = Path(_pdf(tmp_path / f"{which}-{name}.pdf", p, broken="text" if change == "broken" and
                            which == "mine" and not i else ""))
            out[f"{folder}{name}.pdf"] = raw.read_bytes()
        out[f"{folder}notes.txt"] = b"notes" + (b"!" if text_change and which == "mine" else b"")
        return out
    gold_members, mine_members = members("gold"), members("mine")
    (tmp_path / "z").mkdir()
    gold = _zip(tmp_path / "z" / "gold.zip", gold_members)
    mine = _zip(tmp_path / "z" / "mine.zip", mine_members)
    with _inside(tmp_path):
        agree("compare_zip_files", media.compare_zip_files, vscode.compare_zip_files, mine, gold)
    for file_type, members_ in (("pdf", {k: v for k, v in mine_members.items() if k.endswith(".pdf")}),):
        gold_only = {k: v for k, v in gold_members.items() if k.endswith(".pdf")}
        for run in range(2):  # fresh folders: OSWorld unpacks beside the archives and keeps the gold's
            box = tmp_path / f"a{run}{tarball}"
            box.mkdir()
            if tarball:
                g, m = _tar(box / "gold.tar.gz", gold_only), _tar(box / "mine.tar.gz", members_)
            else:
                g, m = _zip(box / "gold.zip", gold_only), _zip(box / "mine.zip", members_)
            options = {"file_type": file_type, **({"file_path": where} if where else {})}
            agree("compare_archive", media.compare_archive, chrome.compare_archive, m, g, **options)
            members_ = {**members_, f"{folder}extra.pdf": b"%PDF-1.4"} if run == 0 else members_


def test_an_archive_member_that_would_land_outside_is_refused(tmp_path):
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as t:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 3
        t.addfile(info, io.BytesIO(b"bad"))
    gold = _tar(tmp_path / "gold.tar.gz", {"outside.txt": b"bad"})
    (tmp_path / "sub").mkdir()
    assert media.compare_archive(str(evil), gold, file_type="text") == 0.0
    assert not (tmp_path / "outside.txt").exists()
    assert not any(p.name.startswith(".unpacked-") for p in tmp_path.iterdir())
    assert media.compare_archive(gold, gold, file_type="text") == 1.0


# -- e-books


def _epub(path: Path, pages: dict, toc_lines: list, broken: str = "") -> str:
    if broken in ("text", "empty"):
        return _save(None, path, broken)
    members = {"mimetype": b"application/epub+zip",
               "toc.ncx": "\n".join(["<ncx>", *toc_lines, '<navPoint id="n1"/>', "</ncx>"]).encode(),
               "content.opf": "\n".join(["<package>", "<dc:identifier>urn:uuid:1</dc:identifier>",
                                         "<dc:title>Pass Through</dc:title>", "</package>"]).encode()}
    for name, text in pages.items():
        members[name] = text.encode("latin-1" if broken == "latin1" else "utf-8")
    return _zip(path, members)


PAGES = st.dictionaries(st.sampled_from(["ch1.html", "ch2.html", "ch3.html", "OEBPS/ch4.html"]),
                        st.lists(st.sampled_from(WORDS + [""]), max_size=6).map(
                            lambda ws: "<html><body>\n" + "".join(f"<p>{w}</p>\r\n" for w in ws) + "</body></html>"),
                        max_size=3)


@properties(50, pages=PAGES, toc=st.lists(st.sampled_from(["<a/>", "<b/>", "<navPoint/>"]), max_size=3),
            change=st.sampled_from(["same", "page", "drop", "toc", "broken", "latin1", "empty-page"]),
            seed=st.integers(0, 10))
def test_epubs_scored_as_osworld_scores_them(tmp_path, pages, toc, change, seed):
    tmp_path = fresh(tmp_path)
    others = osworld("others")
    gold = _epub(tmp_path / "gold.epub", {k: v for k, v in pages.items() if "/" not in k}, toc)
    mine_pages, mine_toc, broken = dict(pages), list(toc), ""
    if change == "page" and pages:
        name = sorted(pages)[seed % len(pages)]
        mine_pages[name] = mine_pages[name].replace("</body>", f"<p>{WORDS[seed % len(WORDS)]}</p></body>")
    elif change == "drop" and pages:
        mine_pages.pop(sorted(pages)[0])
    elif change == "toc":
        mine_toc.append("<extra/>")
    elif change == "broken":
        broken = "text"
    elif change == "latin1":
        broken, mine_pages = "latin1", {**mine_pages, "ch9.html": "<html><body>Größe</body></html>"}
    elif change == "empty-page":
        mine_pages["ch0.html"] = ""
    mine = _epub(tmp_path / "mine.epub", mine_pages, mine_toc, broken)
    agree("compare_epub", media.compare_epub, others.compare_epub, mine, gold)


# -- MP3 tags, documents


@pytest.fixture(scope="module")
def mp3(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mp3") / "tone.mp3"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=1",
                    "-q:a", "9", str(path)], check=True, timeout=60)
    return path


NAMES = ["Missing You", "Cheng Xiang", "Han Baoyi", "Tears of Dancing Girl", ""]


@properties(60,
            title=st.one_of(st.none(), st.sampled_from(NAMES), st.lists(st.sampled_from(NAMES[:3]), min_size=2,
                                                                         max_size=2)),
            artist=st.one_of(st.none(), st.sampled_from(NAMES)), want_title=st.sampled_from(NAMES),
            want_artist=st.sampled_from(NAMES), method=st.sampled_from(["eq", "ne", "re", "re.I"]),
            broken=st.sampled_from(["", "", "", "untagged", "text"]))
def test_mp3_tags_scored_as_osworld_scores_them(tmp_path, mp3, title, artist, want_title, want_artist, method, broken):
    tmp_path = fresh(tmp_path)
    from mutagen.easyid3 import EasyID3
    others = osworld("others")
    path = tmp_path / "song.mp3"
    path.write_bytes(mp3.read_bytes() if broken != "text" else b"not an mp3")
    if not broken:
        tags = EasyID3()
        if title is not None:
            tags["title"] = title
        if artist is not None:
            tags["artist"] = artist
        tags.save(path)
    rules = {"title": {"method": method, "ref": want_title}, "artist": {"method": method, "ref": want_artist}}
    agree("check_mp3_meta", media.check_mp3_meta, others.check_mp3_meta, str(path), rules)


ANSWERS = ["深圳市福田区益田路5055号", "深圳市福田区福华三路111号", "北京市海淀区中关村大街1号"]


@properties(15, words=st.lists(st.sampled_from(ANSWERS + ["深圳市福田区", "上海", "Shenzhen"]), min_size=2,
                                    max_size=4),
            paragraphs=st.booleans(), broken=st.sampled_from(["", "", "", "text"]))
def test_fuzzy_place_math_scored_as_osworld_scores_it(tmp_path, words, paragraphs, broken):
    tmp_path = fresh(tmp_path)
    from docx import Document
    general = osworld("general")
    path = tmp_path / "AllLocations.docx"
    if broken:
        path.write_text("no document")
    else:
        document = Document()
        for chunk in ([[w] for w in words] if paragraphs else [words]):
            document.add_paragraph(" ".join(chunk))
        document.save(path)
    agree("fuzzy_place_math", media.fuzzy_place_math, general.fuzzy_place_math, str(path), {"expected": ANSWERS})


# -- audio and video


def _tone(path: Path, notes: list, rate: int = 22050, noise: float = 0.0, seed: int = 0) -> str:
    import soundfile

    t = np.arange(int(rate * 0.25)) / rate
    samples = np.concatenate([0.4 * np.sin(2 * np.pi * f * t) for f in notes]) if notes else np.zeros(0)
    samples = samples + np.random.default_rng(seed).normal(0, noise, samples.shape)
    soundfile.write(path, samples.astype(np.float32), rate)
    return str(path)


@pytest.mark.slow  # librosa's first call compiles its numba kernels: about 15 s
@properties(5, notes=st.lists(st.sampled_from([220, 330, 440, 550, 660]), min_size=1, max_size=6),
            change=st.sampled_from(["same", "noise", "other", "shorter", "rate", "broken", "empty"]),
            noise=st.sampled_from([0.01, 0.1, 0.3]), seed=st.integers(0, 100))
def test_audio_scored_as_osworld_scores_it(tmp_path, notes, change, noise, seed):
    tmp_path = fresh(tmp_path)
    vlc = osworld("vlc")
    gold = _tone(tmp_path / "gold.wav", notes)
    mine_notes, rate, level = list(notes), 22050, 0.0
    if change == "noise":
        level = noise
    elif change == "other":
        mine_notes = [n * 1.5 for n in reversed(notes)]
    elif change == "shorter":
        mine_notes = notes[:-1] or notes
    elif change == "rate":
        rate = 16000
    if change == "broken":
        mine = _save(None, tmp_path / "mine.wav", "text")
    else:
        mine = _tone(tmp_path / "mine.wav", [] if change == "empty" else mine_notes, rate, level, seed)
    agree("compare_audios", media.compare_audios, vlc.compare_audios, mine, gold)


def test_an_mp3_and_its_noisy_copy_compare_as_in_osworld(tmp_path, mp3):
    vlc = osworld("vlc")
    noisy = tmp_path / "noisy.mp3"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(mp3), "-f", "lavfi", "-i",
                    "anoisesrc=amplitude=0.05:duration=1", "-filter_complex", "amix=inputs=2", "-q:a", "9",
                    str(noisy)], check=True, timeout=60)
    for a, b in ((mp3, mp3), (noisy, mp3)):
        score = agree("compare_audios", media.compare_audios, vlc.compare_audios, str(a), str(b))
        assert 0.0 < score <= 1.0
    assert media.compare_audios(str(mp3), str(mp3)) == 1.0
    with pytest.raises(ValueError):
        media.compare_audios(str(mp3), _save(None, tmp_path / "gold.mp3", "empty"))


def _video(path: Path, source: str, seconds: float = 1.0) -> str:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", f"{source}=size=64x48:rate=10",
                    "-t", str(seconds), "-pix_fmt", "yuv420p", str(path)], check=True, timeout=60)
    return str(path)


def test_videos_scored_as_osworld_scores_them(tmp_path):
    vlc = osworld("vlc")
    gold = _video(tmp_path / "gold.mp4", "testsrc")
    cases = {"same": _video(tmp_path / "same.mp4", "testsrc"),
             "other": _video(tmp_path / "other.mp4", "mandelbrot"),
             "shorter": _video(tmp_path / "shorter.mp4", "testsrc", 0.5),
             "noisy": _video(tmp_path / "noisy.mp4", "testsrc2"),
             "broken": _save(None, tmp_path / "broken.mp4", "text")}
    scores = {name: agree("compare_videos", media.compare_videos, vlc.compare_videos, path, gold)
              for name, path in cases.items()}
    assert scores["same"] == 1.0 and scores["shorter"] == 0.0 and scores["broken"] == 0.0
    agree("compare_videos", media.compare_videos, vlc.compare_videos, cases["other"], gold, max_frames_to_check=3)
    with pytest.raises(ValueError):
        media.compare_videos(gold, cases["broken"])


def test_the_metrics_name_the_media_extra_and_setup_cfg_installs_it():
    """A host with `pip install 'cua[media]'` has every library these metrics import, and the test
    extra (which the tests run with) has them too."""
    import configparser
    import re

    from cua_cli.osworld.metrics import EXTRAS, METRICS

    config = configparser.ConfigParser()
    config.read(Path(__file__).resolve().parents[1] / "setup.cfg")

    def names(text: str) -> set:
        return {re.split(r"[<>=~!\[ ]", line.strip())[0].lower() for line in text.splitlines()
                if line.strip() and not line.strip().startswith("#")}
    extra = names(config["options.extras_require"]["media"])
    test = names(config["options.extras_require"]["test"]) | names(config["options"]["install_requires"])
    for module in (images, pdf, media):
        assert module.EXTRA.name == "media"
        for pip_name in module.EXTRA.modules.values():
            assert pip_name.lower() in extra and pip_name.lower() in test, pip_name
        for name, metric in module.METRICS.items():
            assert METRICS[name] is metric and EXTRAS[name] is module.EXTRA


EVALUATORS = json.loads((Path(__file__).resolve().parent / "data" / "osworld_media" / "evaluators.json").read_text())


def _calls(evaluator: dict):
    """(metric, result getter, expected getter, options) of each metric the evaluator calls."""
    funcs = evaluator["func"] if isinstance(evaluator["func"], list) else [evaluator["func"]]
    for i, name in enumerate(funcs):
        def part(key):
            value = evaluator.get(key)
            return value[i] if isinstance(evaluator["func"], list) and isinstance(value, list) else value
        yield name, part("result"), part("expected"), part("options") or {}


def test_every_osworld_task_of_these_metrics_is_supported():
    from cua_cli.osworld.support import unsupported

    assert len(EVALUATORS) > 40
    ours = set(images.METRICS) | set(pdf.METRICS) | set(media.METRICS)
    used = set()
    for task, evaluator in EVALUATORS.items():
        missing = unsupported({"config": [], "evaluator": evaluator})
        assert not [m for m in missing if any(f"'{name}'" in m for name in ours)], (task, missing)
        used |= {name for name, *_ in _calls(evaluator)} & ours
    assert used == ours - {"is_gold_text_included_in_pdf"}, ours - used  # no task of the snapshot calls that one


def test_the_rules_osworld_tasks_pass_are_scored_as_osworld_scores_them(tmp_path, mp3):
    """Each rule an OSWorld task gives one of these metrics, on a file that meets it and one that
    does not."""
    from docx import Document
    from mutagen.easyid3 import EasyID3

    modules = {"check_image_size": "gimp", "check_image_file_size": "gimp", "check_pdf_pages": "pdf",
               "check_mp3_meta": "others", "fuzzy_place_math": "general"}
    seen = collections.Counter()
    for task, evaluator in EVALUATORS.items():
        for name, _, expected, options in _calls(evaluator):
            if name not in modules or not expected or expected.get("type") != "rule":
                continue
            rules, theirs = expected["rules"], getattr(osworld(modules[name]), name)
            ours = {**images.METRICS, **pdf.METRICS, **media.METRICS}[name]
            folder = fresh(tmp_path)
            if name == "check_image_file_size":  # a small picture, and noise that PNG cannot shrink
                side = int((rules["max_size"] / 3) ** 0.5) + 20
                noise = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
                files = [_save(_picture(64, 64, 1), folder / "small.png"),
                         _save(Image.fromarray(noise), folder / "noise.png")]
            elif name == "check_image_size":
                sizes = [(rules.get("width", 64), rules.get("height", 64)), (33, 21)]
                files = [_save(_picture(w, h, 1), folder / f"{w}x{h}.png") for w, h in sizes]
            elif name == "check_pdf_pages":
                counts = (rules["ref_value"], rules["ref_value"] + 1)
                files = [_pdf(folder / f"{n}.pdf", [["page"]] * n) for n in counts]
            elif name == "check_mp3_meta":
                files = []
                for k in range(2):
                    path = folder / f"{k}.mp3"
                    path.write_bytes(mp3.read_bytes())
                    tags = EasyID3()
                    for key, rule in rules.items():
                        tags[key] = rule["ref"] if k == 0 else rule["ref"] + "?"
                    tags.save(path)
                    files.append(str(path))
            else:
                files = []
                for k, words in enumerate((rules["expected"][:3], rules["expected"][:2])):
                    document = Document()
                    for word in words:
                        document.add_paragraph(word)
                    document.save(folder / f"{k}.docx")
                    files.append(str(folder / f"{k}.docx"))
            scores = [agree(name, ours, theirs, path, rules, **options) for path in files]
            assert scores[0] > 0 and scores[1] == 0, (task, name, scores)
            seen[name] += 1
    assert set(seen) == set(modules), seen


@pytest.mark.parametrize("file_type", ["text", "image", "csv"])
def test_archives_of_other_file_types_scored_as_osworld_scores_them(tmp_path, file_type):
    chrome = osworld("chrome")

    def member(k: int, changed: bool) -> bytes:
        if file_type == "image":
            data = io.BytesIO()
            _picture(32, 24, k + (7 if changed else 0)).save(data, "PNG")
            return data.getvalue()
        return f"name,value\nrow{k},{k * 2 + changed}\n".encode()
    suffix = {"text": "txt", "image": "png", "csv": "csv"}[file_type]
    gold_members = {f"out/f{k}.{suffix}": member(k, False) for k in range(3)}
    for n, changes in enumerate([(), (1,), (0, 2)]):
        box = fresh(tmp_path)
        mine_members = {f"out/f{k}.{suffix}": member(k, k in changes) for k in range(3)}
        gold, mine = _zip(box / "gold.zip", gold_members), _zip(box / "mine.zip", mine_members)
        score = agree("compare_archive", media.compare_archive, chrome.compare_archive, mine, gold,
                      file_type=file_type, file_path="out")
        assert (score == 1.0) == (not changes), (file_type, changes, score)


@properties(20, pages=DOCUMENTS, change=CHANGES, seed=st.integers(0, 100),
            wanted=st.dictionaries(st.sampled_from(["name", "total", "date"]), st.sampled_from(WORDS + ["alpha beta"]),
                                   max_size=3))
def test_gold_text_in_pdfs_found_as_osworld_finds_it(tmp_path, pages, change, seed, wanted):
    general = osworld("general")
    tmp_path = fresh(tmp_path)
    mine_pages, _ = _changed(pages, [], change, seed)
    mine = _pdf(tmp_path / "mine.pdf", mine_pages, broken="text" if change == "broken" else "")
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps(wanted))
    with contextlib.redirect_stdout(io.StringIO()):  # OSWorld's version prints the paths it reads
        agree("is_gold_text_included_in_pdf", pdf.is_gold_text_included_in_pdf, general.is_gold_text_included_in_pdf,
              mine, str(gold))


def test_a_broken_gold_file_raises_where_osworld_would_score_the_agent_0(tmp_path, mp3):
    """A task whose gold file is broken is the task's fault (an EvalError), not the agent's 0."""
    broken = _save(None, tmp_path / "broken", "text")
    epub = _epub(tmp_path / "book.epub", {"ch1.html": "<html><body><p>a</p></body></html>"}, [])
    with pytest.raises(ValueError):
        media.compare_epub(epub, broken)
    with pytest.raises(Exception):
        media.compare_zip_files(_zip(tmp_path / "a.zip", {"a.txt": b"a"}), broken)
    with pytest.raises(Exception):
        media.compare_archive(_zip(tmp_path / "b.zip", {"a.txt": b"a"}), broken, file_type="text")
    assert media.compare_epub(broken, epub) == 0.0
    assert media.compare_zip_files(broken, _zip(tmp_path / "c.zip", {"a.txt": b"a"})) == 0.0
    assert pdf.compare_pdf_images(broken, _pdf(tmp_path / "gold.pdf", [["a"]])) == 0.0
    with pytest.raises(Exception):
        pdf.compare_pdf_images(_pdf(tmp_path / "mine.pdf", [["a"]]), broken)


HEADERS = [b"", b"\x89PNG\r\n\x1a\n", b"%PDF-1.4\n", b"PK\x03\x04", b"ID3\x03\x00\x00\x00\x00\x00\x00", b"\xff\xd8\xff",
           b"RIFF\x24\x00\x00\x00WAVEfmt "]


@pytest.fixture(scope="module")
def golds(tmp_path_factory, mp3) -> dict:
    folder = tmp_path_factory.mktemp("golds")
    picture = _picture(32, 32, 1)
    return {"image": _save(picture, folder / "gold.png"), "pdf": _pdf(folder / "gold.pdf", [WORDS], [1]),
            "epub": _epub(folder / "gold.epub", {"ch1.html": "<html><body><p>a</p></body></html>"}, ["<a/>"]),
            "zip": _zip(folder / "gold.zip", {"a.txt": b"a"}),
            "mp3": str(mp3)}


@properties(15, header=st.sampled_from(HEADERS), body=st.binary(max_size=600), cut=st.integers(0, 2000))
def test_hostile_files_of_the_agent_score_as_in_osworld_and_never_raise(tmp_path, golds, header, body, cut):
    """Whatever bytes the agent leaves (a valid header and garbage, or a valid file cut short), cua
    scores them without raising, as OSWorld does or 0 where OSWorld crashes."""
    tmp_path = fresh(tmp_path)
    gimp, vlc, chrome, others, vscode = (osworld(m) for m in ("gimp", "vlc", "chrome", "others", "vscode"))
    pdfs = osworld("pdf")
    truncated = {"\x89PNG": "image", "%PDF-": "pdf", "PK\x03\x04": "zip"}.get(header[:5].decode("latin-1").rstrip("\n"))
    data = header + body
    if truncated and not body:  # a real file of that kind, cut short
        data = Path(golds[truncated]).read_bytes()[:cut]
    calls = [("check_structure_sim", images.check_structure_sim, gimp.check_structure_sim, "image", ".png"),
             ("check_image_mirror", images.check_image_mirror, gimp.check_image_mirror, "image", ".png"),
             ("compare_images", images.compare_images, vlc.compare_images, "image", ".png"),
             ("check_green_background", images.check_green_background, gimp.check_green_background, "image", ".png"),
             ("compare_pdfs", pdf.compare_pdfs, chrome.compare_pdfs, "pdf", ".pdf"),
             ("compare_pdf_images", pdf.compare_pdf_images, chrome.compare_pdf_images, "pdf", ".pdf"),
             ("compare_epub", media.compare_epub, others.compare_epub, "epub", ".epub"),
             ("compare_zip_files", media.compare_zip_files, vscode.compare_zip_files, "zip", ".zip")]
    # (broken audio: the audio property's cases; librosa's fallback decoder is a process per file)
    for name, ours, theirs, gold, suffix in calls:
        path = tmp_path / f"mine-{name}{suffix}"
        path.write_bytes(data)
        with _inside(tmp_path):
            agree(name, ours, theirs, str(path), golds[gold], _never_raises=True)
    path = tmp_path / "mine.mp3"
    path.write_bytes(data)
    rules = {"title": {"method": "eq", "ref": "x"}}
    agree("check_mp3_meta", media.check_mp3_meta, others.check_mp3_meta, str(path), rules, _never_raises=True)
    agree("check_pdf_pages", pdf.check_pdf_pages, pdfs.check_pdf_pages, str(path), {"relation": "eq", "ref_value": 1},
          _never_raises=True)
