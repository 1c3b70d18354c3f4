"""Real TVM 0.27 tuning records (tests/data/fixtures/tvm-0.27/team_*) replayed on their
workloads with msdb's Schedule and compiled: every kernel computes what the workload computes.
The best records run in the fast suite, every record in the slow one."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from msdb.records.target import Target
from msdb.ir import interpret
from msdb.tuner import build
from tests.tuner._util import fixture_records, mean_run_secs, random_arrays, replay

TEAMS = ("a", "b", "c")


@lru_cache(maxsize=None)
def _team(team: str):
    return fixture_records(team)


def _conv2d_nhwc(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    n, h, wd, _ = x.shape
    kh, kw, _, co = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, oh, ow, co), dtype=np.float64)
    for rh in range(kh):
        for rw in range(kw):
            patch = xp[:, rh:rh + stride * oh:stride, rw:rw + stride * ow:stride, :]
            out += np.einsum("nhwc,cd->nhwd", patch, w[rh, rw], dtype=np.float64)
    return out.astype(np.float32)


@lru_cache(maxsize=None)
def _reference(team: str, index: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Inputs and the expected output of workload `index` of `team`: the interpreter, or numpy
    for the 7x7 conv2d the interpreter takes seconds on."""
    mods, _ = _team(team)
    mod = mods[index]
    arrays = random_arrays(mod, seed=index)
    names = [b.name for b in mod.main.buffers]
    if names == ["inputs", "weight", "conv2d_nhwc"]:
        expected = _conv2d_nhwc(arrays[0], arrays[1], stride=2, pad=3)
    else:
        ref = [a.copy() for a in arrays]
        interpret(mod, *ref)
        expected = ref[-1]
    return tuple(arrays), expected


def _check(team: str, index: int, record: list, target: Target) -> None:
    mods, _ = _team(team)
    arrays, expected = _reference(team, index)
    scheduled = replay(mods[index], record)
    actual = [a.copy() for a in arrays]
    actual[-1][...] = np.nan  # every output element must be written
    build(scheduled, target)(*actual)
    np.testing.assert_allclose(actual[-1], expected, rtol=1e-4, atol=1e-4)
    for got, given in zip(actual[:-1], arrays[:-1]):
        np.testing.assert_array_equal(got, given)  # inputs untouched


def _cases(limit: int | None) -> list:
    cases = []
    for team in TEAMS:
        mods, records = _team(team)
        for index in range(len(mods)):
            mine = sorted((r for r in records if r[0] == index), key=mean_run_secs)
            for rank, record in enumerate(mine[:limit] if limit else mine):
                cases.append(pytest.param(team, index, record, id=f"{team}{index}-{rank}"))
    return cases


def test_reference_of_the_unscheduled_conv2d_matches_numpy(isa_target: Target) -> None:
    """The numpy conv used as the C2D reference agrees with the compiled workload (which is
    itself checked against the interpreter on small shapes in test_codegen_zoo)."""
    mods, _ = _team("b")
    index = next(i for i, m in enumerate(mods) if [b.name for b in m.main.buffers][-1] == "conv2d_nhwc")
    arrays, expected = _reference("b", index)
    actual = [a.copy() for a in arrays]
    build(mods[index], isa_target)(*actual)
    np.testing.assert_allclose(actual[-1], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("team,index,record", _cases(limit=2))
def test_best_fixture_traces_compute_the_workload(team: str, index: int, record: list, isa_target: Target) -> None:
    _check(team, index, record, isa_target)


@pytest.mark.slow
@pytest.mark.parametrize("team,index,record", _cases(limit=None))
def test_every_fixture_trace_computes_the_workload(team: str, index: int, record: list, isa_target: Target) -> None:
    _check(team, index, record, isa_target)
