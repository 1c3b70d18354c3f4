"""Property tests: renaming never changes a hash, a single mutation always does, and
`structural_equal` agrees with `structural_hash` on both."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msdb.hashing import MODES, structural_equal, structural_hash

from . import ir_samples
from .mutations import MUTATION_KINDS, count_sites, mutate, rename_module

def _zoo_names() -> list[str]:
    from msdb.ir import zoo

    return [n for n in ("GMM", "C2D", "SFM", "C1D", "DEP", "NRM", "CBR", "T2D", "linear0") if n in zoo.names()]


# Hand-built samples always; the zoo's TVM workloads too once msdb.ir.zoo exists.
SAMPLE_NAMES = sorted(ir_samples.SAMPLES) + [f"zoo:{n}" for n in _zoo_names()]
_CACHE: dict[str, object] = {}


def sample(name: str):
    # Building a sample is cheap but not free; hypothesis calls this hundreds of times.
    if name not in _CACHE:
        if name.startswith("zoo:"):
            from msdb.ir import zoo

            _CACHE[name] = zoo.workload(name[4:])
        else:
            _CACHE[name] = ir_samples.SAMPLES[name]()
    return _CACHE[name]


PROPERTY_SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(name=st.sampled_from(SAMPLE_NAMES), seed=st.integers(0, 2**32 - 1))
def test_renaming_everything_keeps_every_hash(name: str, seed: int) -> None:
    mod = sample(name)
    renamed = rename_module(mod, random.Random(seed))
    assert renamed.main.body is not mod.main.body
    for mode in MODES:
        assert structural_hash(renamed, mode) == structural_hash(mod, mode), mode
        assert structural_equal(renamed, mod, mode), mode


@PROPERTY_SETTINGS
@given(name=st.sampled_from(SAMPLE_NAMES), kind=st.sampled_from(MUTATION_KINDS), site=st.integers(0, 10_000),
       seed=st.integers(0, 2**32 - 1))
def test_a_single_mutation_changes_the_structural_hash(name: str, kind: str, site: int, seed: int) -> None:
    mod = sample(name)
    n_sites = count_sites(mod, kind)
    if n_sites == 0:
        return  # this sample has no site of this kind (e.g. no float constant in an int workload)
    mutated = mutate(mod, kind, site % n_sites)
    # Renaming the mutated copy too makes sure the difference is not carried by identity.
    mutated = rename_module(mutated, random.Random(seed))
    assert structural_hash(mutated) != structural_hash(mod)
    assert not structural_equal(mutated, mod)
    assert structural_hash(mutated, "ignore-tensor") != structural_hash(mod, "ignore-tensor")


@pytest.mark.parametrize("kind", MUTATION_KINDS)
def test_every_mutation_kind_has_sites_in_some_sample(kind: str) -> None:
    # Guards the property test above against silently testing nothing for a kind.
    assert any(count_sites(sample(name), kind) > 0 for name in SAMPLE_NAMES)


@pytest.mark.parametrize("kind", MUTATION_KINDS)
def test_every_site_of_a_kind_is_seen_by_the_hash(kind: str) -> None:
    # Exhaustive over the conv sample (two blocks, pad and reduction: every site kind occurs).
    mod = sample("conv2d_nhwc")
    base = structural_hash(mod)
    hashes = {base}
    n = count_sites(mod, kind)
    for site in range(n):
        mutated = mutate(mod, kind, site)
        h = structural_hash(mutated)
        assert h != base, (kind, site)
        assert not structural_equal(mutated, mod)
        hashes.add(h)
    assert len(hashes) == n + 1  # distinct sites give distinct modules


@pytest.mark.parametrize("zoo_name", _zoo_names())
def test_zoo_workloads_rename_and_mutate(zoo_name: str) -> None:
    from msdb.ir import zoo

    mod = zoo.workload(zoo_name)
    rng = random.Random(zoo_name)
    renamed = rename_module(mod, rng)
    assert structural_hash(renamed) == structural_hash(mod)
    for kind in MUTATION_KINDS:
        n = count_sites(mod, kind)
        if n:
            assert structural_hash(mutate(mod, kind, rng.randrange(n))) != structural_hash(mod), kind
