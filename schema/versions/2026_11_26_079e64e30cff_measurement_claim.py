"""Add measurement_claim: which tuner measures which candidate (issue 14, several tuners on one database).

Several `msdb tune` processes tuning one workload for one target into one database must never
measure the same candidate twice. A search claims each candidate before it is measured: a row
keyed by (workload, target, module key: the structural hash of the post-processed module, the
search's dedup key), inserted with ON CONFLICT DO NOTHING, so the primary key decides which
process won. `expires_at` is the lease: a claim still unmeasured at that time (its tuner crashed)
may be taken over; it is NULL once the candidate's record is committed, and the claim then stays,
so a tuner that read the measured modules before that commit still skips it
(`msdb.database.claims`).

Revision ID: 079e64e30cff
Revises: 8c4f2a61d0b3
Create Date: 2026-11-26 22:00:00

"""
from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "079e64e30cff"
down_revision: Union[str, Sequence[str], None] = "8c4f2a61d0b3"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        "measurement_claim",
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("module_key", sa.String(length=16), nullable=False,
                  comment="structural hash of the post-processed module (the search's dedup key)"),
        sa.Column("owner", sa.String(length=32), nullable=False, comment="the claiming search session"),
        sa.Column("expires_at", sa.Float(), nullable=True,
                  comment="unix time the lease ends (database clock); NULL once measured"),
        sa.ForeignKeyConstraint(["workload_id"], ["workload.id"],
                                name=op.f("fk_measurement_claim_workload_id_workload")),
        sa.ForeignKeyConstraint(["target_id"], ["target.id"], name=op.f("fk_measurement_claim_target_id_target")),
        sa.PrimaryKeyConstraint("workload_id", "target_id", "module_key", name=op.f("pk_measurement_claim")),
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table("measurement_claim")
