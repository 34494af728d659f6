"""Backbones, preprocessing, the inference-engine seam (equality, export, fallback)."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image
from torch.nn import functional as F

from app.core.errors import EngineError, WeightsLoadError, WeightsMissingError
from app.core.features import engine as engine_mod
from app.core.features.efficientnet_lite import SameConv2d
from app.core.features.engine import EngineChoice, create_engine, ensure_onnx, onnx_name
from app.core.features.extractor import Extractor
from app.core.features.preprocess import prepare
from app.core.features.registry import REGISTRY, load_backbone
from app.core.imageio import open_oriented
from pathlib import Path
from tests.conftest import shared_photos, write_photo


def test_default_backbone_loads_offline_with_exact_keys():
    bb = load_backbone("efficientnet-lite0")
    assert bb.spec.channels == 1280 and bb.spec.stride == 32 and bb.spec.offline
    assert len(bb.weights_digest) == 16
    with torch.inference_mode():
        y = bb.module(torch.randn(1, 3, 70, 100))
    assert y.shape == (1, 1280, 3, 4)  # ceil(70/32), ceil(100/32)
    assert y.min() >= 0 and y.max() <= 6  # ReLU6


def test_locating_a_backbone_builds_nothing():
    bb = load_backbone("efficientnet-lite2")
    assert bb._module is None and bb.weights_digest and bb.mean == REGISTRY["efficientnet-lite2"].mean


@pytest.mark.parametrize("name,channels", [("efficientnet-lite0-block", 320), ("efficientnet-lite2-block", 352),
                                           ("efficientnet-lite2", 1280)])
def test_other_offline_variants(name, channels):
    bb = load_backbone(name)
    with torch.inference_mode():
        y = bb.module(torch.randn(1, 3, 64, 64))
    assert y.shape[1] == channels == REGISTRY[name].channels and y.min() >= 0


def tf_same_conv(conv, x):
    """TensorFlow's SAME padding, computed per input size (the formula the shape-generic one replaces)."""
    ih, iw = x.shape[-2:]
    k, s = conv.kernel_size[0], conv.stride[0]
    ph = max((math.ceil(ih / s) - 1) * s + k - ih, 0)
    pw = max((math.ceil(iw / s) - 1) * s + k - iw, 0)
    x = F.pad(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2])
    return F.conv2d(x, conv.weight, conv.bias, conv.stride, 0, 1, conv.groups)


@pytest.mark.parametrize("k,s", [(3, 1), (3, 2), (5, 2), (5, 1), (1, 1)])
def test_shape_generic_same_padding_equals_tensorflow(k, s):
    torch.manual_seed(k * 10 + s)
    conv = SameConv2d(4, 6, k, s)
    for h, w in [(16, 16), (17, 16), (16, 17), (33, 65), (7, 9), (2, 3)]:
        x = torch.randn(1, 4, h, w)
        with torch.inference_mode():
            torch.testing.assert_close(conv(x), tf_same_conv(conv, x), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["vgg16", "vgg16-pool5", "resnet50"])
def test_missing_torchvision_weights_give_a_clear_error(name):
    with pytest.raises(WeightsMissingError) as e:
        load_backbone(name)
    msg = str(e.value)
    assert ".pth" in msg and "checkpoints" in msg and "never downloads" in msg


def test_torchvision_backbone_from_a_named_file(tmp_path):
    """A ResNet50 weights file loads; one that holds an untrained network (every batch norm at its
    start: trials 20-22 searched with one and judged the model by it) is refused in words."""
    from torchvision.models import resnet50

    net = resnet50(weights=None)
    f = tmp_path / "r50.pth"
    torch.save(net.state_dict(), f)
    with pytest.raises(WeightsLoadError, match="holds a network that was never trained, .* choose the file of the trained model"):
        load_backbone("resnet50", str(f)).module
    # a library's space made with such a file before it was refused: its engine says so once, in the
    # file's own name, and tries no other engine (each said it again, naming the export's private copy)
    with pytest.raises(WeightsLoadError) as e:
        create_engine(load_backbone("resnet50", str(f)), EngineChoice("auto", "cpu"), tmp_path / "models")
    assert str(e.value).startswith(f"{f} holds a network that was never trained"), str(e.value)
    assert str(e.value).count("never trained") == 1
    net.train()
    net(torch.randn(2, 3, 64, 64))  # one step of training moves every batch norm's statistics
    torch.save(net.state_dict(), f)
    bb = load_backbone("resnet50", str(f))
    with torch.inference_mode():
        y = bb.module(torch.randn(1, 3, 64, 96))
    assert y.shape == (1, 2048, 2, 3) and y.min() >= 0


def test_cirtorch_checkpoint_conv_part(tmp_path):
    from torchvision.models import vgg16

    feats = torch.nn.Sequential(*list(vgg16(weights=None).features.children())[:-1])
    state = {f"features.{k}": v for k, v in feats.state_dict().items()}
    state["pool.p"] = torch.tensor([3.0])
    f = tmp_path / "retrievalSfM120k-vgg16-gem-test.pth"
    torch.save({"state_dict": state, "meta": {"architecture": "vgg16", "pooling": "gem",
                                              "mean": [0.4, 0.4, 0.4], "std": [0.2, 0.2, 0.2]}}, f)
    bb = load_backbone("cirtorch", str(f))
    assert bb.spec.channels == 512 and bb.spec.stride == 16
    assert bb.mean == (0.4, 0.4, 0.4)


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_checkpoint_that_needs_code_is_refused(tmp_path):
    f = tmp_path / "evil.pth"
    torch.save({"state_dict": {}, "meta": Evil()}, f)
    with pytest.raises(WeightsLoadError, match="weights_only"):
        load_backbone("cirtorch", str(f))
    with pytest.raises(WeightsMissingError, match="not found"):
        load_backbone("vgg16", str(tmp_path / "nope.pth"))


def test_device_choice_only_offers_what_runs_here():
    """auto is the accelerator PyTorch sees where there is one, the CPU where there is none (this
    machine says which by its driver files, independently of the code under test)."""
    assert EngineChoice(device="cpu").resolve_device() == "cpu"
    has_gpu = torch.cuda.is_available() and os.path.exists("/proc/driver/nvidia/version")
    assert EngineChoice().resolve_device() == ("cuda" if has_gpu else "cpu")
    assert set(engine_mod.available_devices()) == ({"cpu", "cuda"} if has_gpu else {"cpu"})
    if not torch.cuda.is_available():
        with pytest.raises(EngineError, match="not available here"):
            EngineChoice(device="cuda").resolve_device()
    with pytest.raises(EngineError, match="unknown engine"):
        EngineChoice(engine="tensorrt").candidates()


def test_preprocessing_never_upscales_and_crop_keeps_scale():
    img = Image.new("RGB", (2000, 1000), (200, 100, 50))
    p = prepare(img, img.size, 1024, (0.5,) * 3, (0.5,) * 3)
    assert p.array.shape == (3, 512, 1024) and p.array.dtype == np.float32 and p.scale == pytest.approx(0.512)
    small = Image.new("RGB", (300, 200))
    assert prepare(small, small.size, 1024, (0.5,) * 3, (0.5,) * 3).array.shape == (3, 200, 300)
    c = prepare(img, img.size, 1024, (0.5,) * 3, (0.5,) * 3, box=(100, 100, 600, 350))
    # 1024 * max(crop) / max(orig) = 1024 * 500 / 2000 = 256
    assert c.array.shape == (3, 128, 256) and c.offset == (100, 100)
    # normalisation: (200/255 - 0.5) / 0.5
    assert float(p.array[0, 0, 0]) == pytest.approx((200 / 255 - 0.5) / 0.5, abs=1e-6)


def test_a_box_crop_sees_the_photos_own_pixels_up_to_box_side(tmp_path, monkeypatch):
    """policy.BOX_SIDE: a box of a camera photo is cut from its own pixels (a JPEG draft-decoded
    no smaller than that), until the crop's longer side reaches box_side; never enlarged beyond
    them, and at box_side 0 it keeps the whole photo's scale."""
    from app.core.features import preprocess
    from app.core.features.preprocess import load_prepared

    f = tmp_path / "big.jpg"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (1500, 2000, 3), np.uint8)).save(f, quality=90)
    args = (f, 512, (0.5,) * 3, (0.5,) * 3)
    assert load_prepared(*args, box=(100, 100, 500, 400)).array.shape == (3, 77, 102)  # the photo's 0.256
    own = load_prepared(*args, box=(100, 100, 500, 400), box_side=768)
    assert own.array.shape == (3, 300, 400) and own.scale == 1.0 and own.offset == (100, 100)
    with Image.open(f) as im:  # the photo's own pixels, not a smaller decode enlarged
        exact = prepare(im.convert("RGB").crop((100, 100, 500, 400)), (400, 300), 512, (0.5,) * 3, (0.5,) * 3)
    assert np.array_equal(own.array, exact.array)
    big = load_prepared(*args, box=(0, 0, 1600, 1200), box_side=768)
    assert big.array.shape == (3, 576, 768) and big.scale == pytest.approx(0.48)
    whole = load_prepared(*args, box_side=768)  # a whole photo: the input size as ever
    assert whole.array.shape == (3, 384, 512)
    # never beyond the pixels decoded: a RAW file's preview of half the size, a JPEG decoded at 1/2
    # when the photo has more than BOX_DECODE_PIXELS
    with Image.open(f) as im:
        preview = im.convert("RGB").resize((1000, 750))
    half = prepare(preview, (2000, 1500), 512, (0.5,) * 3, (0.5,) * 3, box=(100, 100, 500, 400), box_side=768)
    assert half.array.shape == (3, 150, 200) and half.scale == 0.5
    monkeypatch.setattr(preprocess, "BOX_DECODE_PIXELS", 750_000)
    assert load_prepared(*args, box=(100, 100, 500, 400), box_side=768).array.shape == (3, 150, 200)


def test_exif_orientation_is_honoured(tmp_path):
    f = write_photo(tmp_path / "rot.jpg", 1, size=(80, 40), exif_orientation=6)
    img, orig = open_oriented(f)
    assert img.size == (40, 80) and orig == (40, 80)


def tiny_extractor(engine="torch", max_side=256):
    bb = load_backbone("tiny-random")
    return Extractor(bb, create_engine(bb, EngineChoice(engine, "cpu"), engine_mod.Path(os.environ["HEATSEARCH_MODELS"])), max_side)


def test_map_mode_box_cells_and_the_rectangle_they_cover():
    ex = tiny_extractor(max_side=256)
    img = Image.new("RGB", (512, 256), (10, 20, 30))
    fm = ex.feature_maps([ex.prepare_image(img)])[0]
    assert fm.features.shape == (16, 32, 32) and fm.scale == 0.5
    mask = fm.box_mask((0, 0, 256, 128))  # left half, top half of the original
    assert mask.sum() == 8 * 16 and mask[:8, :16].all()
    assert fm.box_mask((100, 100, 101, 101)).sum() == 1
    # cells of 8 model px = 16 original px: a box from 20 to 100 takes the cells centred at 24..88
    rows, cols = fm.box_cells((20, 20, 100, 60))
    assert fm.cells_rect(rows, cols) == (16.0, 16.0, 96.0, 64.0)


def test_extractor_batches_mixed_shapes_in_input_order():
    ex = tiny_extractor(max_side=64)
    imgs = [Image.new("RGB", s, c) for s, c in [((64, 32), (255, 0, 0)), ((32, 64), (0, 255, 0)), ((64, 32), (0, 0, 255))]]
    maps = ex.feature_maps([ex.prepare_image(i) for i in imgs])
    assert [m.features.shape[:2] for m in maps] == [(4, 8), (8, 4), (4, 8)]
    single = ex.feature_maps([ex.prepare_image(imgs[2])])[0]
    np.testing.assert_allclose(maps[2].features, single.features, rtol=1e-4, atol=1e-4)


def engine_maps(name, photos, backbone="efficientnet-lite2", max_side=512):
    bb = load_backbone(backbone)
    ex = Extractor(bb, create_engine(bb, EngineChoice(name, "cpu"), engine_mod.Path(os.environ["HEATSEARCH_MODELS"])), max_side)
    assert ex.engine.name == name and ex.engine.exact
    return [ex.feature_maps([ex.prepare_path(p)])[0].features for p in photos]


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_f32_engines_equal_pytorch_on_real_photos(runtime, tmp_path):
    """The exported model under each CPU runtime gives PyTorch's feature maps within 1e-4
    (relative to the map's largest value) on real photos of both orientations and odd sizes."""
    photos = shared_photos("paris250", 3) + shared_photos("ukbench", 1)
    rotated = tmp_path / "portrait.jpg"
    Image.open(photos[0]).transpose(Image.Transpose.ROTATE_90).crop((0, 0, 501, 707)).save(rotated)
    photos.append(rotated)
    ref = engine_maps("torch", photos)
    got = engine_maps(runtime, photos)
    for r, g in zip(ref, got):
        assert r.shape == g.shape
        assert np.abs(r - g).max() / np.abs(r).max() < 1e-4


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_f32_engines_equal_pytorch_on_synthetic_photos(runtime, tmp_path):
    photos = [write_photo(tmp_path / f"p{i}.jpg", i, size=s) for i, s in enumerate([(300, 200), (201, 333), (97, 65)])]
    ref = engine_maps("torch", photos, "efficientnet-lite0", 256)
    got = engine_maps(runtime, photos, "efficientnet-lite0", 256)
    for r, g in zip(ref, got):
        assert r.shape == g.shape and np.abs(r - g).max() / np.abs(r).max() < 1e-4


def test_export_is_cached_and_made_once(tmp_path, monkeypatch):
    bb = load_backbone("tiny-random")
    logs = []
    path = ensure_onnx(bb, tmp_path / "models", logs.append)
    assert path.name == onnx_name(bb) and path.stat().st_size > 1000 and len(logs) == 1
    monkeypatch.setattr(engine_mod.subprocess, "run", lambda *a, **k: pytest.fail("exported twice"))
    assert ensure_onnx(bb, tmp_path / "models", logs.append) == path


def test_missing_runtime_falls_back_to_pytorch(monkeypatch, tmp_path):
    bb = load_backbone("tiny-random")
    real = engine_mod.installed
    monkeypatch.setattr(engine_mod, "installed", lambda name: False if name in ("openvino", "onnxruntime") else real(name))
    logs = []
    eng = create_engine(bb, EngineChoice("openvino", "cpu"), tmp_path, logs.append)
    assert eng.name == "torch" and eng.exact
    assert len(logs) == 1 and "OpenVINO" in logs[0] and "not installed" in logs[0]
    assert create_engine(bb, EngineChoice("auto", "cpu"), tmp_path, logs.append).name == "torch"


def test_failed_export_falls_back_to_pytorch_with_one_line(monkeypatch, tmp_path):
    bb = load_backbone("tiny-random")

    class Result:
        returncode, stdout, stderr = 1, "", "Traceback...\nexport failed: boom"

    monkeypatch.setattr(engine_mod.subprocess, "run", lambda *a, **k: Result())
    logs = []
    eng = create_engine(bb, EngineChoice("onnxruntime", "cpu"), tmp_path / "empty", logs.append)
    assert eng.name == "torch"
    assert [m for m in logs if "falling back" in m] == [logs[-1]] and "boom" in logs[-1]


def test_a_model_frozen_to_one_size_is_refused_by_the_export_check(tmp_path):
    """The export verifies the model on two input sizes: a graph that only fits the traced size
    is never cached."""
    from app.core.features import export

    class Frozen(torch.nn.Module):  # padding computed with Python ints: traced as constants
        def forward(self, x):
            return F.relu(F.pad(x, [0, 130 - int(x.shape[-1]), 0, 0])[:, :1])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(export, "load_backbone", lambda name, w: type("B", (), {"module": Frozen()})(), raising=False)
        import app.core.features.registry as reg

        mp.setattr(reg, "load_backbone", lambda name, w: type("B", (), {"module": Frozen()})())
        with pytest.raises(Exception):
            export.export("tiny-random", None, tmp_path / "frozen.onnx")
    assert not (tmp_path / "frozen.onnx").exists()


def test_the_default_cpu_path_never_imports_pytorch(tmp_path, photo_dir):
    """Indexing and searching with the CPU runtime keep PyTorch (460 MB) out of the process: the
    export runs in a child process, preprocessing, HeW and HeR are numpy. So does the check of a
    weights file the user names before its space is made (trial 23: 1.9 GB after a few switches
    of model; a ResNet50 file checked in the app's process left ~750 MB there)."""
    import shutil
    import subprocess
    import sys

    weights = tmp_path / "drive" / "lite0.pth"
    weights.parent.mkdir()
    shutil.copy(load_backbone("efficientnet-lite0").weights_path, weights)
    code = f"""
import sys
from app.core.config import Settings
from app.core.library.service import LibraryService
from app.core.pipeline.search import Searcher, SearchRequest
svc = LibraryService({str(tmp_path / 'h')!r}, Settings(backbone="tiny-random", max_side=128, engine="auto"))
svc.wait_ready()
svc.run(svc.index([{str(photo_dir)!r}]))
res = Searcher(svc).search(SearchRequest(path={str(photo_dir / 'scene1' / 'img1.jpg')!r}, box=(5, 5, 60, 50)))
svc.run(svc.apply_settings(Settings(backbone="efficientnet-lite0", weights={str(weights)!r}, max_side=128,
                                    engine="auto"), reindex=False))
assert svc.writer.target.row.info.backbone == "efficientnet-lite0", svc.writer.unusable
print(svc.extractor().engine.name, len(res.hits), "torch" in sys.modules)
svc.close()
"""
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0, r.stderr
    engine, hits, torch_loaded = r.stdout.split()
    assert engine in ("openvino", "onnxruntime") and int(hits) == 12 and torch_loaded == "False"


@pytest.mark.parametrize("damage", ["garbage", "swapped", "blob"])
def test_a_damaged_or_swapped_cached_model_is_never_used(tmp_path, damage):
    """(18.2) The exported model and OpenVINO's compiled blob are data: a file replaced by garbage,
    by another network, or a damaged compiled blob is caught before use, prepared again (said once),
    and the engine is OpenVINO giving the original network's maps, never PyTorch for ever after or
    silently wrong (or all-zero) features."""
    import onnx
    import torch

    models = tmp_path / "models"
    bb = load_backbone("tiny-random")
    x = np.random.default_rng(3).normal(size=(1, 3, 64, 80)).astype(np.float32)
    first = create_engine(bb, EngineChoice("openvino"), models, print)
    want = first.run(x)
    del first  # its compiled model let go before the files are damaged
    onnx_file = next(models.glob("tiny-random-*.onnx"))
    if damage == "garbage":
        onnx_file.write_bytes(b"\x00garbage" * 1000)
    elif damage == "swapped":  # a valid ONNX file of another network, under the right name
        other = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, 8, 1), torch.nn.ReLU()).eval()
        torch.onnx.export(other, (torch.zeros(1, 3, 96, 128),), str(onnx_file), input_names=["image"],
                          output_names=["features"], dynamic_axes={"image": {0: "b", 2: "h", 3: "w"}}, dynamo=False)
        onnx.checker.check_model(str(onnx_file))
    else:
        blobs = [p for p in (models / "openvino-cache").rglob("*") if p.is_file() and p.stat().st_size > 1000]
        assert blobs, "OpenVINO kept no compiled blob to damage"
        for b in blobs:
            data = bytearray(b.read_bytes())
            data[len(data) // 2: len(data) // 2 + 4096] = b"\xff" * min(4096, len(data) // 2)
            b.write_bytes(bytes(data))
    logs = []
    again = create_engine(bb, EngineChoice("openvino"), models, logs.append)
    assert again.name == "openvino", logs
    got = again.run(x)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert len(logs) >= 1 and any("again" in m for m in logs), logs


def test_the_export_builds_from_the_bytes_whose_digest_it_was_given(tmp_path):
    """(18.2) A weights file replaced between the digest and the export is refused, never cached
    under the old digest."""
    import subprocess
    import sys

    bb = load_backbone("efficientnet-lite0")
    out = tmp_path / "m.onnx"
    r = subprocess.run([sys.executable, "-m", "app.core.features.export", bb.name, bb.weights_path, "0" * 16, str(out)],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], timeout=300)
    assert r.returncode == 1 and "changed" in r.stderr and not out.exists()


def test_a_model_that_gives_no_features_never_makes_a_descriptor(tmp_path):
    """(18.2) All-zero or non-finite maps (a damaged model) are recorded as failures to retry,
    never stored as an indexed descriptor."""
    from app.core.describe import HewParams
    from app.core.pipeline.produce import Decoded, describe_decoded
    from app.core.pipeline.scan import FileInfo

    d = Decoded(FileInfo("/p.jpg", 10, 1, 1), digest="x", orig_size=(64, 48))
    for maps in (np.zeros((32, 4, 5), np.float32), np.full((32, 4, 5), np.nan, np.float32)):
        rec = describe_decoded(d, maps, np.zeros(32), HewParams())
        assert rec.raw is None and rec.error and rec.retry
    ok = describe_decoded(d, np.random.default_rng(0).random((32, 4, 5)).astype(np.float32), np.zeros(32), HewParams())
    assert ok.raw is not None and not ok.error


def test_the_tests_network_is_no_part_of_the_product():
    """"tiny-random" is registered by the tests (tests/tiny_network.py, named in
    $HEATSEARCH_BACKBONES by tests/conftest.py), never by the app: without the variable the
    registry does not know it, and the app's code does not name it."""
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "HEATSEARCH_BACKBONES"}
    code = "from app.core.features.registry import REGISTRY; print(sorted(REGISTRY))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=env, timeout=120)
    assert r.returncode == 0 and "efficientnet-lite2" in r.stdout and "tiny-random" not in r.stdout, r.stdout + r.stderr
    named = [str(f.relative_to(root)) for f in (root / "app").rglob("*.py") if "tiny-random" in f.read_text()]
    assert not named, named
    assert load_backbone("tiny-random").weights_digest == "seed0"  # here, registered by the tests

