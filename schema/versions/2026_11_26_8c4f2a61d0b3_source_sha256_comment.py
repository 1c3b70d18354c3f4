"""The comment of source.sha256 says what it holds since 5b0c7e1d9a42: the record file's digest.

Revision 5b0c7e1d9a42 added `source.workload_sha256` and narrowed what `source.sha256` means in
the models, but the column was created without the comment the models give it. SQLite stores no column comments, so only
a PostgreSQL database (issue 14) differs; there the comment is updated. On SQLite this is a
no-op (batch mode would copy the table to change nothing it keeps).

Revision ID: 8c4f2a61d0b3
Revises: 5b0c7e1d9a42
Create Date: 2026-11-26 21:00:00

"""
from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "8c4f2a61d0b3"
down_revision: Union[str, Sequence[str], None] = "5b0c7e1d9a42"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

OLD: str | None = None  # created without a comment
NEW = "of the file the records came from (an import's record file)"


def _comment(comment: str | None, existing: str | None) -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    op.alter_column("source", "sha256", existing_type=sa.String(length=64), existing_nullable=True,
                    comment=comment, existing_comment=existing)


def upgrade() -> None:
    """Upgrade schema."""
    _comment(NEW, OLD)


def downgrade() -> None:
    """Downgrade schema."""
    _comment(OLD, NEW)
