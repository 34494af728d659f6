"""Formats (issue 13): HEIC, AVIF, WebP, TIFF, GIF and camera RAW (DNG made here), decoded by the
same code for indexing, thumbnails and the viewer; a RAW+JPEG pair is indexed once."""
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.core.imageio import EXTENSIONS, decode
from app.core.pipeline.search import SearchRequest, Searcher
from tests.conftest import write_photo
from tests.core.helpers import index, open_lib
from tests.rawfile import write_dng


@pytest.fixture
def source(tmp_path):
    return Image.open(write_photo(tmp_path / "src.png", 11, size=(320, 240))).convert("RGB")


def similar(a: Image.Image, b: Image.Image) -> float:
    """Correlation of two pictures at 64x48 (1 = the same picture)."""
    x = np.asarray(a.convert("L").resize((64, 48)), np.float64).ravel()
    y = np.asarray(b.convert("L").resize((64, 48)), np.float64).ravel()
    return float(np.corrcoef(x, y)[0, 1])


@pytest.mark.parametrize("ext,kw", [(".heic", {"quality": 90}), (".avif", {"quality": 90}), (".webp", {"quality": 90}),
                                    (".tiff", {}), (".gif", {})])
def test_each_format_decodes_to_the_picture(tmp_path, source, ext, kw):
    assert ext in EXTENSIONS
    f = tmp_path / f"photo{ext}"
    source.save(f, **kw)
    photo = decode(f, draft_side=256)
    assert photo.orig_size == (320, 240)
    assert similar(photo.image, source) > 0.9


def test_a_dng_without_preview_is_decoded_from_its_sensor_data(tmp_path, source):
    f = write_dng(tmp_path / "IMG_0001.dng", source)
    photo = decode(f, draft_side=640)
    assert photo.orig_size == (320, 240) and photo.image.size == (160, 120)  # half-size decode
    assert similar(photo.image, source) > 0.85  # demosaiced and colour-processed: close, not equal


def test_a_dng_preview_is_used_when_large_enough(tmp_path, source):
    big = source.resize((640, 480))
    f = write_dng(tmp_path / "IMG_0002.dng", big, preview=big.resize((600, 450)))
    photo = decode(f, draft_side=512)  # the preview (600 px) is at least the input size: used
    assert photo.image.size == (600, 450) and photo.orig_size == (640, 480)
    assert similar(photo.image, big) > 0.95
    small = write_dng(tmp_path / "IMG_0003.dng", big, preview=big.resize((160, 120)))
    photo = decode(small, draft_side=512)  # too small a preview: the sensor data at half size
    assert photo.image.size == (320, 240)


def test_a_raw_with_a_jpeg_twin_is_indexed_once_and_every_format_is_searchable(tmp_path, source):
    d = tmp_path / "camera"
    d.mkdir()
    source.save(d / "IMG_0010.JPG", quality=92)
    write_dng(d / "IMG_0010.DNG", source)  # the RAW of the same shot
    other = Image.open(write_photo(tmp_path / "o.png", 50, size=(320, 240))).convert("RGB")
    other.save(d / "phone.heic", quality=85)
    write_dng(d / "lonely.dng", Image.open(write_photo(tmp_path / "l.png", 60, size=(320, 240))).convert("RGB"))
    for i in range(6):
        write_photo(d / f"x{i}.png", 70 + i, size=(200, 150))
    svc = open_lib(tmp_path / "h")
    prog = index(svc, [d])
    assert svc.stats()["indexed"] == 9  # 6 PNG + the JPEG + the HEIC + the lonely DNG
    reasons = dict((Path(p).name, r) for p, r in svc.failures())
    assert reasons == {"IMG_0010.DNG": "indexed as its JPEG twin IMG_0010.JPG"}
    assert prog.failed == 1
    s = Searcher(svc)
    top = s.search(SearchRequest(path=str(d / "phone.heic"), top=1, qe="off", her="off")).hits[0]
    assert top.path.endswith("phone.heic") and top.similarity > 0.999
    res = s.search(SearchRequest(image=other, top=1, qe="off", her="off"))
    assert res.hits[0].path.endswith("phone.heic")  # the HEIC was decoded to the same picture
    svc.close()


@pytest.mark.parametrize("ext", [".jpg", ".png", ".webp", ".tiff"])
@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_exif_orientation_is_honoured_once_in_every_format(tmp_path, source, ext, orientation):
    """(18.10, 20) Not only JPEG carries an orientation: PNG, WebP and TIFF photos are turned once
    (a TIFF was turned twice: its size swapped back, the photo stretched before the model), and
    the size read from the header is the turned photo's."""
    from app.core.imageio import image_size

    exif = Image.Exif()
    exif[0x0112] = orientation
    f = tmp_path / f"turned{ext}"
    source.save(f, exif=exif if ext == ".tiff" else exif.tobytes())
    want = source.transpose({3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_270,
                             8: Image.Transpose.ROTATE_90}[orientation])
    photo = decode(f)
    assert photo.image.size == want.size and photo.orig_size == want.size and image_size(f) == want.size
    assert similar(photo.image, want) > 0.95


@pytest.mark.parametrize("data", [b"not a raw file at all" * 40, b"II*\x00" + bytes(2000)])
def test_a_file_named_raw_that_is_not_one_gets_plain_words(tmp_path, data):
    """Trial 11: a fake .CR2 was logged as "LibRawFileUnsupportedError: b'Unsupported file format
    or not RAW file'": a class name and a bytes literal in the Log."""
    from app.core.errors import ImageError
    from app.core.imageio import decode

    f = tmp_path / "IMG_0001.CR2"
    f.write_bytes(data)
    with pytest.raises(ImageError) as e:
        decode(f)
    words = str(e.value)
    assert "Error" not in words and "b'" not in words and "raw" in words.lower(), words
