"""The `target` table: each distinct canonical target config stored once, found by config and
matched against a query target with msdb's policy (docs/targets.md, "In the databases").

The table is small (a few rows per device a team tunes for) and rows are never deleted, so
`TargetTable` keeps all of them in memory: a lookup by config or id, and the matching of a
query target against every stored target (`Target.matches`), cost no SQL; `refresh` reads only
the rows added since the last look. A record without a target points at the row whose config
is `NULL_TARGET` (kind ''), so `target_id` is never NULL and plain equality works in every
query.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable

from sqlalchemy import func, select

from msdb.database import models as M
from msdb.database.rows import insert_row
from msdb.records import Target

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["NULL_TARGET", "MAX_TARGET_ID", "TargetTable", "target_of_config"]

#: The config of the target row that records without a target point at.
NULL_TARGET = "null"
#: The newest target row's id (rows are never deleted: a larger id means new rows).
MAX_TARGET_ID = select(func.max(M.target.c.id))


def target_of_config(config: str) -> Target | None:
    """The target of a stored config (None for `NULL_TARGET`)."""
    return None if config == NULL_TARGET else Target(json.loads(config))


class TargetTable:
    """The target rows of one database, cached (see the module docstring)."""

    def __init__(self) -> None:
        self.targets: dict[int, Target | None] = {}
        self.ids: dict[str, int] = {}
        self.max_id = 0

    def refresh(self, conn: Connection, newest: int | None = None) -> None:
        """Load the rows added since the last look; `newest`: the newest row id when the caller
        already read it (`MAX_TARGET_ID`)."""
        if newest is None:
            newest = conn.execute(MAX_TARGET_ID).scalar()
        if newest is None or newest <= self.max_id:
            return
        t = M.target.c
        for row in conn.execute(select(t.id, t.config).where(t.id > self.max_id)):
            self.targets[row.id] = target_of_config(row.config)
            self.ids[row.config] = row.id
        self.max_id = newest

    def matching(self, query: Target | None) -> list[int]:
        """Ids of the known rows whose target `query` accepts (every row for None), ascending.
        Call `refresh` first for rows other connections added."""
        if query is None:
            return sorted(self.targets)
        return sorted(tid for tid, target in self.targets.items() if query.matches(target))

    def stored_id(self, conn: Connection, target: Target | None) -> int | None:
        """The id of `target`'s row (its exact config), None when no row has it: the cache,
        then the rows other connections added since the last look."""
        config = target.canonical_json() if target is not None else NULL_TARGET
        if config not in self.ids:
            self.refresh(conn)
        return self.ids.get(config)

    def row_id(self, conn: Connection, target: Target | None, undo: list[Callable[[], None]]) -> int:
        """The id of `target`'s row, inserted if new, inside `conn`'s write transaction. `undo`
        gets what forgets the insert if that transaction rolls back."""
        config = target.canonical_json() if target is not None else NULL_TARGET
        known = self.ids.get(config)
        if known is not None:
            return known
        t = M.target.c
        target_id = conn.execute(select(t.id).where(t.config == config)).scalar()
        if target_id is None:
            key = target.match_key if target is not None else None
            target_id = inserted = insert_row(conn, M.target, {
                "config": config, "kind": key.kind if key else "", "arch": key.arch if key else "",
                "isa": key.isa if key else "", "device": key.device if key else ""})

            def forget() -> None:
                self.ids.pop(config, None)
                self.targets.pop(inserted, None)

            undo.append(forget)
        self.ids[config] = int(target_id)
        self.targets[int(target_id)] = target
        return int(target_id)

    def row_id_for_config(self, conn: Connection, config: str, undo: list[Callable[[], None]]) -> int:
        """`row_id` for a stored config (a merge copies configs from another database)."""
        known = self.ids.get(config)
        if known is not None:
            return known
        return self.row_id(conn, target_of_config(config), undo)
