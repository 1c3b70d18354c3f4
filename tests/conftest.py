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
