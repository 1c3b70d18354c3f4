"""Fixtures of the team-scale tests: one database that several tuners share, a SQLite
file or a fresh database on the session's throwaway PostgreSQL server (tests/postgres_server.py,
the same server fixture as the database suite's), and a Dask LocalCluster of two worker processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from ..database.conftest import postgres_server  # noqa: F401 - the session's one PostgreSQL server

SHARED_KINDS = ("sqlite", "postgres")


@pytest.fixture(params=SHARED_KINDS)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where several tuners commit: a SQLite file, or a PostgreSQL database URL."""
    if request.param == "sqlite":
        return str(tmp_path / "team.sqlite")
    return str(request.getfixturevalue("postgres_server").url())


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A real Dask cluster on loopback: two worker processes, one thread and the `measure`
    resource each, as `dask worker --nthreads 1 --resources measure=1` starts them."""
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, resources={"measure": 1},
                                  dashboard_address=":0") as local:
        yield local
