"""Measurement claims (docs/architecture.md, "Team scale"): a candidate is claimed in the database
before it is measured, so tuners sharing a database never measure it twice. Claims on SQLite and
on a real PostgreSQL server (and in the process for a memory database); a seeded search that
meets another tuner's claims measures other candidates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from msdb import SQLiteDatabase
from msdb.database import claims
from msdb.database import models as M
from msdb.database.memory import MemoryDatabase
from msdb.database.union import OrderedUnionDatabase
from msdb.ir import zoo
from msdb.tuner.search.replay import module_key
from msdb.tuner.tune import tune_tir

TARGET = "llvm -num-cores=1"
MOD = zoo.build("GMM", 1, 16, 16, 16)


def _two_handles(kind: str, shared_url: str) -> tuple[Any, Any]:
    """Two tuners' views of one database (one object for a memory database: claims in the process;
    a union over the shared database claims in it, its first child)."""
    if kind == "memory":
        db = MemoryDatabase()
        return db, db
    if kind == "union":
        return OrderedUnionDatabase(SQLiteDatabase(shared_url), MemoryDatabase()), SQLiteDatabase(shared_url)
    return SQLiteDatabase(shared_url), SQLiteDatabase(shared_url)


def _claim_rows(db: SQLiteDatabase) -> dict[str, tuple[str, float | None]]:
    c = M.measurement_claim.c
    with db.engine.connect() as conn:
        return {row.module_key: (row.owner, row.expires_at)
                for row in conn.execute(select(c.module_key, c.owner, c.expires_at))}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["memory", "sql", "sql-portable", "union"])
def test_a_claim_is_won_once_and_a_measured_one_stays(kind: str, shared_url: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if kind == "sql-portable":  # the path for a dialect without ON CONFLICT, run on these two
        monkeypatch.setattr(claims, "_insert_ignoring_conflicts", lambda conn: None)
    a, b = _two_handles(kind, shared_url)
    try:
        assert a.claim_candidates(MOD, TARGET, ["k1", "k2"], owner="A") == {"k1", "k2"}
        assert b.claim_candidates(MOD, TARGET, ["k2", "k3"], owner="B") == {"k3"}
        assert a.claim_candidates(MOD, TARGET, ["k1", "k3"], owner="A") == {"k1"}  # its own open claim again
        a.settle_claims(MOD, TARGET, owner="A", measured=["k1"], unmeasured=["k2"])
        assert b.claim_candidates(MOD, TARGET, ["k1", "k2"], owner="B") == {"k2"}  # k2 was given back
        assert a.claim_candidates(MOD, TARGET, ["k1"], owner="A") == set()  # measured: nobody measures it again
        assert a.claim_candidates(MOD, "cuda", ["k1"], owner="A") == {"k1"}  # another target is another candidate
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("path", ["on-conflict", "portable"])
def test_a_claim_past_its_lease_is_taken_over_and_a_measured_one_never(path: str, shared_url: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A tuner that crashed leaves claims whose lease ends; measured claims have no lease."""
    if path == "portable":
        monkeypatch.setattr(claims, "_insert_ignoring_conflicts", lambda conn: None)
    crashed, alive = SQLiteDatabase(shared_url), SQLiteDatabase(shared_url)
    try:
        assert crashed.claim_candidates(MOD, TARGET, ["k1", "k2"], owner="crashed", lease_s=-1.0) == {"k1", "k2"}
        crashed.settle_claims(MOD, TARGET, owner="crashed", measured=["k2"])
        assert alive.claim_candidates(MOD, TARGET, ["k1", "k2"], owner="alive") == {"k1"}
        rows = _claim_rows(alive)
        assert rows["k1"][0] == "alive" and rows["k1"][1] is not None
        assert rows["k2"] == ("crashed", None)
    finally:
        crashed.close()
        alive.close()


def _measured_keys(on_round_keys: list[str]) -> Any:
    return lambda task, candidates, results: on_round_keys.extend(
        module_key(c.sch.mod) for c in candidates[:len(results)])


@pytest.mark.slow
@pytest.mark.parametrize("kind, strategy", [("sqlite", "replay-trace"), ("sqlite", "replay-func"),
                                            ("sqlite", "evolutionary"), ("postgres", "replay-trace")])
def test_a_search_measures_other_candidates_than_another_tuners_claims(kind: str, strategy: str, tmp_path: Path,
                                                                       request: pytest.FixtureRequest) -> None:
    """The same seeded search twice: once alone, once after another tuner claimed its first two
    candidates. The second run measures none of them, says it skipped two, and leaves claims on
    exactly what it measured (the candidate cut from its last round is given back). Every
    strategy claims through `SearchStrategy._claim`; PostgreSQL's claims are the same rows."""
    shared_url = str(tmp_path / "team.sqlite") if kind == "sqlite" else request.getfixturevalue("postgres_server").url()
    alone: list[str] = []
    tune_tir(MOD, TARGET, MemoryDatabase(), 3, 4, seed=3, strategy=strategy, cost_model="random",
             check_best=False, on_round=_measured_keys(alone))
    assert len(set(alone)) == 3
    other, db = SQLiteDatabase(shared_url), SQLiteDatabase(shared_url)
    try:
        assert other.claim_candidates(MOD, TARGET, alone[:2], owner="other") == set(alone[:2])
        shared: list[str] = []
        result = tune_tir(MOD, TARGET, db, 3, 4, seed=3, strategy=strategy, cost_model="random",
                          check_best=False, on_round=_measured_keys(shared))
        assert result.tasks[0].claimed_elsewhere == 2
        assert len(shared) == 3 and not set(shared) & set(alone[:2]) and alone[2] in shared
        assert len(db.get_all_tuning_records()) == 3
        rows = _claim_rows(db)
        assert {key: owner for key, (owner, _) in rows.items()} == {
            **{key: "other" for key in alone[:2]}, **{key: rows[shared[0]][0] for key in shared}}
        assert all(rows[key][1] is None for key in shared)  # measured: permanent
    finally:
        other.close()
        db.close()


@pytest.mark.slow
def test_msdb_tune_says_how_many_candidates_another_tuner_had_claimed(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from msdb.cli.main import cli
    from msdb.ir import to_script

    alone: list[str] = []
    tune_tir(MOD, TARGET, MemoryDatabase(), 4, 4, seed=5, strategy="replay-trace", cost_model="random",
             check_best=False, on_round=_measured_keys(alone))
    path = tmp_path / "team.sqlite"
    other = SQLiteDatabase(path)
    try:
        assert other.claim_candidates(MOD, TARGET, alone[1:4], owner="other") == set(alone[1:4])
    finally:
        other.close()
    workload = tmp_path / "gmm16.py"
    workload.write_text(to_script(MOD))
    result = CliRunner().invoke(cli, ["tune", str(path), str(workload), "--target", TARGET, "--trials", "4",
                                      "--per-iter", "4", "--strategy", "replay-trace", "--cost-model", "random",
                                      "--seed", "5", "--workers", "1"], prog_name="msdb")
    assert result.exit_code == 0, result.output
    assert "Total trials: 4" in result.output
    assert "gmm16: 3 candidate(s) skipped, claimed by another tuner" in result.output, result.output
