"""Workload families in the databases: every path that stores a workload fills
`family_hash`, the migration backfills databases made before it, and `relatives` answers from one
indexed query on SQLite and PostgreSQL (and from the stores of the other views)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

import pytest
from sqlalchemy import create_engine, event, insert, select, text

from msdb.database import Database, InvalidQuery, MemoryDatabase, SQLDatabase, SQLiteDatabase, merge_databases
from msdb.database import models as M
from msdb.database.migrate import upgrade
from msdb.database.pulled import WORKLOAD_FIELDS, stage_rows, staging_database
from msdb.database.rows import opaque_workload_row, workload_row
from msdb.hashing import family_key
from msdb.ir import zoo
from msdb.records import Workload

from .helpers import CPU, GPU, matmul, record

#: The schema revision before the family columns.
PREVIOUS_HEAD = "079e64e30cff"


def fill(db: Database) -> tuple[Workload, Workload, Workload, Workload]:
    """Matmuls of sizes 16, 32 and 64 (one family; 32 with CPU records, 64 with a GPU record) and
    a batch matmul (another family)."""
    small, mid, large = (db.commit_workload(matmul(n=n)) for n in (16, 32, 64))
    other = db.commit_workload(zoo.build("GMM", 1, 16, 16, 16))
    db.commit_tuning_records([record(mid, [2e-3]), record(mid, [1e-3], inner=2), record(large, [5e-3], GPU)])
    return small, mid, large, other


@pytest.mark.slow
def test_relatives_are_the_family_without_itself_with_their_best_record(view: Callable[..., Database]) -> None:
    db = view()
    small, mid, large, other = fill(db)
    found = db.relatives(small, CPU)
    assert [r.workload.shash for r in found] == [mid.shash, large.shash]
    assert found[0].best is not None and found[0].best.mean_run_secs == pytest.approx(1e-3)
    assert found[0].best.workload.shash == mid.shash  # measured on the relative, never on `small`
    assert found[1].best is None  # its only record is for the GPU
    assert found[0].extents[:6] == (0, 32, 0, 32, 0, 32) and len(found[0].extents) == len(family_key(small.mod).extents)
    # any target: the relative with a record comes first whatever the commit order
    assert [(r.workload.shash, r.best is not None) for r in db.relatives(mid)] == [(large.shash, True),
                                                                                    (small.shash, False)]
    assert [r.workload.shash for r in db.relatives(matmul(n=8), GPU)] == [large.shash, small.shash, mid.shash]
    assert [r.workload.shash for r in db.relatives(small, CPU, limit=1)] == [mid.shash]
    assert db.relatives(small, limit=0) == []
    assert db.relatives(other) == []


@pytest.mark.parametrize("limit", [-1, 1.5, True])
def test_a_bad_limit_is_refused(limit: Any) -> None:
    with pytest.raises(InvalidQuery, match="limit"):
        MemoryDatabase().relatives(matmul(), limit=limit)


def test_every_stored_row_has_its_family(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "a.db")
    small, mid, *_ = fill(db)
    db.add_task("model", "t", matmul(n=48))
    with db.engine.connect() as conn:
        rows = conn.execute(select(M.workload.c.shash, M.workload.c.family_hash, M.workload.c.family_extents)).all()
    assert len(rows) == 5
    for row in rows:
        stored = next(w for w in db.workloads() if w.shash == row.shash)
        key = family_key(stored.mod)
        assert (row.family_hash, json.loads(row.family_extents)) == (key.hash, list(key.extents))
    db.close()


def relatives_sql(db: SQLiteDatabase, workload: Workload) -> tuple[str, Any]:
    """The first statement (and parameters) `db.relatives(workload, CPU)` sends for the family
    (the relatives with a record), as the driver got it."""
    sent: list[tuple[str, Any]] = []

    def spy(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if "family_hash" in statement and "best_id" in statement:
            sent.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", spy)
    try:
        db.relatives(workload, CPU)
    finally:
        event.remove(db.engine, "before_cursor_execute", spy)
    assert 1 <= len(sent) <= 2  # those with a record, then (fewer than the limit) those without
    return sent[0]


def test_relatives_is_an_indexed_walk_of_the_family_on_sqlite(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "a.db")
    small, *_ = fill(db)
    statement, parameters = relatives_sql(db, small)
    with db.engine.connect() as conn:
        plan = " | ".join(row[3] for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))
    assert "USING INDEX ix_workload_family_hash (family_hash=?)" in plan, plan
    assert "ix_tuning_record_top_k" in plan, plan
    db.close()


def test_relatives_is_an_indexed_walk_of_the_family_on_postgresql(postgres_url: str) -> None:
    db = SQLDatabase(postgres_url)
    small, mid, *_ = fill(db)
    statement, parameters = relatives_sql(db, small)
    with db.engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")  # five rows: the planner would scan them otherwise
        plan = "\n".join(conn.exec_driver_sql("EXPLAIN " + statement, parameters).scalars())
    assert "ix_workload_family_hash" in plan, plan
    assert "ix_tuning_record_top_k" in plan, plan
    assert [r.workload.shash for r in db.relatives(small, CPU)][0] == mid.shash
    db.close()


def test_merge_copies_the_family(tmp_path: Path) -> None:
    src = SQLiteDatabase(tmp_path / "src.db")
    small, mid, large, _ = fill(src)
    dest = SQLiteDatabase(tmp_path / "dest.db")
    dest.commit_workload(matmul(n=128))
    merge_databases(dest, SQLiteDatabase(tmp_path / "src.db", read_only=True))
    assert {r.workload.shash for r in dest.relatives(matmul(n=128))} == {small.shash, mid.shash, large.shash}
    src.close()
    dest.close()


def test_a_pull_computes_the_family_of_hub_rows_that_lack_it(tmp_path: Path) -> None:
    """A hub of an older msdb serves workload rows without the family columns; the staged copy
    has the key this msdb computes from the IR."""
    local = SQLiteDatabase(tmp_path / "local.db")
    source_id = local.add_source("pull", "http://hub.example/#after=0")
    hub_row = {name: value for name, value in workload_row(matmul(n=24), hashes=Workload(matmul(n=24)).hashes,
                                                           name="mm").items() if name in WORKLOAD_FIELDS}
    staging = staging_database()
    stage_rows(local, staging, source_id, {7: hub_row}, {}, [])
    with staging.engine.connect() as conn:
        family = conn.execute(select(M.workload.c.family_hash).where(M.workload.c.id == 7)).scalar()
    assert family == family_key(matmul(n=24)).hash
    staging.close()
    local.close()


def test_an_opaque_workload_has_no_family_and_no_relatives(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "a.db")
    fill(db)
    row = opaque_workload_row(tvm_shash="12345", payload="AAAA", payload_kind="legacy-graph", reason="old")
    assert row["family_hash"] is None and row["family_extents"] is None
    with db.write_transaction() as conn:
        conn.execute(insert(M.workload).values(**row))
    opaque = next(w for w in db.workloads() if w.tvm_shash == "12345")
    assert db.relatives(opaque) == []
    db.close()


# ---- the migration: databases made before the family columns get them, filled ----

def _rows_at_previous_head(conn: Any) -> dict[str, str | None]:
    """Upgrade to the revision before the family columns and store rows as that msdb did: two
    matmuls, an opaque payload and a row whose script no longer parses (no blob). Their
    structural hash -> the family the migration must give them."""
    upgrade(conn, PREVIOUS_HEAD)
    expected: dict[str, str | None] = {}
    for n in (16, 32):
        row = workload_row(matmul(n=n), hashes=Workload(matmul(n=n)).hashes, name=f"mm{n}")
        expected[row["shash"]] = row.pop("family_hash")
        row.pop("family_extents")
        if n == 32:
            row.update(ir_blob=None, ir_format=None)  # read from the script
        conn.execute(insert(M.workload).values(**row))
    opaque = opaque_workload_row(tvm_shash="999", payload="AAAA", payload_kind="legacy-graph", reason="old")
    broken = workload_row(matmul(n=8), hashes={"structural": "b" * 16, "ignore-tensor": "b" * 16,
                                               "anchor-block": "b" * 16}, name="broken")
    broken.update(script="this is not TVMScript", ir_blob=None, ir_format=None)
    for row in (opaque, broken):
        expected[row["shash"]] = None
        row.pop("family_hash")
        row.pop("family_extents")
        conn.execute(insert(M.workload).values(**row))
    return expected


def _check_backfill(db: SQLiteDatabase, expected: dict[str, str | None]) -> None:
    with db.engine.connect() as conn:
        got = {row.shash: row.family_hash for row in conn.execute(select(M.workload.c.shash, M.workload.c.family_hash))}
        extents = conn.execute(select(M.workload.c.family_extents).where(M.workload.c.name == "mm32")).scalar()
    assert got == expected
    assert json.loads(extents) == list(family_key(matmul(n=32)).extents)
    mm16 = next(w for w in db.workloads() if w.name == "mm16")
    assert [r.workload.name for r in db.relatives(mm16)] == ["mm32"]


def test_the_migration_backfills_a_sqlite_database_made_before_it(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        expected = _rows_at_previous_head(conn)
    engine.dispose()
    with caplog.at_level(logging.WARNING):
        db = SQLiteDatabase(path)  # opening upgrades it
    assert any("no family key" in message for message in caplog.messages)
    _check_backfill(db, expected)
    db.close()


def test_the_migration_backfills_a_postgresql_database_made_before_it(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    with engine.begin() as conn:
        expected = _rows_at_previous_head(conn)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == PREVIOUS_HEAD
    engine.dispose()
    db = SQLDatabase(postgres_url)
    _check_backfill(db, expected)
    db.close()
