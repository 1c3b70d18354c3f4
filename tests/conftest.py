"""Fixtures shared by the whole suite."""

from __future__ import annotations

import pytest

from msdb.records.target import Target
from tests.isa import runnable_levels


@pytest.fixture(params=runnable_levels(), ids=lambda level: level.name)
def isa_target(request: pytest.FixtureRequest) -> Target:
    """A one-core CPU target for each ISA level this host can execute (`tests/isa.py`): a
    kernel test that takes it builds and runs once per level."""
    return request.param.target()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The `tvm`-marked tests run only where TVM 0.27 is importable (`.ci/run` runs them in
    their own virtualenv with `-m tvm`): elsewhere they are deselected, as if `-m "not tvm"`
    were always part of the selection, so that any `-m` the caller gives (the fast lane
    `-m "not slow"`) keeps them out."""
    import importlib.util

    if importlib.util.find_spec("tvm") is not None:
        return
    kept = [item for item in items if item.get_closest_marker("tvm") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("tvm") is not None])
        items[:] = kept
