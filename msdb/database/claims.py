"""Measurement claims: several tuners on one database never measure the same candidate twice.

A search claims the candidates it is about to measure, keyed by (workload, target, module key);
a claim another tuner holds is lost and the candidate skipped. After measuring, the search
settles: measured claims become permanent, the rest are given back. SQL databases keep claims as
leased rows (`CLAIM_LEASE_S`), the others in the process (`ProcessClaims`). Why leases and
permanent claims: docs/architecture.md, "Team scale".
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from sqlalchemy import and_, delete, insert, select, update

from msdb.database import models as M

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["CLAIM_LEASE_S", "ProcessClaims", "process_claims", "claim_rows", "settle_rows", "database_time"]

#: How long an unmeasured claim holds (seconds): longer than a measurement round on a busy farm
#: (64 candidates, each built and timed within the builder's and runner's timeouts), short
#: enough that a crashed tuner's candidates come free within the hour.
CLAIM_LEASE_S = 3600.0

_CHUNK = 500  # keys per statement (SQLite's bound-parameter limit stays far away)


def database_time(conn: Connection) -> float:
    """Now, in unix seconds, by the database's clock where it has one that every tuner shares
    (PostgreSQL); by this machine's for a SQLite file, which only this machine's processes open."""
    if conn.dialect.name == "postgresql":
        return float(conn.exec_driver_sql("SELECT extract(epoch FROM clock_timestamp())").scalar_one())
    return time.time()


def _insert_ignoring_conflicts(conn: Connection) -> Any:
    """`INSERT ... ON CONFLICT DO NOTHING` of the connection's dialect, or None for a dialect
    without one."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(M.measurement_claim).on_conflict_do_nothing()
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(M.measurement_claim).on_conflict_do_nothing()
    return None


def claim_rows(conn: Connection, workload_id: int, target_id: int, keys: Sequence[str], owner: str,
               lease_s: float = CLAIM_LEASE_S) -> set[str]:
    """Claim `keys` of (workload_id, target_id) for `owner` inside the caller's write transaction;
    the keys it now holds: new claims, its own earlier ones still open, and claims whose lease
    ended (taken over). Measured claims and other owners' live ones are lost.

    On SQLite (3.35 or newer, for RETURNING) and PostgreSQL the primary key decides: `INSERT ...
    ON CONFLICT DO NOTHING RETURNING`, then one `UPDATE ... RETURNING` for open claims that may
    change hands. Another dialect reads the chunk's claims and writes what it won, relying on the
    write transaction being the only writer (docs/architecture.md, "Databases")."""
    now = database_time(conn)
    expires = now + lease_s
    won: set[str] = set()
    unique = list(dict.fromkeys(keys))
    statement = _insert_ignoring_conflicts(conn)
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start:start + _CHUNK]
        if statement is not None:
            won |= _claim_chunk(conn, statement, workload_id, target_id, chunk, owner, now, expires)
        else:
            won |= _claim_chunk_portably(conn, workload_id, target_id, chunk, owner, now, expires)
    return won


def _claim_chunk(conn: Connection, statement: Any, workload_id: int, target_id: int, chunk: list[str], owner: str,
                 now: float, expires: float) -> set[str]:
    c = M.measurement_claim.c
    rows = [{"workload_id": workload_id, "target_id": target_id, "module_key": key, "owner": owner,
             "expires_at": expires} for key in chunk]
    won = {str(row[0]) for row in conn.execute(statement.values(rows).returning(c.module_key))}
    rest = [key for key in chunk if key not in won]
    if rest:
        # one's own open claims, and claims whose lease ended, change hands in one statement
        taken = conn.execute(update(M.measurement_claim).where(
            c.workload_id == workload_id, c.target_id == target_id, c.module_key.in_(rest),
            c.expires_at.is_not(None), (c.owner == owner) | (c.expires_at < now),
        ).values(owner=owner, expires_at=expires).returning(c.module_key))
        won.update(str(row[0]) for row in taken)
    return won


def _claim_chunk_portably(conn: Connection, workload_id: int, target_id: int, chunk: list[str], owner: str,
                          now: float, expires: float) -> set[str]:
    c = M.measurement_claim.c
    scope = and_(c.workload_id == workload_id, c.target_id == target_id)
    held = {row.module_key: row for row in conn.execute(
        select(c.module_key, c.owner, c.expires_at).where(scope, c.module_key.in_(chunk)))}
    fresh = [key for key in chunk if key not in held]
    open_ = [key for key, row in held.items()
             if row.expires_at is not None and (row.owner == owner or row.expires_at < now)]
    if fresh:
        conn.execute(insert(M.measurement_claim), [
            {"workload_id": workload_id, "target_id": target_id, "module_key": key, "owner": owner,
             "expires_at": expires} for key in fresh])
    if open_:
        conn.execute(update(M.measurement_claim).where(scope, c.module_key.in_(open_))
                     .values(owner=owner, expires_at=expires))
    return set(fresh) | set(open_)


def settle_rows(conn: Connection, workload_id: int, target_id: int, owner: str, measured: Iterable[str],
                unmeasured: Iterable[str]) -> None:
    """`owner`'s claims on `measured` keys become permanent; those on `unmeasured` are given back."""
    c = M.measurement_claim.c
    mine = and_(c.workload_id == workload_id, c.target_id == target_id, c.owner == owner, c.expires_at.is_not(None))
    done = list(dict.fromkeys(measured))
    back = list(dict.fromkeys(unmeasured))
    for start in range(0, len(done), _CHUNK):
        conn.execute(update(M.measurement_claim).where(mine, c.module_key.in_(done[start:start + _CHUNK]))
                     .values(expires_at=None))
    for start in range(0, len(back), _CHUNK):
        conn.execute(delete(M.measurement_claim).where(mine, c.module_key.in_(back[start:start + _CHUNK])))


class ProcessClaims:
    """Claims held in this process, for databases without SQL (module docstring): key ->
    (owner, measured). Thread-safe; there is no lease, a process holding claims is alive."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str, str], tuple[str, bool]] = {}

    def claim(self, scope: tuple[str, str], keys: Sequence[str], owner: str) -> set[str]:
        won: set[str] = set()
        with self._lock:
            for key in keys:
                held = self._claims.get((*scope, key))
                if held is None or (held[0] == owner and not held[1]):
                    self._claims[(*scope, key)] = (owner, False)
                    won.add(key)
        return won

    def settle(self, scope: tuple[str, str], owner: str, measured: Iterable[str], unmeasured: Iterable[str]) -> None:
        with self._lock:
            for key in measured:
                if self._claims.get((*scope, key)) == (owner, False):
                    self._claims[(*scope, key)] = (owner, True)
            for key in unmeasured:
                if self._claims.get((*scope, key)) == (owner, False):
                    del self._claims[(*scope, key)]


def process_claims(database: object) -> ProcessClaims:
    """The in-process claims of a database object (made on first use)."""
    claims = getattr(database, "_process_claims", None)
    if claims is None:
        with _MAKING:
            claims = getattr(database, "_process_claims", None)
            if claims is None:
                claims = ProcessClaims()
                setattr(database, "_process_claims", claims)
    return claims


_MAKING = threading.Lock()
