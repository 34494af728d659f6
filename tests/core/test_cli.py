"""The CLI: machine-readable output scripts rely on, error exits, same code as the library."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "cli-home"
    Settings(backbone="tiny-random", max_side=128, batch_size=4).save(h)
    return h


def test_index_status_search_json(home, photo_dir, capsys):
    assert main(["index", str(photo_dir), "--home", str(home), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[-1]["phase"] == "done" and lines[-1]["done"] == 12
    assert main(["status", "--json", "--home", str(home)]) == 0
    st = json.loads(capsys.readouterr().out)
    assert (st["images"], st["indexed"], st["failed"]) == (12, 12, 0)
    # --home before the command too (trial 11: refused)
    assert main(["--home", str(home), "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["indexed"] == 12
    q = photo_dir / "scene2" / "img0.jpg"
    assert main(["search", str(q), "--top", "4", "--json", "--no-her", "--no-qe", "--home", str(home)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in res["results"]] == [1, 2, 3, 4]
    assert res["results"][0]["path"] == str(q.resolve())
    assert all(Path(r["path"]).is_absolute() for r in res["results"])
    scores = [r["score"] for r in res["results"]]
    assert scores[0] == pytest.approx(1.0, abs=1e-4)


def test_batch_queries_in_order(home, photo_dir, capsys, tmp_path):
    main(["index", str(photo_dir), "--home", str(home)])
    capsys.readouterr()
    qs = [photo_dir / "scene0" / "img1.jpg", photo_dir / "scene3" / "img2.jpg", photo_dir / "scene1" / "img0.jpg"]
    f = tmp_path / "q.jsonl"
    f.write_text("\n".join(json.dumps({"path": str(p), "box": [5, 5, 60, 50] if i == 1 else None}) for i, p in enumerate(qs)))
    assert main(["search", "--queries", str(f), "--json", "--top", "3", "--no-her", "--no-qe", "--home", str(home)]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [o["query"] for o in out] == [str(p.resolve()) for p in qs]
    assert out[1]["box"] == [5, 5, 60, 50]
    assert out[0]["results"][0]["path"] == str(qs[0].resolve())
    # (trial 12) a line that is not JSON: the parser's own words ("Expecting value: line 1 column 1") were printed
    f.write_text(json.dumps({"path": str(qs[0])}) + "\nnot json\n")
    main(["search", "--queries", str(f), "--json", "--top", "3", "--no-her", "--no-qe", "--home", str(home)])
    err = capsys.readouterr().err
    assert "line 2: not JSON at column 1; each line is a JSON object" in err and "Expecting" not in err, err
    # (trial 13) a --folder the library does not hold read "no results (the filters leave no photo)", exit 0
    assert main(["search", str(qs[0]), "--folder", str(tmp_path / "nowhere"), "--home", str(home)]) == 1
    err = capsys.readouterr().err
    assert "--folder" in err and "is not in the library (its folders: " in err and len(err.strip().splitlines()) == 1, err
    assert main(["search", str(qs[0]), "--folder", str(photo_dir / "scene1"), "--top", "3", "--home", str(home)]) == 0
    # a folder that holds the library's folders is one too (a review: it was refused)
    assert main(["search", str(qs[0]), "--folder", str(photo_dir.parent), "--top", "3", "--home", str(home)]) == 0


def test_errors_exit_nonzero_with_one_line(home, tmp_path):
    r = subprocess.run([sys.executable, "-m", "app", "search", str(tmp_path / "nope.jpg"), "--home", str(home)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and r.stderr.strip().startswith("heatsearch: no such photo")
    assert len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([sys.executable, "-m", "app", "search", str(ROOT / "pyproject.toml"), "--box", "1,2,3", "--home", str(home)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "--box" in r.stderr


def test_missing_weights_is_a_clear_message_not_a_hang(tmp_path):
    (tmp_path / "photos").mkdir()
    r = subprocess.run([sys.executable, "-m", "app", "index", str(tmp_path / "photos"), "--home", str(tmp_path / "h"), "--backbone", "vgg16"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1
    assert "vgg16-397923af.pth" in r.stderr and "never downloads" in r.stderr


def test_version():
    r = subprocess.run([sys.executable, "-m", "app", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.startswith("HeatSearch ")


def test_hide_duplicates_names_the_copies_each_result_stands_for(home, photo_dir, capsys, tmp_path):
    """--hide-duplicates showed one photo of a set of copies and said nothing of the others."""
    from PIL import Image
    src = photo_dir / "scene2" / "img0.jpg"
    copy = photo_dir / "scene2" / "img0-copy.png"
    Image.open(src).convert("RGB").save(copy)
    assert main(["index", str(photo_dir), "--home", str(home)]) == 0
    capsys.readouterr()
    args = ["search", str(src), "--top", "5", "--no-her", "--no-qe", "--home", str(home), "--hide-duplicates"]
    assert main(args + ["--json"]) == 0
    res = json.loads(capsys.readouterr().out)["results"]
    assert res[0]["path"] == str(src.resolve()) and res[0]["hidden_copies"] == [str(copy.resolve())]
    assert all(r["hidden_copies"] == [] for r in res[1:]) and str(copy.resolve()) not in [r["path"] for r in res]
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("(+1 copy)")


def test_the_help_says_how_to_open_the_window(capsys):
    """Trial 14: `heatsearch --help` listed only the commands, not that none opens the window."""
    from app.__main__ import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "With no command" in out and "opens the window" in out and "--query PHOTO" in out, out



def test_a_non_finite_number_in_settings_is_named_and_the_default_used(tmp_path):
    """settings.json is read by Python's json, which takes 1e400 as inf and Infinity/NaN as
    themselves: such a value is one line naming the field and the value as written, the default
    stands in, and a command answers exactly as with any other bad setting (same exit code, same
    other lines), never `internal error: OverflowError`."""
    from app.core.config import Settings

    home = tmp_path / "home"
    home.mkdir()

    def status(field, text):
        (home / "settings.json").write_text('{"version": 2, "batch_size": 4, "%s": %s}' % (field, text))
        r = subprocess.run([sys.executable, "-m", "app", "status", "--home", str(home)], capture_output=True,
                           text=True, cwd=ROOT, timeout=300)
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
        return r.returncode, r.stderr.strip().splitlines()

    rc, lines = status("max_side", '"big"')  # a settings problem of another kind: the baseline
    assert lines[0].startswith("heatsearch: settings: 'max_side' must be")
    for field, text in (("max_side", "1e400"), ("qe_alpha", "Infinity"), ("top", "NaN"), ("dim", "-Infinity"),
                        ("backbone", "-1e999")):
        (home / "settings.json").write_text('{"version": 2, "batch_size": 4, "%s": %s}' % (field, text))
        s = Settings.load(home)
        default = getattr(Settings(), field)
        assert getattr(s, field) == default and s.batch_size == 4
        assert s.problems == [f"settings: {field}: {text} is not a finite number; using the default {default!r}"]
        assert status(field, text) == (rc, [f"heatsearch: {s.problems[0]}", *lines[1:]])
