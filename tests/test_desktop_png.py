"""The desktops' screenshot encoder (guest/png.py) writes PNGs that decode to the very pixels given."""

import importlib.util
import io
from pathlib import Path

import numpy as np
from PIL import Image

from cua_cli.envserver.desktop import guest

spec = importlib.util.spec_from_file_location("png", Path(guest.__file__).parent / "png.py")
png = importlib.util.module_from_spec(spec)
spec.loader.exec_module(png)


def test_round_trip_of_noise_flat_and_one_pixel_images():
    rng = np.random.default_rng(0)
    for bgra in (rng.integers(0, 256, (37, 53, 4), dtype=np.uint8), np.full((1080, 1920, 4), 200, np.uint8),
                 np.zeros((1, 1, 4), np.uint8)):
        decoded = Image.open(io.BytesIO(png.encode_bgra(bgra)))
        assert decoded.mode == "RGB" and decoded.size == (bgra.shape[1], bgra.shape[0])
        assert (np.asarray(decoded) == bgra[:, :, 2::-1]).all()  # X's BGRA is the PNG's RGB
