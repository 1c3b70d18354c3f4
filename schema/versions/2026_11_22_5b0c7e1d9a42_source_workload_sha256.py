"""Add source.workload_sha256: the digest of the workload file an import read.

An imported work_dir is two files. `source.sha256` has always held the record file's digest;
the workload file's (database_workload.json, where the payloads come from) was computed and
then dropped, so a source row could not prove which payloads its records were imported with.
Existing rows keep NULL: their workload files were not kept.

Revision ID: 5b0c7e1d9a42
Revises: 394d00b99009
Create Date: 2026-11-22 04:40:00

"""
from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "5b0c7e1d9a42"
down_revision: Union[str, Sequence[str], None] = "394d00b99009"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.add_column("source", sa.Column("workload_sha256", sa.String(length=64), nullable=True,
                                      comment="of an import's workload file"))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("source") as batch:
        batch.drop_column("workload_sha256")
