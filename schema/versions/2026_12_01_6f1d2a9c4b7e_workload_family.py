"""Add workload.family_hash and workload.family_extents: a shape-free key for every workload (issue 24).

A workload's family is its anchor block with loop extents, buffer shapes, the constants of the
index arithmetic and the index dtype abstracted (`msdb.hashing.family`): the same operator at
other sizes, batch sizes and index dtypes. Indexed, so "the records of this workload's
relatives" is one index lookup on SQLite and PostgreSQL. `family_extents` holds the abstracted
values as JSON, in walk order, for a distance between relatives.

Existing rows are backfilled from their stored IR (the blob, else the TVMScript:
`msdb.ir.codec.load_stored_ir`, the database's own reader), in batches; opaque rows (TVM
payloads msdb cannot decode) and rows whose IR cannot be read keep NULL: they have no
relatives. This migration imports msdb.ir and msdb.hashing, never msdb.database (the schema
package sits below it, docs/architecture.md, "Which way imports point"); the family key it
stores is this msdb's, and a later change to the family walk is a migration that recomputes it.

Revision ID: 6f1d2a9c4b7e
Revises: 079e64e30cff
Create Date: 2026-12-01 10:00:00

"""
from __future__ import annotations

import json
import logging
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "6f1d2a9c4b7e"
down_revision: Union[str, Sequence[str], None] = "079e64e30cff"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

logger = logging.getLogger("msdb.schema")

#: `workload.ir_format` of opaque rows starts with this (`msdb.database.rows.OPAQUE_PREFIX`, the
#: value as of this revision; a migration keeps its own copy of what it reads).
_OPAQUE_PREFIX = "opaque:"
_BATCH = 200

_workload = sa.table("workload", sa.column("id", sa.Integer()), sa.column("ir_format", sa.String()),
                     sa.column("ir_blob", sa.LargeBinary()), sa.column("script", sa.Text()),
                     sa.column("family_hash", sa.String()), sa.column("family_extents", sa.Text()))


def _family(row: sa.Row) -> tuple[str | None, str | None]:
    """(family_hash, family_extents JSON) of one stored row; (None, None) without readable IR."""
    from msdb.hashing.family import family_key
    from msdb.ir.codec import load_stored_ir

    if row.ir_format is not None and str(row.ir_format).startswith(_OPAQUE_PREFIX):
        return None, None
    try:
        key = family_key(load_stored_ir(row.ir_format, row.ir_blob, row.script, label=f"workload {row.id}"))
    except Exception as exc:  # noqa: BLE001 - one unreadable row must not stop the upgrade
        logger.warning("workload %s: no family key (%s: %s); left NULL", row.id, type(exc).__name__, str(exc)[:200])
        return None, None
    return key.hash, json.dumps(list(key.extents), separators=(",", ":"))


def _backfill() -> None:
    bind = op.get_bind()
    w = _workload.c
    last = 0
    while True:
        rows = bind.execute(sa.select(w.id, w.ir_format, w.ir_blob, w.script).where(w.id > last)
                            .order_by(w.id).limit(_BATCH)).all()
        if not rows:
            return
        for row in rows:
            family, extents = _family(row)
            if family is not None:
                bind.execute(sa.update(_workload).where(w.id == row.id)
                             .values(family_hash=family, family_extents=extents))
        last = int(rows[-1].id)


def upgrade() -> None:
    """Upgrade schema."""
    op.add_column("workload", sa.Column("family_hash", sa.String(length=16), nullable=True,
                                        comment="shape-free key of the anchor block (16 hex); NULL for opaque workloads"))
    op.add_column("workload", sa.Column("family_extents", sa.Text(), nullable=True,
                                        comment="JSON list of the sizes the family key abstracted, in walk order"))
    op.create_index(op.f("ix_workload_family_hash"), "workload", ["family_hash"])
    _backfill()


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_index(op.f("ix_workload_family_hash"), table_name="workload")
    if op.get_bind().dialect.name == "sqlite":
        # Batch mode would copy the table and rename the copy, which the views over `workload`
        # (best_record, workload_summary) refuse; SQLite >= 3.35 drops a column in place.
        for column in ("family_extents", "family_hash"):
            op.execute(f"ALTER TABLE workload DROP COLUMN {column}")
        return
    op.drop_column("workload", "family_extents")
    op.drop_column("workload", "family_hash")
