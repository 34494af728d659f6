"""`heatsearch --screenshot`: renders the window offscreen after the search; check its properties."""
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from tests.conftest import write_photo

ROOT = Path(__file__).resolve().parents[2]


def grey_photos(d: Path, n: int):
    for i in range(n):
        p = write_photo(d / f"g{i}.png", 300 + i, size=(160, 120))
        Image.open(p).convert("L").convert("RGB").save(p)


def test_screenshot_is_not_blank_and_shows_the_overlay(tiny_home, tmp_path):
    lib_dir = tmp_path / "grey"
    grey_photos(lib_dir, 10)
    out = tmp_path / "shot.png"
    r = subprocess.run([sys.executable, "-m", "app", "--home", str(tiny_home), "--index", str(lib_dir),
                        "--query", str(lib_dir / "g3.png"), "--box", "20,10,120,100", "--heat", "--screenshot", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert r.returncode == 0, r.stderr
    img = np.asarray(Image.open(out).convert("RGB")).astype(int)
    assert img.shape[0] >= 600 and img.shape[1] >= 1000  # the default --size is 1366x768
    assert img.std() > 20 and len(np.unique(img.reshape(-1, 3), axis=0)) > 500  # not blank
    # every photo is grey, so strongly coloured pixels come from the heat overlay (and its legend)
    sat = (img.max(2) - img.min(2)) > 60
    legend_pixels = 120 * 10
    assert sat.sum() > 10 * legend_pixels
    warm = (img[..., 0] > img[..., 2] + 60).sum()
    cool = (img[..., 2] > img[..., 0] + 60).sum()
    assert warm > legend_pixels and cool > legend_pixels
