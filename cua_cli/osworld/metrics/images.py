"""OSWorld's image metrics (its GIMP family, and compare_images of its VLC family), rewritten for
cua on the libraries OSWorld's scores come from: Pillow reads and converts the images, numpy counts
pixels, scikit-image's structural_similarity is the SSIM every "structure" check thresholds (0.9
unless said otherwise), OpenCV's Laplacian is check_sharper's measure. The numbers are OSWorld's:
a different SSIM, resampling or colour conversion would move a score across a threshold.

Each metric is `metric(result, expected)` (or `metric(result, rule)`), the result being the agent's
image (the `src` of OSWorld's code) and the expected one the task's (`tgt`). An image the agent left
unreadable, or one on which OSWorld's computation fails (too small, of a mode it cannot convert),
scores 0; a gold image that cannot be read raises. Where OSWorld's own check is odd, cua keeps it
(scores must stay comparable) and says so: "OSWorld quirk".
"""

import os

from ..registry import Extra

SSIM_MIN_SIDE = 7   # scikit-image's default window; OSWorld calls a smaller image "not similar"


# -- reading


def _gold(path):
    """The task's image, read whole: one that cannot be read is the task's fault and raises."""
    from PIL import Image

    image = Image.open(path)
    image.load()
    return image


def _agents(path):
    """The agent's image read whole, or None when it is missing or unreadable (scored 0)."""
    from PIL import Image

    if not path:
        return None
    try:
        image = Image.open(path)
        image.load()
    except Exception:  # noqa: BLE001 - whatever Pillow makes of a broken file, the agent left it
        return None
    return image


def _scored(compute, *args) -> float:
    """`compute(*args)` once both images are read: a failure now comes from the agent's image (the
    gold was read and OSWorld's computation runs on the pair), and OSWorld would crash: 0."""
    try:
        return float(compute(*args))
    except Exception:  # noqa: BLE001 - see above
        return 0.0


# -- OSWorld's measures


def _structure_similar(a, b, threshold: float = 0.9) -> bool:
    """SSIM of the two images as RGB (7-pixel windows, scikit-image's defaults otherwise) reaches
    `threshold`; images of different sizes, or too small for a window, are not similar."""
    import numpy as np
    from skimage.metrics import structural_similarity

    if min(a.width, a.height, b.width, b.height) < SSIM_MIN_SIDE:
        return False
    a, b = (im if im.mode == "RGB" else im.convert("RGB") for im in (a, b))
    if a.size != b.size:
        return False
    try:
        value = structural_similarity(np.array(a), np.array(b), win_size=SSIM_MIN_SIDE, channel_axis=2)
    except Exception:  # noqa: BLE001 - OSWorld counts a failed SSIM as "not similar"
        return False
    return bool(value >= threshold)


def _brightness(image) -> float:
    from PIL import ImageStat

    return ImageStat.Stat(image.convert("L")).mean[0]


def _at_brightness(image, target: float):
    """Every band's values scaled so that the mean grey becomes `target` (clipped, truncated).
    OSWorld quirk: an alpha band is scaled too. A black image divides by zero (OSWorld crashes)."""
    factor = target / _brightness(image)
    return image.point(lambda v: min(255, max(0, int(v * factor))))


def _mse_similar(a, b, threshold: float) -> bool:
    """Mean squared difference of the RGB values in [0, 1], below `threshold`; `a` is first resized
    (Lanczos) to `b`'s size."""
    import numpy as np
    from PIL import Image

    if a.size != b.size:
        a = a.resize(b.size, Image.Resampling.LANCZOS)
    a, b = (im if im.mode == "RGB" else im.convert("RGB") for im in (a, b))
    mse = np.mean((np.array(a, dtype=np.float32) / 255 - np.array(b, dtype=np.float32) / 255) ** 2)
    return bool(mse < threshold)


def _mean_saturation(image) -> float:
    import numpy as np

    return np.mean(np.array(image.split()[1]))


def _contrast(image) -> float:
    import numpy as np

    return np.std(np.asarray(image, dtype=np.float32))


# -- the metrics


def compare_image_list(result, expected=None) -> float:
    """1 when each of the agent's images equals its gold image pixel for pixel (after resizing it
    to the gold's size with Lanczos and converting it to the gold's mode). OSWorld quirks: lists of
    different lengths are compared as far as the shorter goes; Pillow's bounding box of an RGBA
    difference looks at alpha only, so images that differ only in colour but are both opaque pass."""
    from PIL import Image, ImageChops

    if not isinstance(result, list):
        result, expected = [result], [expected]
    if expected is None:
        return 0.0
    for mine_path, gold_path in zip(result, expected):
        if not mine_path or not gold_path:
            return 0.0
        gold, mine = _gold(gold_path), _agents(mine_path)
        if mine is None:
            return 0.0

        def same(mine, gold) -> bool:
            if mine.size != gold.size:
                mine = mine.resize(gold.size, Image.Resampling.LANCZOS)
            if mine.mode != gold.mode:
                mine = mine.convert(gold.mode)
            return ImageChops.difference(mine, gold).getbbox() is None
        if not _scored(same, mine, gold):
            return 0.0
    return 1.0


def compare_images(result, expected=None, **options) -> float:
    """SSIM of the two images in grey, both resized (Lanczos) to the smaller size, as a score; with
    `reference_base_result` b, the part of the way from b to 1 (0 below b + 0.01). OSWorld quirk:
    "the smaller size" is the smaller (width, height) pair as Python orders tuples, the narrower
    image's, not the smaller of each side."""
    import numpy as np
    from PIL import Image
    from skimage.metrics import structural_similarity

    if not result or not expected:
        return 0.0
    gold, mine = _gold(expected), _agents(result)
    if mine is None:
        return 0.0
    base = options.get("reference_base_result")

    def score(mine, gold) -> float:
        a, b = mine.convert("L"), gold.convert("L")
        size = min(a.size, b.size)
        a, b = (im.resize(size, Image.Resampling.LANCZOS) for im in (a, b))
        value = structural_similarity(np.array(a), np.array(b))  # raises below 7x7: OSWorld crashes
        if base is None:
            return max(0.0, value)  # OSWorld quirk: it returns a negative SSIM as it is; cua's floor is 0
        return (value - base) / (1 - base) if value >= base + 0.01 else 0.0
    return _scored(score, mine, gold)


def check_brightness_decrease_and_structure_sim(result, expected=None, threshold=0.03) -> float:
    """The agent's image is darker than the gold (mean grey) and, both brought to mean grey 128,
    alike by mean squared difference (below `threshold`)."""
    if not result or not expected:
        return 0.0
    gold, mine = _gold(expected), _agents(result)
    if mine is None:
        return 0.0
    gold_normal = _at_brightness(gold, 128)

    def check(mine) -> bool:
        darker = _brightness(gold) > _brightness(mine)
        return darker and _mse_similar(_at_brightness(mine, 128), gold_normal, threshold)
    return _scored(check, mine)


def check_saturation_increase_and_structure_sim(result, expected=None) -> float:
    """The agent's image is more saturated than the gold (mean HSV saturation) and its hue and value
    bands are each structurally similar to the gold's."""
    if not result or not expected:
        return 0.0
    gold, mine = _gold(expected).convert("HSV"), _agents(result)
    if mine is None:
        return 0.0

    def check(mine) -> bool:
        mine = mine.convert("HSV")
        more = _mean_saturation(gold) < _mean_saturation(mine)
        (h1, _, v1), (h2, _, v2) = mine.split(), gold.split()
        return bool(more) and _structure_similar(h1, h2) and _structure_similar(v1, v2)
    return _scored(check, mine)


def check_file_exists_and_structure_sim(result, expected=None) -> float:
    """The agent's file exists and is structurally similar to the gold."""
    if not result or not expected:
        return 0.0
    if not os.path.isfile(result):
        return 0.0
    gold, mine = _gold(expected), _agents(result)
    return 0.0 if mine is None else _scored(_structure_similar, mine, gold)


def check_structure_sim(result, expected=None) -> float:
    """The images have the same size and are structurally similar. (OSWorld scores 0 whatever goes
    wrong here, a broken gold image too; cua raises on that one.)"""
    if not result or not expected:
        return 0.0
    gold, mine = _gold(expected), _agents(result)
    if mine is None or mine.size != gold.size:
        return 0.0
    return _scored(_structure_similar, mine, gold)


def check_structure_sim_resized(result, expected=None) -> float:
    """The agent's image, resized to the gold's size (Pillow's default filter), is structurally
    similar to the gold. An image with transparency is first cut to its non-transparent content
    (an entirely transparent one scores 0)."""
    if not result or not expected:
        return 0.0
    gold, mine = _gold(expected), _agents(result)
    if mine is None:
        return 0.0
    if gold.mode != "RGB":
        gold = gold.convert("RGB")

    def check(mine) -> bool:
        if mine.mode in ("RGBA", "LA") or "transparency" in mine.info:
            if mine.mode != "RGBA":
                mine = mine.convert("RGBA")
            box = mine.split()[-1].getbbox()
            if box is None:
                return False
            mine = mine.crop(box).convert("RGB")
        return _structure_similar(mine.resize(gold.size), gold)
    return _scored(check, mine)


def check_contrast_increase_and_structure_sim(result, expected=None) -> float:
    """The agent's image has more contrast than the gold (standard deviation of all its values) and
    is structurally similar to it at SSIM 0.65."""
    if not result or not expected:
        return 0.0
    gold, mine = _gold(expected), _agents(result)
    if mine is None:
        return 0.0
    return _scored(lambda m: _contrast(gold) < _contrast(m) and _structure_similar(m, gold, 0.65), mine)


def check_palette_and_structure_sim(result, expected=None) -> float:
    """The agent's image is a palette image (mode P) and, as RGB, structurally similar to the gold.
    (OSWorld retries an empty or truncated file twice, half a second apart: the file is pulled
    whole before scoring here, so cua reads it once. It scores 0 for a broken gold; cua raises.)"""
    if not result or not expected:
        return 0.0
    mine = _agents(result) if os.path.exists(result) and os.path.getsize(result) else None
    if mine is None:
        return 0.0
    gold = _gold(expected)
    return _scored(lambda m: m.mode == "P" and _structure_similar(m.convert("RGB"), gold), mine)


def check_image_mirror(result, expected=None) -> float:
    """The agent's image, flipped left to right, is structurally similar to the gold at SSIM 0.99."""
    from PIL import Image

    if not result or not expected:
        return 0.0
    gold, mine = _gold(expected), _agents(result)
    if mine is None:
        return 0.0
    return _scored(lambda m: _structure_similar(m.transpose(Image.Transpose.FLIP_LEFT_RIGHT), gold, 0.99), mine)


def check_image_size(result, rule=None) -> float:
    """The image's width and height (those `rule` gives) are `rule`'s; with `ignore_transparent`,
    those of its non-transparent content. OSWorld quirk: Python's `and` binds before `or` in its
    test, so any image whose file declares a transparent colour is measured by its content, asked
    or not; an entirely transparent one measures 0 x 0."""
    from PIL import Image

    if not result or rule is None:
        return 0.0

    def size():
        with Image.open(result) as image:  # OSWorld reads no pixels unless it looks for the content
            if (rule.get("ignore_transparent", False) and image.mode in ("RGBA", "LA")) or "transparency" in image.info:
                box = (image if image.mode == "RGBA" else image.convert("RGBA")).split()[-1].getbbox()
                return (0, 0) if box is None else (box[2] - box[0], box[3] - box[1])
            return image.size
    try:
        width, height = size()
    except Exception:  # noqa: BLE001 - not an image the agent could have meant
        return 0.0
    return float((rule.get("height") is None or height == rule["height"])
                 and (rule.get("width") is None or width == rule["width"]))


def check_image_file_size(result, rule=None) -> float:
    """The file is smaller than `rule["max_size"]` bytes."""
    if not result or rule is None:
        return 0.0
    try:
        size = os.path.getsize(result)
    except OSError:
        return 0.0
    return float(size < rule["max_size"])


def check_triangle_position(result, *_) -> float:
    """The pixels of the image's second most frequent colour (the triangle's, the most frequent
    being the background's) have their centroid within 5% of the image's sides from its centre.
    OSWorld quirk: colours as frequent as each other are ordered by numpy's (unstable) argsort, as
    in OSWorld's code; a grey or palette image has no colour axis and scores 0 (OSWorld crashes)."""
    import numpy as np

    mine = _agents(result)
    if mine is None:
        return 0.0

    def check(mine) -> bool:
        pixels = np.array(mine)
        colours, counts = np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0, return_counts=True)
        triangle = colours[np.argsort(counts)][1]
        centroid = np.argwhere(np.all(pixels == triangle, axis=2)).mean(axis=0)
        shape = np.array(pixels.shape[:2])
        return bool(np.all(np.abs(centroid - shape / 2) < 0.05 * shape))
    return _scored(check, mine)


def check_textbox_on_leftside(result, *_) -> float:
    """The leftmost dark pixel (grey below 128) lies within the left 5% of the image's width."""
    import numpy as np

    mine = _agents(result)
    if mine is None:
        return 0.0

    def check(mine) -> bool:
        width = mine.size[0]
        columns = np.flatnonzero((np.array(mine.convert("L")) < 128).any(axis=0))
        return (columns[0] if columns.size else width) < width * 0.05
    return _scored(check, mine)


def check_green_background(result, expected=None) -> float:
    """Wherever the gold image is not black, the agent's image is green (its green above its red
    and its blue). OSWorld quirk: its loop reads pixel [x, y] of arrays indexed [row, column], so
    it compares the images transposed; on a gold image that is not square it stops with an
    IndexError once it steps outside it (cua raises, the task's image being unusable) unless the
    agent's image failed first (0), and a grey gold image has no colours to read (raises)."""
    import numpy as np

    if not result or not expected:
        return 0.0
    gold = np.array(_gold(expected))
    mine = _agents(result)
    if mine is None:
        return 0.0
    if gold.ndim != 3:
        raise ValueError(f"check_green_background: the gold image has no colour channels (shape {gold.shape})")
    mine = np.array(mine)
    rows, columns = gold.shape[:2]   # OSWorld's x runs over the columns, y over the rows
    side = min(rows, columns)
    if rows == columns:
        region = (side, side)        # the whole image, transposed
    elif rows > columns:
        region = (1, columns)        # x = 0 and y up to the gold's columns, then y runs out of it
    else:
        region = (side, side)        # x up to the gold's rows, then x runs out of it
    # the cells (a, b) read, as gold[a, b] and mine[a, b]
    background = gold[:region[0], :region[1]]
    if gold.shape[2] >= 3:
        background = background[..., :3].any(axis=2)
    else:                            # fewer than three values never equal (0, 0, 0)
        background = np.ones(background.shape[:2], dtype=bool)
    if background.any():
        if mine.ndim != 3 or mine.shape[2] < 3:
            return 0.0               # the agent's pixel is no (r, g, b): OSWorld crashes
        a, b = np.nonzero(background)
        inside = (a < mine.shape[0]) & (b < mine.shape[1])
        if not inside.all():
            return 0.0               # the agent's image is smaller: OSWorld crashes
        r, g, bl = (mine[a, b, i].astype(int) for i in range(3))
        if not ((g > r) & (g > bl)).all():
            return 0.0
    if rows != columns:
        raise ValueError(f"check_green_background: OSWorld's transposed loop runs out of the {columns}x{rows} gold "
                         "image (it only works on square ones)")
    return 1.0


def check_sharper(result, expected=None) -> float:
    """The agent's image is sharper than the gold: the variance of OpenCV's Laplacian of each in
    grey, as OpenCV reads them."""
    import cv2
    import numpy as np

    def sharpness(path):
        grey = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
        if grey is None:
            raise ValueError(f"OpenCV cannot read {path}")
        return np.var(cv2.Laplacian(grey, cv2.CV_64F))
    if not expected:
        raise ValueError("check_sharper: the task gives no image to compare with")
    gold = sharpness(expected)
    if not result:
        return 0.0
    try:
        mine = sharpness(result)
    except Exception:  # noqa: BLE001 - the agent's file is no image OpenCV reads
        return 0.0
    return float(mine > gold)


METRICS = {f.__name__: f for f in (
    compare_image_list, compare_images, check_brightness_decrease_and_structure_sim,
    check_saturation_increase_and_structure_sim, check_file_exists_and_structure_sim, check_structure_sim,
    check_structure_sim_resized, check_contrast_increase_and_structure_sim, check_palette_and_structure_sim,
    check_image_mirror, check_image_size, check_image_file_size, check_triangle_position, check_textbox_on_leftside,
    check_green_background, check_sharper)}
EXTRA = Extra("media", {"PIL": "pillow", "numpy": "numpy", "skimage": "scikit-image",
                        "cv2": "opencv-python-headless"})
