import os

import numpy as np
import pytest
import torch
from PIL import Image

from app.core.errors import WeightsLoadError, WeightsMissingError
from app.core.features.extractor import Extractor, prepare, select_device
from app.core.features.registry import REGISTRY, load_backbone
from app.core.imageio import open_oriented
from tests.conftest import write_photo


def test_default_backbone_loads_offline_with_exact_keys():
    bb = load_backbone("efficientnet-lite0")
    assert bb.spec.channels == 1280 and bb.spec.stride == 32 and bb.spec.offline
    assert len(bb.weights_digest) == 16
    with torch.inference_mode():
        y = bb.module(torch.randn(1, 3, 70, 100))
    assert y.shape == (1, 1280, 3, 4)  # ceil(70/32), ceil(100/32)
    assert y.min() >= 0 and y.max() <= 6  # ReLU6


@pytest.mark.parametrize("name,channels", [("efficientnet-lite0-block", 320), ("efficientnet-lite2-block", 352),
                                           ("efficientnet-lite2", 1280)])
def test_other_offline_variants(name, channels):
    bb = load_backbone(name)
    with torch.inference_mode():
        y = bb.module(torch.randn(1, 3, 64, 64))
    assert y.shape[1] == channels == REGISTRY[name].channels and y.min() >= 0


@pytest.mark.parametrize("name", ["vgg16", "vgg16-pool5", "resnet50"])
def test_missing_torchvision_weights_give_a_clear_error(name):
    with pytest.raises(WeightsMissingError) as e:
        load_backbone(name)
    msg = str(e.value)
    assert ".pth" in msg and "checkpoints" in msg and "never downloads" in msg


def test_torchvision_backbone_from_a_named_file(tmp_path):
    from torchvision.models import resnet50

    f = tmp_path / "r50.pth"
    torch.save(resnet50(weights=None).state_dict(), f)
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


def test_device_selection_and_override():
    assert select_device("cpu").type == "cpu"
    want = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert select_device("auto").type == want


def test_preprocessing_never_upscales_and_crop_keeps_scale():
    img = Image.new("RGB", (2000, 1000), (200, 100, 50))
    p = prepare(img, img.size, 1024, (0.5,) * 3, (0.5,) * 3)
    assert p.tensor.shape == (3, 512, 1024) and p.scale == pytest.approx(0.512)
    small = Image.new("RGB", (300, 200))
    assert prepare(small, small.size, 1024, (0.5,) * 3, (0.5,) * 3).tensor.shape == (3, 200, 300)
    c = prepare(img, img.size, 1024, (0.5,) * 3, (0.5,) * 3, box=(100, 100, 600, 350))
    # 1024 * max(crop) / max(orig) = 1024 * 500 / 2000 = 256
    assert c.tensor.shape == (3, 128, 256) and c.offset == (100, 100)
    # normalisation: (200/255 - 0.5) / 0.5
    assert float(p.tensor[0, 0, 0]) == pytest.approx((200 / 255 - 0.5) / 0.5, abs=1e-6)


def test_exif_orientation_is_honoured(tmp_path):
    f = write_photo(tmp_path / "rot.jpg", 1, size=(80, 40), exif_orientation=6)
    img, orig = open_oriented(f)
    assert img.size == (40, 80) and orig == (40, 80)


def test_map_mode_box_mask_selects_cells_inside():
    bb = load_backbone("tiny-random")
    ex = Extractor(bb, "cpu", max_side=256)
    img = Image.new("RGB", (512, 256), (10, 20, 30))
    fm = ex.feature_maps([ex.prepare_image(img)])[0]
    assert fm.features.shape == (16, 32, 32) and fm.scale == 0.5
    mask = fm.box_mask((0, 0, 256, 128))  # left half, top half of the original
    assert mask.sum() == 8 * 16 and mask[:8, :16].all()
    tiny = fm.box_mask((100, 100, 101, 101))
    assert tiny.sum() == 1


def test_extractor_batches_mixed_shapes_in_input_order():
    ex = Extractor(load_backbone("tiny-random"), "cpu", max_side=64)
    imgs = [Image.new("RGB", s, c) for s, c in [((64, 32), (255, 0, 0)), ((32, 64), (0, 255, 0)), ((64, 32), (0, 0, 255))]]
    maps = ex.feature_maps([ex.prepare_image(i) for i in imgs])
    assert [m.features.shape[:2] for m in maps] == [(4, 8), (8, 4), (4, 8)]
    single = ex.feature_maps([ex.prepare_image(imgs[2])])[0]
    np.testing.assert_allclose(maps[2].features, single.features, rtol=1e-4, atol=1e-4)
