"""The collector is kept off the long-lived heap during a search round and is as it was after,
whether the round ends or raises; cyclic garbage made during the round is still collected."""

from __future__ import annotations

import gc
import weakref

import pytest

from msdb.tuner.search.collector import SEARCH_GEN0_THRESHOLD, collector_quiet


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_the_round_freezes_the_heap_and_everything_is_restored_after() -> None:
    before_threshold, before_frozen = gc.get_threshold(), gc.get_freeze_count()
    with collector_quiet():
        assert gc.get_threshold()[0] == max(before_threshold[0], SEARCH_GEN0_THRESHOLD)
        assert gc.get_threshold()[1:] == before_threshold[1:]
        assert gc.get_freeze_count() > before_frozen
        garbage = _Cycle()
        alive = weakref.ref(garbage)
        del garbage
    assert gc.get_threshold() == before_threshold
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert alive() is None  # a cycle made during the round is collected afterwards


def test_a_failing_round_restores_the_collector_too() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError, match="boom"):
        with collector_quiet():
            raise RuntimeError("boom")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_collection_turned_off_by_the_user_stays_off() -> None:
    before = gc.get_threshold()
    gc.set_threshold(0)
    try:
        with collector_quiet():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before)


def test_a_heap_frozen_before_the_round_stays_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_quiet():
            with collector_quiet():  # nested rounds leave it too
                pass
            assert gc.get_freeze_count() >= frozen
        assert gc.get_freeze_count() >= frozen > 0
    finally:
        gc.unfreeze()
