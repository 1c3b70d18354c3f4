"""Every zoo workload (reduced shapes), unscheduled, compiled and compared with msdb's
interpreter and, for the matmul family, with numpy."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.records.target import Target
from msdb.ir import zoo
from msdb.tuner import build
from tests.tuner._util import SMALL_ZOO, check_against_interpreter, random_arrays


def test_every_zoo_workload_has_a_reduced_shape() -> None:
    assert sorted(SMALL_ZOO) == sorted(zoo.names())


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.names())
def test_zoo_workload_matches_the_interpreter(name: str, isa_target: Target) -> None:
    mod = zoo.build(name, *SMALL_ZOO[name])
    check_against_interpreter(mod, arrays=random_arrays(mod, seed=1), target=isa_target)


@pytest.mark.parametrize("name", ["matmul", "dense", "GMM"])
def test_matmul_family_matches_numpy(name: str, isa_target: Target) -> None:
    params = {"matmul": (24, 40, 56), "dense": (24, 40, 56), "GMM": (2, 24, 40, 56)}[name]
    mod = zoo.build(name, *params)
    arrays = random_arrays(mod, seed=2)
    build(mod, isa_target)(*arrays)
    a, b, c = arrays
    if name == "matmul":
        expected = a @ b
    elif name == "dense":
        expected = a @ b.T
    else:
        expected = np.einsum("bik,bkj->bij", a, b)
    np.testing.assert_allclose(c, expected, rtol=1e-4)


def test_int8_matmul_accumulating_in_int32(isa_target: Target) -> None:
    mod = zoo.build("matmul", 16, 24, 32, "int8", "int32")
    arrays = random_arrays(mod, seed=3)
    a, b, c = arrays
    build(mod, isa_target)(*arrays)
    assert (c == a.astype("int32") @ b.astype("int32")).all()
