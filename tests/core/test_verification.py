"""Local features and the step that tells an object's own views from other things of its kind."""
from PIL import Image

from app.core import verification
from tests.conftest import shared_photos


def test_the_step_is_the_lowest_sharp_fall_after_two_or_more_strong_matches():
    # an object's three other views, then other covers (trial 24's library, at 320 px)
    assert verification.step([169, 7, 164, 8, 64, 5, 6]) == 64
    assert verification.step([78, 77, 63, 9, 8, 8, 7]) == 63
    # a landmark's near-identical shots stand out, but its other photos below them still match
    # (an Invalides photo in the 300-photo library: every photo after the two read 0.3 without this)
    assert verification.step([117, 89, 34, 28, 21, 11, 10, 8]) is None
    assert verification.step([117, 89, 16, 11, 10, 8]) == 89  # one such photo alone may be chance
    # a landmark's photos fall evenly; one strong match alone (a near shot) is no step
    assert verification.step([57, 22, 25, 15, 17, 13, 12, 10, 9, 7]) is None
    assert verification.step([240, 9, 8, 7, 7, 6]) is None
    assert verification.step([12, 8, 7, 5]) is None
    assert verification.step([]) is None


def test_two_views_of_an_object_share_far_more_inliers_than_two_objects():
    uk = shared_photos("ukbench", 24)
    views = [verification.read_features(str(p)) for p in uk[16:20]]  # one object, four sides
    others = [verification.read_features(str(p)) for p in uk[0:16:4] + uk[20:24]]
    same = [verification.inliers(views[0], v) for v in views[1:]]
    apart = [verification.inliers(views[0], o) for o in others]
    assert min(same) >= 2.5 * max(apart) and min(same) >= verification.STEP_MIN, (same, apart)
    assert verification.step(same + apart) == min(same)


def test_a_photo_without_texture_has_no_features_and_matches_nothing(tmp_path):
    flat = verification.features_of(Image.new("RGB", (640, 480), (120, 130, 140)))
    assert flat[0].shape == (0, 2) and flat[1].shape == (0, 128)
    view = verification.read_features(str(shared_photos("ukbench", 1)[0]))
    assert verification.inliers(flat, view) == 0 and verification.inliers(view, flat) == 0


def test_huge_photos_of_formats_decoded_whole_are_not_read():
    # a JPEG is decoded at 1/2 to 1/8 scale; a 200 MP TIFF or PNG would be decoded whole
    assert verification.readable("/p/a.JPG", 20000, 10000)
    assert not verification.readable("/p/a.tif", 20000, 10000)
    assert verification.readable("/p/a.png", 4000, 3000) and verification.readable("/p/a.heic", None, None)
