"""Describing photos on a Ray cluster (`heatsearch index PATHS --library URL --ray auto|ADDRESS`).

The driver (the process that owns the library's writer) scans, plans and fixes the centring mean
from a sample, exactly as on a laptop. Ray Data then hands the planned files to a pool of actors,
each running `produce` (decode, the library's model on OpenVINO / ONNX Runtime, or PyTorch on a GPU
where the worker has one, HeW, signatures); the Records stream back to the driver, where the one
writer commits them batch by batch with the same generation bookkeeping.

- An actor killed mid-batch is restarted and its batch retried (Ray's restarts and task retries);
  a batch is committed only once it arrives whole, so nothing is lost or doubled.
- A killed driver loses at most the batches in flight: the next run plans from the catalog.
- Actors ask Ray for half a CPU each (a whole one per actor stalls Ray Data on small machines:
  its own reading needs CPU too) and run the model on one thread; one actor per core, or one per
  GPU when the cluster has GPUs.
- `path_map` (LOCAL=REMOTE): workers that mount the photos elsewhere open REMOTE/...; the catalog
  keeps the driver's paths. A photo the driver has but a worker does not find where the map sends
  it is counted (`RayProducer.unmapped`, the run's Progress.unmapped) and said in one line: a wrong
  or missing map, never a photo that "could not be read".
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .. import paths
from ..catalog.records import Record
from ..config import models_dir as default_models_dir
from ..errors import HeatSearchError, InputError
from .produce import ModelSpec, produce
from .scan import FileInfo

FIELDS_INT = ("folder_id", "size", "mtime_ns", "reuse_of", "width", "height", "phash", "grid_h", "grid_w", "retry",
              "unmapped")
FIELDS_FLOAT = ("taken", "sharpness", "border")


def parse_path_map(items) -> list[tuple[str, str]]:
    """['LOCAL=REMOTE', ...] -> [(local, remote)], longest local prefix first."""
    out = []
    for item in items or ():
        local, sep, remote = item.partition("=")
        if not sep or not local or not remote:
            raise InputError(f"--path-map takes LOCAL=REMOTE (a folder here = the same folder on the workers), got '{item}'")
        out.append((os.path.abspath(os.path.expanduser(local)), remote))
    return sorted(out, key=lambda p: -len(p[0]))


def map_path(path: str, path_map: list[tuple[str, str]]) -> str:
    """Where a worker finds `path` (by whole path components)."""
    for local, remote in path_map:
        if paths.is_within(path, local):
            rest = os.path.relpath(path, local)
            return remote if rest == "." else remote.rstrip("/") + "/" + rest
    return path


class RecordMaker:
    """A Ray Data actor: the library's model loaded once, then batches of planned files ->
    batches of Record columns (paths travel as bytes, so any file name survives)."""

    def __init__(self, spec: ModelSpec, mu: np.ndarray, reuse: dict, path_map: list, models_dir: str | None):
        import ray  # here and below: Ray is optional (heatsearch[scale]) and takes seconds to import

        self.spec, self.mu, self.path_map = spec, mu, path_map
        self.reuse = ray.get(reuse) if isinstance(reuse, ray.ObjectRef) else reuse  # shared through the object store
        self.ex = spec.extractor(Path(models_dir) if models_dir else default_models_dir(), log=lambda m: None)

    def __call__(self, batch: dict) -> dict:
        cols: dict[str, list] = {k: [] for k in ("path", "digest", "error", "thumb", "camera", "raw", "grid", *FIELDS_INT, *FIELDS_FLOAT)}
        for raw_path, fid, size, mtime in zip(batch["path"], batch["folder_id"], batch["size"], batch["mtime_ns"]):
            here = os.fsdecode(bytes(raw_path))
            info = FileInfo(map_path(here, self.path_map), int(size), int(mtime), int(fid))
            rec = produce(info, self.ex, self.mu, self.spec.params, self.reuse)
            # not there, where this worker was told to look (the driver checks it still has the file)
            unmapped = bool(rec.error) and not os.path.lexists(info.path)
            cols["path"].append(bytes(raw_path))
            cols["digest"].append(rec.digest)
            cols["error"].append(rec.error.replace(info.path, here).encode("utf-8", "surrogateescape"))
            cols["thumb"].append(rec.thumb)
            cols["camera"].append(rec.camera)
            cols["raw"].append(b"" if rec.raw is None else np.asarray(rec.raw, np.float32).tobytes())
            cols["grid"].append(b"" if rec.grid is None else np.asarray(rec.grid, np.float16).tobytes())
            gh, gw = rec.grid.shape if rec.grid is not None else (0, 0)
            for k, v in (("folder_id", rec.folder_id), ("size", rec.size), ("mtime_ns", rec.mtime_ns),
                         ("reuse_of", -1 if rec.reuse_of is None else rec.reuse_of), ("width", rec.width),
                         ("height", rec.height), ("phash", rec.phash), ("grid_h", gh), ("grid_w", gw),
                         ("retry", int(rec.retry)), ("taken", rec.taken), ("sharpness", rec.sharpness),
                         ("border", rec.border), ("unmapped", int(unmapped))):
                cols[k].append(v)
        out = {k: np.array(v, dtype=object) for k, v in cols.items() if k in ("path", "digest", "error", "thumb", "camera", "raw", "grid")}
        out.update({k: np.asarray(cols[k], np.int64) for k in FIELDS_INT})
        out.update({k: np.asarray(cols[k], np.float64) for k in FIELDS_FLOAT})
        return out


def records_of(batch: dict) -> list[Record]:
    """Record columns (a Ray batch) -> Records with the driver's paths."""
    out = []
    for n in range(len(batch["path"])):
        raw, grid = bytes(batch["raw"][n]), bytes(batch["grid"][n])
        gh, gw = int(batch["grid_h"][n]), int(batch["grid_w"][n])
        reuse = int(batch["reuse_of"][n])
        out.append(Record(os.fsdecode(bytes(batch["path"][n])), int(batch["folder_id"][n]), int(batch["size"][n]),
                          int(batch["mtime_ns"][n]), str(batch["digest"][n]),
                          bytes(batch["error"][n]).decode("utf-8", "surrogateescape"), bool(batch["retry"][n]),
                          None if reuse < 0 else reuse, int(batch["width"][n]), int(batch["height"][n]),
                          float(batch["taken"][n]), float(batch["sharpness"][n]), int(batch["phash"][n]),
                          bytes(batch["thumb"][n]),
                          np.frombuffer(raw, np.float32).copy() if raw else None,
                          np.frombuffer(grid, np.float16).reshape(gh, gw).copy() if grid else None,
                          float(batch["border"][n]), str(batch["camera"][n])))
    return out


class RayProducer:
    """Records made by a Ray cluster (see the module's text). address: "auto" (a running cluster,
    else a local one started here) or a cluster's address; workers: actors (default: one per
    CPU of the cluster, or one per GPU)."""

    def __init__(self, address: str, spec: ModelSpec, local, workers: int | None = None,
                 path_map: list[tuple[str, str]] = (), log: Callable[[str], None] = print):
        self.address = address or "auto"
        self.spec = spec
        self.local = local  # a LocalProducer: the calibration sample is described on the driver
        self.want_workers = workers
        self.path_map = list(path_map)
        self.log = log
        self.workers = 0
        self.gpus = 0
        self.started_here = False
        self.startup_s = 0.0
        self.unmapped = 0  # photos of this producer's runs that the workers did not find (the map's fault)

    def prepare(self) -> None:
        try:
            import ray
        except ImportError as e:
            raise HeatSearchError("indexing on a Ray cluster needs the scale packages: pip install 'heatsearch[scale]'") from e
        t = time.monotonic()
        env = {"env_vars": {"HEATSEARCH_THREADS": "1", **({"HEATSEARCH_MODELS": os.environ["HEATSEARCH_MODELS"]}
                                                          if os.environ.get("HEATSEARCH_MODELS") else {})}}
        if not ray.is_initialized():
            opts = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR", runtime_env=env)
            if self.address == "auto":
                try:
                    ray.init(address="auto", **opts)
                except (ConnectionError, RuntimeError, ValueError):
                    ray.init(**opts)  # no cluster running: a local one, on this machine's cores
                    self.started_here = True
            else:
                try:
                    ray.init(address=self.address, **opts)
                except Exception as e:  # noqa: BLE001 - one line, with what to do
                    raise HeatSearchError(f"cannot reach the Ray cluster at {self.address}: "
                                          f"{str(e).splitlines()[0][:160]} (start one with `ray start --head`)") from e
        self.startup_s = time.monotonic() - t
        res = ray.cluster_resources()
        self.gpus = int(res.get("GPU", 0))
        cpus = int(res.get("CPU", 1))
        self.workers = self.want_workers or (self.gpus or max(1, cpus))
        self.log(f"Ray: {self.workers} worker{'s' if self.workers != 1 else ''} on {int(cpus)} CPUs"
                 f"{f' and {self.gpus} GPUs' if self.gpus else ''} (connected in {self.startup_s:.1f} s)")
        self.local.prepare()
        if self.spec.precision == "int8":  # the workers run the library's own model, made just before
            self.spec = replace(self.spec, model=self.local.ex.engine.blob)

    def mean(self, tasks, want, reuse, cancelled):
        return self.local.mean(tasks, want, reuse, cancelled)

    def run(self, tasks: list[FileInfo], reuse: dict, mu, params, batch: int, cancelled: Callable[[], bool]
            ) -> Iterator[list[Record]]:
        import pyarrow as pa
        import ray

        logging.getLogger("ray.data").setLevel(logging.ERROR)  # the driver's own progress is what a user reads
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        kept = [t for t in tasks if t.path in self.local._kept]  # the calibration sample: already described here
        if kept:
            yield from self.local.run(kept, reuse, mu, params, batch, cancelled)
        rest = [t for t in tasks if t.path not in {k.path for k in kept}]
        if not rest:
            return
        table = pa.table({"path": pa.array([os.fsencode(t.path) for t in rest], pa.binary()),
                          "folder_id": [t.folder_id for t in rest], "size": [t.size for t in rest],
                          "mtime_ns": [t.mtime_ns for t in rest]})
        blocks = max(self.workers * 4, min(len(rest) // max(batch, 1), 2000), 1)
        ds = ray.data.from_arrow(table).repartition(blocks)
        models = os.environ.get("HEATSEARCH_MODELS")
        ds = ds.map_batches(RecordMaker, batch_size=batch, batch_format="numpy",
                            fn_constructor_kwargs={"spec": replace(self.spec, device="cuda" if self.gpus else "cpu"),
                                                   "mu": mu, "reuse": ray.put(reuse), "path_map": self.path_map,
                                                   "models_dir": models},
                            compute=ray.data.ActorPoolStrategy(size=self.workers),
                            num_cpus=0.5, num_gpus=1 if self.gpus else 0)
        # Ray Data's actors restart and retry their batch without limit by default (max_restarts
        # and max_task_retries -1): tests/core/test_distributed.py kills one mid-batch
        it = ds.iter_batches(batch_size=batch, batch_format="numpy", prefetch_batches=1)
        missed = 0
        for b in it:
            # a photo gone from the driver too was deleted meanwhile: no fault of the map
            n = sum(1 for path, u in zip(b["path"], b["unmapped"]) if u and os.path.lexists(os.fsdecode(bytes(path))))
            missed += n
            self.unmapped += n  # before the batch is handed on: its Progress counts them
            yield records_of(b)
            if cancelled():
                return
        if missed:
            if self.path_map:
                where = ("under the mapped folder: check --path-map "
                         + " ".join(f"{paths.display(local)}={remote}" for local, remote in self.path_map))
            else:
                where = ("at this computer's paths: give --path-map LOCAL=REMOTE for where the workers mount "
                         "the photos")
            self.log(f"{missed} of {len(rest)} photos were not found by the Ray workers {where}; "
                     "they are kept as skipped and read again at the next run")

    def close(self) -> None:
        if self.started_here:
            import ray

            ray.shutdown()
            self.started_here = False
