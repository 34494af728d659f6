import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.core.errors import ImageError
from app.core.imageio import decode, open_oriented
from tests.conftest import shared_photos, write_photo


def bad_files(d):
    d.mkdir()
    (d / "empty.jpg").write_bytes(b"")
    (d / "text.jpg").write_text("this is not a jpeg")
    good = write_photo(d / "good.jpg", 0, size=(200, 150))
    data = good.read_bytes()
    (d / "truncated.jpg").write_bytes(data[: len(data) // 2])
    # a PNG header claiming 100k x 100k pixels (decompression bomb)
    Image.new("1", (20000, 20000)).save(d / "bomb.png")
    return d


@pytest.mark.parametrize("name,reason", [("empty.jpg", "empty"), ("text.jpg", "not an image"),
                                         ("truncated.jpg", "truncated"), ("bomb.png", "too large"),
                                         ("missing.jpg", "cannot read")])
def test_bad_files_raise_image_error_with_reason(tmp_path, name, reason):
    d = bad_files(tmp_path / "bad")
    with pytest.raises(ImageError, match=reason):
        open_oriented(d / name, max_pixels=100_000_000 if name != "bomb.png" else 10_000_000)


def test_unreadable_file(tmp_path, monkeypatch):
    f = write_photo(tmp_path / "locked.jpg", 0)
    f.chmod(0)
    if os.geteuid() == 0:  # root reads every file: make open() fail the way it does for a user
        import builtins

        real_open = builtins.open

        def deny(path, *a, **k):
            if str(path) == str(f):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *a, **k)

        monkeypatch.setattr(builtins, "open", deny)
    with pytest.raises(ImageError, match="permission"):
        open_oriented(f)


def test_reading_never_modifies_the_photo(tmp_path):
    f = write_photo(tmp_path / "p.jpg", 3, size=(300, 200), exif_orientation=8)
    before = (f.read_bytes(), f.stat().st_mtime_ns)
    img, orig = open_oriented(f, draft_side=64)
    assert orig == (200, 300) and img.size[0] <= 200
    assert (f.read_bytes(), f.stat().st_mtime_ns) == before


def test_a_file_that_ends_early_is_said_in_words():
    """The trial's Log: "corrupt or truncated image: image file is truncated (48 bytes not
    processed)", Pillow's words and a byte count. A real photo cut short, as an interrupted copy
    leaves it (the end of the compressed data gone)."""
    data = shared_photos("ukbench", 1)[0].read_bytes()
    import tempfile

    with tempfile.TemporaryDirectory() as t:
        f = Path(t) / "cut.jpg"
        f.write_bytes(data[: len(data) - 2000])
        with pytest.raises(ImageError) as e:
            decode(f)
    assert str(e.value) == "corrupt or truncated image: the file ends early (an incomplete copy or download)"
    # (trial 20) a JPEG header and then noise: Pillow's "Truncated File Read" reached the Log
    with tempfile.TemporaryDirectory() as t:
        f = Path(t) / "broken_IMG_0042.jpg"
        f.write_bytes(b"\xff\xd8\xff\xe0" + np.random.default_rng(42).bytes(3000))
        with pytest.raises(ImageError) as e:
            decode(f)
    assert str(e.value) == "corrupt or truncated image: the file ends early (an incomplete copy or download)"


def test_decoding_in_threads_leaves_the_warning_filters_alone(tmp_path, monkeypatch):
    """Indexing decodes in 4 threads: decoding changes no process-wide warning state (a
    catch_warnings block per call, entered and left interleaved across threads, left an "ignore
    everything" filter behind for good), while a photo's damaged EXIF is still never shown."""
    import uuid
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    from app.core.imageio import image_size, stored_orientation

    img = Image.open(write_photo(tmp_path / "e.png", 9, size=(200, 150))).convert("RGB")
    # five Make tags each claiming 4 GB: Pillow warns "Tag data larger than file" at every read
    exif = b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\x00\x05" + b"\x01\x0f\x00\x02\x00\x00\xff\xff\x00\x00\x00\x40" * 5 + b"\x00" * 8
    img.save(tmp_path / "bad-exif.jpg", exif=exif)
    files = [tmp_path / "bad-exif.jpg"] + [write_photo(tmp_path / f"p{i}.jpg", i, size=(160, 120)) for i in range(24)]
    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *a, **k: shown.append(str(message)))
    decode(files[0])  # the one filter imageio keeps (pytest's collection dropped the one set at import)
    before = list(warnings.filters)

    def read(path):
        decode(path, draft_side=64)
        image_size(path)
        stored_orientation(path)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(read, files * 20))
    assert warnings.filters == before
    assert shown == []  # damaged EXIF read silently
    text = f"still shown {uuid.uuid4()}"
    warnings.warn(text, UserWarning)
    assert shown == [text]
