"""`msdb pull HUB_URL postgresql+psycopg://...`: a hub pulled into a team server holds
what the hub's database holds, and a second pull adds nothing. A real `msdb serve` of a real
publish directory, and a real PostgreSQL server (tests/postgres_server.py)."""

from __future__ import annotations

import pytest

from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlalchemy import create_engine, text

from msdb.cli.main import cli
from tests.database.conftest import postgres_server  # noqa: F401 - the session's one PostgreSQL server
from tests.hub.hubs import contents, hub_server, make_team_db, published

#: `tests.hub.hubs.contents`' queries, run through SQLAlchemy on any database URL.
_WORKLOADS = ("SELECT shash, ignore_tensor_hash, anchor_hash, name, flops, script, ir_format, ir_blob, tvm_payload, "
              "tvm_shash FROM workload")
_RECORDS = ("SELECT w.shash, t.config, r.trace, r.trace_hash, r.run_secs, r.mean_run_secs, r.is_valid, r.args_info "
            "FROM tuning_record r JOIN workload w ON w.id = r.workload_id JOIN target t ON t.id = r.target_id")
_TASKS = ("SELECT m.name, k.name, w.shash, k.weight FROM task k JOIN model m ON m.id = k.model_id "
          "JOIN workload w ON w.id = k.workload_id")


def _server_contents(url: str) -> tuple[list[tuple[Any, ...]], ...]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            workloads, records, tasks = (
                sorted(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                       for row in conn.execute(text(sql))) for sql in (_WORKLOADS, _RECORDS, _TASKS))
            # is_valid: PostgreSQL's booleans against SQLite's 0/1, compared as SQLite stores them
            records = [(*row[:6], int(row[6]), row[7]) for row in records]
            return workloads, records, tasks
    finally:
        engine.dispose()


@pytest.mark.slow
def test_pull_into_postgresql_holds_the_hubs_records_and_again_adds_nothing(
        tmp_path: Path, postgres_server: Any) -> None:  # noqa: F811 - the fixture imported above
    team = make_team_db(tmp_path / "team.sqlite", ("team_a",))
    hub = published(team, tmp_path / "hub")
    server = postgres_server.url()
    with hub_server(hub, tmp_path / "serve.log") as url:
        first = CliRunner().invoke(cli, ["pull", url, server], prog_name="msdb")
        assert first.exit_code == 0, first.output
        assert "128 records read" in first.output and "128 new, 0 duplicate" in first.output, first.output
        again = CliRunner().invoke(cli, ["pull", url, server], prog_name="msdb")
        assert again.exit_code == 0, again.output
        assert "0 records read" in again.output, again.output
    pulled = _server_contents(server)
    assert pulled == contents(team)
    assert pulled[0] and len(pulled[1]) == 128 and pulled[2]  # workloads, records, and the model's tasks
