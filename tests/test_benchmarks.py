"""Every benchmark runs on today's code: each script in benchmarks/ in its smoke mode (`--smoke`:
the same code on a few photos or a few hundred rows, seconds), in a subprocess, must exit 0 and
print its figures. A script added to benchmarks/ is found here by itself: one without a smoke
mode fails. PostgreSQL and Ray are the test session's servers (tests/conftest.py), passed in by
URL and address; a benchmark that reads the shared photos is skipped when they are not beside
the checkout."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__")
# benchmarks that read no shared photo (synthetic vectors, random images); every other one does,
# a new one too until it is listed here
SYNTHETIC = {"backbone_speed", "hew_speed", "pg_latency", "query_latency", "writer_rate"}
SERVERS = {"pg_latency": "postgres", "ray_throughput": "ray", "writer_rate": "postgres"}
QUICK = {"enlarged", "hew_speed", "query_latency"}  # under 5 s here; the others are marked slow
TIMEOUT_S = 300  # each; the slowest smoke run takes about 30 s here
# a figure: a decimal number, or a number with its unit
FIGURE = re.compile(r"\d\.\d|\b\d+ ?(ms|s|MB|MiB|GiB|%|photos/s|bytes/photo)\b")


@pytest.fixture(scope="session")
def eval_cache(tmp_path_factory):
    """One cache of feature maps (XDG_CACHE_HOME) for the session's benchmarks: policies.py,
    spatial_verification.py and match_overlay.py describe the same few photos."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in QUICK else pytest.mark.slow) for n in BENCHMARKS])
def test_benchmark_runs_in_its_smoke_mode(name, request, eval_cache):
    script = ROOT / "benchmarks" / f"{name}.py"
    assert "--smoke" in script.read_text(), f"benchmarks/{name}.py has no --smoke mode (CONTRIBUTING.md, Measure)"
    if name not in SYNTHETIC and not (SHARED / "data").is_dir():
        pytest.skip(f"shared photos not found in {SHARED / 'data'}")
    args = [sys.executable, str(script), "--smoke"]
    if SERVERS.get(name) == "postgres":
        args += ["--url", request.getfixturevalue("pg_url")]
    elif SERVERS.get(name) == "ray":
        request.getfixturevalue("ray_cluster")
        import ray

        args += ["--address", ray.get_runtime_context().gcs_address]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen", "XDG_CACHE_HOME": str(eval_cache)}
    t = time.monotonic()
    try:
        r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"benchmarks/{name}.py --smoke ran past {TIMEOUT_S} s; its output:\n{out[-3000:]}")
    said = f"benchmarks/{name}.py --smoke ({time.monotonic() - t:.0f} s), exit {r.returncode}:\n" \
           f"{r.stdout[-3000:]}\n--- stderr ---\n{r.stderr[-3000:]}"
    assert r.returncode == 0, said
    assert "Traceback" not in r.stdout + r.stderr, said
    assert any(FIGURE.search(line) for line in r.stdout.splitlines()), f"no figure printed: {said}"
