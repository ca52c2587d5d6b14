"""compare_image_text (cua_cli/osworld/metrics/ocr.py) cross-checked against OSWorld's own code
(desktop-env 1.0.2's metrics/docs.py) on the same images and the same EasyOCR reader.

Nothing is downloaded: EasyOCR's two networks (the CRAFT detector and the english_g2 recognizer)
are built from EasyOCR's own classes with random weights (seeded), saved under a temporary model
folder with the file names EasyOCR expects, and the reader is made by cua's metric from that folder
(CUA_EASYOCR_MODELS, downloads disabled); OSWorld's code gets that very reader. The detector's last
bias is raised so that it finds a text box (random weights alone find none), and the recognizer's
output layer is set to read characters rather than CTC blanks. The text is nonsense, so the
rules are taken from what the reader itself reads: a piece of it (a hit), more than it (a miss).
"""

import hashlib
import os
import shutil
import struct
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.osworld_reference import reference

easyocr = pytest.importorskip("easyocr")
np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")

from cua_cli.osworld.metrics import METRICS, ocr  # noqa: E402


@pytest.fixture(scope="module")
def osworld():
    return reference("docs")


# -- X Window dumps


def xwd(width, height, depth=32, pixels=None, ncolors=256, name=b"ls\0", bits_per_pixel=None):
    """An X11 window dump (version 7) as xwd writes one: header, window name, colour map, pixels."""
    bits_per_pixel = bits_per_pixel or (32 if depth in (24, 32) else depth)
    size = 100 + len(name)
    line = width * bits_per_pixel // 8
    fields = (size, 7, 2, depth, width, height, 0, 1, 32, 1, 32, bits_per_pixel, line, 4,
              0xFF0000, 0xFF00, 0xFF, 8, 256, ncolors, width, height, 0, 0, 0)
    colormap = b"".join(struct.pack(">IHHHBB", i, i * 257, i * 257, i * 257, 7, 0) for i in range(ncolors))
    if pixels is None:
        pixels = bytes(line * height)
    return struct.pack(">25I", *fields) + name + colormap + pixels


def file_says_xwd(path) -> bool:
    """OSWorld's test on what `file` prints of the file's kind (OSWorld's also sees the path, which
    here holds the test's name: the kind alone is what cua's test must agree with)."""
    if shutil.which("file") is None:
        pytest.skip("no `file` command (OSWorld's code asks it what the screenshot is)")
    out = subprocess.run(["file", "-b", path], capture_output=True, text=True).stdout.lower()
    return "x-window screen dump" in out or "xwd" in out


headers = st.fixed_dictionaries({
    "size": st.one_of(st.integers(0, 200), st.integers(0, 2**32 - 1)),
    "version": st.sampled_from([7, 7, 7, 6, 8]),
    "format": st.sampled_from([0, 1, 2, 2, 3]),
    "depth": st.sampled_from([0, 1, 8, 16, 24, 24, 32, 32, 33]),
    "width": st.integers(0, 5),
    "height": st.integers(0, 5),
    "rest": st.binary(min_size=0, max_size=200),
})


def header_file(tmp_path, h):
    head = struct.pack(">6I", h["size"], h["version"], h["format"], h["depth"], h["width"], h["height"])
    path = tmp_path / "dump.bin"
    path.write_bytes(head + h["rest"])
    return path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(h=headers)
def test_xwd_detection_is_files(tmp_path, h):
    """cua's test of the header says X11 dump exactly when `file` does (OSWorld asks `file`)."""
    path = header_file(tmp_path, h)
    assert ocr._is_xwd(path.read_bytes()[:100]) == file_says_xwd(str(path))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(h=headers, extra=st.integers(-8, 8))
def test_xwd_pixels_are_osworlds(osworld, tmp_path, h, extra):
    """cua's reading of a dump's pixels is OSWorld's read_x11_image's: the same pixels, or both refuse
    (the data runs from the header's size on, a little more or less than width x height asks)."""
    h = dict(h, size=h["size"] % 160)
    channels = 4 if h["depth"] == 32 else 3
    head = struct.pack(">6I", h["size"], h["version"], h["format"], h["depth"], h["width"], h["height"])
    body = (head + h["rest"]).ljust(max(24, h["size"]), b"\x5a")
    need = h["width"] * h["height"] * channels + extra
    body += bytes((i * 37) % 256 for i in range(max(0, need)))
    path = tmp_path / "dump.bin"
    path.write_bytes(body)
    try:
        want = np.asarray(osworld.read_x11_image(str(path)))
    except Exception:  # noqa: BLE001 - OSWorld refuses it
        want = None
    try:
        got = np.asarray(ocr._raw_xwd(str(path)))
    except Exception:  # noqa: BLE001
        got = None
    if want is None:
        assert got is None
    else:
        assert got is not None and got.shape == want.shape and (got == want).all()


def test_xwd_quirks(osworld, tmp_path):
    """A real dump's colour map shifts OSWorld's reading, and depth 24 at 32 bits a pixel is read as
    3 bytes a pixel: cua reads the same (wrong) pixels; a dump cut short reads as nothing in both."""
    rng = np.random.default_rng(1)
    for depth in (24, 32):
        raw = rng.integers(0, 256, 6 * 4 * 4, dtype=np.uint8).tobytes()
        path = tmp_path / f"d{depth}.bin"
        path.write_bytes(xwd(6, 4, depth, raw))
        assert file_says_xwd(str(path)) and ocr._is_xwd(path.read_bytes()[:100])
        got = np.asarray(ocr._raw_xwd(str(path)))
        assert (got == np.asarray(osworld.read_x11_image(str(path)))).all()
        if depth == 32:   # the 3072-byte colour map is where OSWorld's reading starts
            assert got.tobytes() != np.frombuffer(raw, np.uint8).reshape(4, 6, 4)[:, :, [2, 1, 0]].tobytes()
    short = tmp_path / "short.bin"
    short.write_bytes(xwd(600, 400, 32, b"\1" * 100))
    with pytest.raises(Exception):
        osworld.read_x11_image(str(short))
    with pytest.raises(Exception):
        ocr._raw_xwd(str(short))


# -- the metric without OCR


def test_registered_with_its_extra():
    from cua_cli.osworld.metrics import EXTRAS

    assert METRICS["compare_image_text"] is ocr.compare_image_text
    assert EXTRAS["compare_image_text"].name == "ocr"


def test_missing_image_scores_zero_without_a_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr, "reader", lambda: pytest.fail("no reader for a missing image"))
    for path in (None, "", str(tmp_path / "nothing.png")):
        assert ocr.compare_image_text(path, {"type": "text", "text": " Ls"}) == 0


@pytest.mark.parametrize("rule", [{"type": "regex", "text": "Ls"}, {"type": "text"}, {"text": "Ls"}, None,
                                  {"type": "text", "text": 3}])
def test_broken_rule_raises(tmp_path, rule):
    """OSWorld scores a rule of another type 0 (it catches its own ValueError): the task is broken."""
    with pytest.raises(ValueError):
        ocr.compare_image_text(str(tmp_path / "x.png"), rule)


# -- the metric with OCR: random-weight EasyOCR networks


@pytest.fixture(scope="module")
def shared_reader(tmp_path_factory):
    import torch
    from easyocr import config
    from easyocr.craft import CRAFT
    from easyocr.model.vgg_model import Model

    folder = tmp_path_factory.mktemp("easyocr-models")
    torch.manual_seed(20)
    detector = CRAFT()   # pretrained=False: torchvision's VGG is not fetched either
    with torch.no_grad():
        detector.conv_cls[8].bias.fill_(8.0)   # region and link scores high: the image is one text box
    torch.save(detector.state_dict(), folder / "craft_mlt_25k.pth")
    english = config.recognition_models["gen2"]["english_g2"]
    recognizer = Model(num_class=len(english["characters"]) + 1, input_channel=1, output_channel=256,
                       hidden_size=256)
    with torch.no_grad():
        recognizer.Prediction.weight.mul_(400.0)   # a sharp choice of character
        recognizer.Prediction.bias.zero_()
        recognizer.Prediction.bias[0] = -50.0      # few CTC blanks: some text
    # EasyOCR's recognizer files are DataParallel's: every key under "module."
    torch.save({f"module.{k}": v for k, v in recognizer.state_dict().items()}, folder / "english_g2.pth")

    def md5(path):
        return hashlib.md5(path.read_bytes()).hexdigest()

    with pytest.MonkeyPatch.context() as mp:
        # EasyOCR checks its files' MD5 against its release's: these are ours (downloads stay disabled)
        mp.setitem(config.detection_models["craft"], "md5sum", md5(folder / "craft_mlt_25k.pth"))
        mp.setitem(english, "md5sum", md5(folder / "english_g2.pth"))
        mp.setenv(ocr.MODELS_ENV, str(folder))
        mp.setattr(ocr, "_readers", {})
        yield ocr.reader()


@pytest.fixture(scope="module")
def osworld_ocr(osworld, shared_reader):
    """OSWorld's compare_image_text with its `easyocr.Reader(['en'])` giving the shared reader."""
    import types

    def Reader(langs, **kwargs):  # noqa: N802 - stands for easyocr.Reader
        assert langs == ["en"] and not kwargs   # OSWorld's call: English, EasyOCR's defaults
        return shared_reader

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(osworld, "easyocr", types.SimpleNamespace(Reader=Reader))
        yield osworld.compare_image_text


def reading(reader, path) -> str:
    return " ".join(piece[1] for piece in reader.readtext(str(path)))


def rules_for(text, more=True):
    rules = [text, text + "\u00a7"]
    if more:
        rules.append(" Ls")
        if len(text) > 2:
            rules.append(text[1:-1])
    return [{"type": "text", "text": t} for t in rules]


def compare(shared_reader, osworld_ocr, path, read_from=None, more=True):
    """cua == OSWorld on every rule taken from what the reader reads of `read_from` (default: `path`)."""
    text = reading(shared_reader, read_from or path)
    cases = 0
    hits = 0
    for rule in rules_for(text, more):
        want = osworld_ocr(str(path), rule)
        got = ocr.compare_image_text(str(path), rule)
        assert got == want, (path, rule, text)
        cases += 1
        hits += got == 1
    return cases, hits, text


def picture(path, seed, size=(96, 32), fmt=None):
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path, fmt)
    return path


def test_png_scores_as_osworlds(shared_reader, osworld_ocr, tmp_path):
    """A PNG: the reader's own text hits in both, more than it misses in both."""
    path = picture(tmp_path / "ls.png", 1)
    cases, hits, text = compare(shared_reader, osworld_ocr, path, more=False)
    assert text and hits == 1 and cases == 2


@pytest.mark.slow
def test_images_score_as_osworlds(shared_reader, osworld_ocr, tmp_path):
    """PNGs, JPEGs (EasyOCR reads the file: the decoder is the same), X11 dumps (converted by
    OSWorld's raw reading, colour map and all), and what the agent could have left instead."""
    total = 0
    for seed in (2,):
        for suffix, fmt in ((".png", "PNG"), (".jpg", "JPEG")):
            cases, hits, text = compare(shared_reader, osworld_ocr, picture(tmp_path / f"s{seed}{suffix}", seed,
                                                                            fmt=fmt))
            total += cases
            assert hits >= 1
    rng = np.random.default_rng(9)
    for depth in (32, 24):
        path = tmp_path / f"screen{depth}.png"   # a dump named .png, as the task's screenshot could be
        path.write_bytes(xwd(96, 32, depth, rng.integers(0, 256, 96 * 32 * 4, dtype=np.uint8).tobytes()))
        converted = tmp_path / f"converted{depth}.png"
        ocr._raw_xwd(str(path)).save(converted)
        cases, hits, _ = compare(shared_reader, osworld_ocr, path, read_from=converted)
        total += cases
        assert hits >= 1
    broken = {"empty.png": b"", "cut.png": (tmp_path / "s2.png").read_bytes()[:60], "junk.png": b"\0junk" * 40,
              "short.png": xwd(600, 400, 32, b"\1" * 100)}
    for name, data in broken.items():
        (tmp_path / name).write_bytes(data)
        for rule in ({"type": "text", "text": ""}, {"type": "text", "text": " Ls"}):
            want = osworld_ocr(str(tmp_path / name), rule)
            assert ocr.compare_image_text(str(tmp_path / name), rule) == want == 0
            total += 1
    os.mkdir(tmp_path / "folder.png")
    assert ocr.compare_image_text(str(tmp_path / "folder.png"), {"type": "text", "text": ""}) == 0
    assert osworld_ocr(str(tmp_path / "folder.png"), {"type": "text", "text": ""}) == 0
    assert total >= 15
