"""`RemoteDatabase`: a hub read as a `Database` over HTTP, the same answers as the database it
publishes, target-aware; and as the shared layer of `OrderedUnionDatabase(local, remote)`.
The hub is a real `msdb serve` subprocess."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from msdb.database import OrderedUnionDatabase, SQLiteDatabase
from msdb.database.errors import ReadOnlyDatabase
from msdb.hub import RemoteDatabase
from msdb.ir import to_script
from msdb.records import Target, TuningRecord
from msdb.hub.client import HubError
from tests.hub.hubs import SERVERS, down_url, fake_hub, hub_server, make_team_db, published

LLVM = "llvm -mtriple=x86_64-conda-linux-gnu"


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("team")
    db = make_team_db(root / "team.sqlite")
    return db, published(db, root / "hub")


@pytest.fixture(scope="module", params=SERVERS)
def hub(team: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
        ) -> Iterator[str]:
    with hub_server(team[1], tmp_path_factory.mktemp("log") / "serve.log", request.param) as url:
        yield url


def _key(records: list[TuningRecord]) -> list[tuple[object, ...]]:
    return [(r.workload.hash(), str(r.target), r.mean_run_secs, r.run_secs, r.trace_text, r.as_json()[1:])
            for r in records]


@pytest.mark.slow
def test_remote_answers_as_the_published_database(team: tuple[Path, Path], hub: str) -> None:
    local = SQLiteDatabase(team[0], read_only=True)
    remote = RemoteDatabase(hub)
    try:
        assert len(remote) == len(local) == 384
        workloads = local.workloads()
        assert len(workloads) == 5
        for workload in workloads:
            assert remote.has_workload(workload)
            for k in (1, 5, 200):
                assert _key(remote.get_top_k(workload, k)) == _key(local.get_top_k(workload, k))
                assert _key(remote.get_top_k(workload, k, LLVM)) == _key(local.get_top_k(workload, k, LLVM))
            assert remote.get_top_k(workload, 3, "cuda") == [] == local.get_top_k(workload, 3, "cuda")
            assert _key(remote.get_measured(workload)) == _key(local.get_measured(workload))
            best = remote.query_tuning_record(workload, LLVM)
            assert best is not None and _key([best]) == _key([local.query_tuning_record(workload, LLVM)])
            # the stored workload's IR comes from the hub, on first use
            assert to_script(best.workload.mod) == to_script(workload.mod)
        assert _key(remote.get_all_tuning_records()) == _key(local.get_all_tuning_records())
        # a schedule replays from the hub's IR
        assert remote.query_schedule(workloads[0], LLVM) is not None
    finally:
        local.close()


@pytest.mark.slow
def test_remote_is_read_only(team: tuple[Path, Path], hub: str) -> None:
    local = SQLiteDatabase(team[0], read_only=True)
    remote = RemoteDatabase(hub)
    try:
        workload = local.workloads()[0]
        with pytest.raises(ReadOnlyDatabase, match="is a hub, read-only"):
            remote.commit_workload(workload)
        with pytest.raises(ReadOnlyDatabase):
            remote.commit_tuning_record(local.get_top_k(workload, 1)[0])
    finally:
        local.close()


@pytest.mark.slow
def test_remote_lists_relatives_and_transfers_as_the_published_database(team: tuple[Path, Path], hub: str) -> None:
    """Transfer over a hub: the relatives of a workload nobody tuned (GMM at other sizes and
    batch; the hub has GMM 1x128x128x128) are the published database's, with the same best
    records, so a `TransferDatabase` over the hub re-fits the same trace as over the file; a
    target the hub has no record for gives relatives without records."""
    from msdb.database import TransferDatabase
    from msdb.ir import zoo

    unseen = zoo.build("GMM", 2, 64, 32, 64)
    local = SQLiteDatabase(team[0], read_only=True)
    remote = RemoteDatabase(hub)
    try:
        mine, theirs = local.relatives(unseen, LLVM), remote.relatives(unseen, LLVM)
        assert mine, "the team database holds a GMM"
        assert [(r.workload.shash, r.extents, _key([r.best]) if r.best else None) for r in theirs] == \
            [(r.workload.shash, r.extents, _key([r.best]) if r.best else None) for r in mine]
        assert all(r.best is None for r in remote.relatives(unseen, "cuda"))
        assert remote.relatives(unseen, LLVM, limit=0) == []
        over_hub, over_file = TransferDatabase(remote).answer(unseen, LLVM), TransferDatabase(local).answer(unseen, LLVM)
        assert over_hub.records and [r.trace_text for r in over_hub.records] == \
            [r.trace_text for r in over_file.records]
        assert over_hub.records[0].transfer.workload.shash == mine[0].workload.shash
    finally:
        local.close()


@pytest.mark.slow
def test_ordered_union_answers_from_local_first_then_the_hub(team: tuple[Path, Path], tmp_path: Path) -> None:
    published_db = SQLiteDatabase(team[0], read_only=True)
    local = SQLiteDatabase(tmp_path / "local.sqlite")
    try:
        workloads = published_db.workloads()
        mine, theirs = workloads[0], workloads[1]
        hub_best = published_db.get_top_k(mine, 1, LLVM)[0]
        # local knows `mine`, measured on a GPU (worse than anything the hub has)
        token = local.commit_workload(mine.mod)
        local_gpu = TuningRecord(hub_best.trace, token, [1.5], Target("cuda -arch=sm_80"), hub_best.args_info)
        local.commit_tuning_record(local_gpu)
        with hub_server(*_served(team, tmp_path)) as url:
            remote = RemoteDatabase(url)
            union = OrderedUnionDatabase(local, remote)
            # the local layer answers what it has ...
            got = union.query_tuning_record(mine, "cuda -arch=sm_80")
            assert got is not None and got.mean_run_secs == 1.5
            # ... target-aware: no local CPU record of `mine`, so the hub answers for llvm
            got = union.query_tuning_record(mine, LLVM)
            assert got is not None and _key([got]) == _key([hub_best])
            # a workload only the hub has
            got = union.query_tuning_record(theirs, LLVM)
            assert got is not None and _key([got]) == _key(published_db.get_top_k(theirs, 1, LLVM))
            # a target nobody has
            assert union.query_tuning_record(theirs, "cuda -arch=sm_80") is None
            assert union.get_top_k(theirs, 2, LLVM) == remote.get_top_k(theirs, 2, LLVM)
            # commits go to the local layer
            union.commit_tuning_record(TuningRecord(hub_best.trace, token, [2.5], Target("cuda -arch=sm_80"),
                                                    hub_best.args_info))
            assert len(local) == 2
        # answers already read are cached for the session: they survive the hub going away
        got = union.query_tuning_record(theirs, LLVM)
        assert got is not None and _key([got]) == _key(published_db.get_top_k(theirs, 1, LLVM))
    finally:
        local.close()
        published_db.close()


def _served(team: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    return team[1], tmp_path / "serve.log"


def test_a_bad_hub_is_one_clear_error(team: tuple[Path, Path]) -> None:
    local = SQLiteDatabase(team[0], read_only=True)
    try:
        workload = local.workloads()[0]
        url = down_url()
        with pytest.raises(HubError, match=f"hub {url} cannot be reached"):
            RemoteDatabase(url).get_top_k(workload, 1)
        with fake_hub("html") as url:
            with pytest.raises(HubError, match="text/html, not JSON"):
                OrderedUnionDatabase(SQLiteDatabase("sqlite://"), RemoteDatabase(url)).query_tuning_record(
                    workload, LLVM)
    finally:
        local.close()
