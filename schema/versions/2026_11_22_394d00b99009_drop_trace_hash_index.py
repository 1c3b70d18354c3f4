"""Drop the index on tuning_record.trace_hash.

No query looks records up by trace hash alone: deduplication (import, merge, verify) reads the
records of one workload through `ix_tuning_record_top_k` and compares `trace_hash` in memory.
The index only cost writes: every bulk-committed record added a random-position entry to a
second B-tree, a third of the SQLite time of a bulk commit. The column itself stays.

Revision ID: 394d00b99009
Revises: 2841e53b42af
Create Date: 2026-11-22 02:00:00

"""
from __future__ import annotations

from typing import Sequence, Union

from alembic import op

# revision identifiers, used by Alembic.
revision: str = "394d00b99009"
down_revision: Union[str, Sequence[str], None] = "2841e53b42af"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.drop_index("ix_tuning_record_trace_hash", table_name="tuning_record")


def downgrade() -> None:
    """Downgrade schema."""
    op.create_index("ix_tuning_record_trace_hash", "tuning_record", ["trace_hash"])
