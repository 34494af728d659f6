"""Nothing reports home: the inference runtimes' usage reporting is off (app/core/telemetry.py)."""
import os
import subprocess
import sys
from pathlib import Path

from app.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_indexing_and_searching_write_nothing_into_home_and_report_nothing(tmp_path, photo_dir):
    """A trial found OpenVINO's Google Analytics client id in ~/intel and ONNX Runtime's device id
    in ~/.cache/Microsoft after a session: both runtimes report usage unless told not to. A
    library indexed and searched on each CPU runtime leaves HOME as it was."""
    home = tmp_path / "person"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME", "CI")}
    env["HOME"] = str(home)
    for engine in ("openvino", "onnxruntime"):
        data = tmp_path / f"data-{engine}"
        Settings(backbone="tiny-random", max_side=128, batch_size=4, engine=engine).save(data)
        for cmd in (["index", str(photo_dir)], ["search", str(photo_dir / "scene1" / "img1.jpg")]):
            r = subprocess.run([sys.executable, "-m", "app", *cmd, "--home", str(data)], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
