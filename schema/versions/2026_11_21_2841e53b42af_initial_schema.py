"""Initial schema: workload, target, source, tuning_record, model, task; views best_record and
workload_summary.

Revision ID: 2841e53b42af
Revises:
Create Date: 2026-11-21 01:30:00

"""
from __future__ import annotations

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "2841e53b42af"
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# Best valid record per (workload, target): no better valid record of the same pair exists
# (lower mean, or equal mean and committed earlier). Written as NOT EXISTS rather than a window
# function so that a filter on the workload (WHERE shash = ...) reaches the index.
BEST_RECORD = """
CREATE VIEW best_record AS
SELECT
    r.id AS record_id,
    r.workload_id,
    w.name AS workload_name,
    w.shash,
    r.target_id,
    t.kind AS target_kind,
    t.arch AS target_arch,
    t.config AS target_config,
    r.mean_run_secs,
    r.mean_run_secs * 1000000.0 AS mean_us,
    CASE WHEN w.flops IS NOT NULL AND r.mean_run_secs > 0
         THEN w.flops / r.mean_run_secs / 1000000000.0 END AS gflops,
    r.source_id,
    r.trace
FROM tuning_record r
JOIN workload w ON w.id = r.workload_id
JOIN target t ON t.id = r.target_id
WHERE r.is_valid AND NOT EXISTS (
    SELECT 1 FROM tuning_record b
    WHERE b.workload_id = r.workload_id
      AND b.target_id = r.target_id
      AND b.is_valid
      AND (b.mean_run_secs < r.mean_run_secs OR (b.mean_run_secs = r.mean_run_secs AND b.id < r.id))
)
"""

# One row per workload: how many records, valid records, targets and models it has.
WORKLOAD_SUMMARY = """
CREATE VIEW workload_summary AS
SELECT
    w.id AS workload_id,
    w.name,
    w.shash,
    w.flops,
    (SELECT COUNT(*) FROM tuning_record r WHERE r.workload_id = w.id) AS n_records,
    (SELECT COUNT(*) FROM tuning_record r WHERE r.workload_id = w.id AND r.is_valid) AS n_valid,
    (SELECT COUNT(DISTINCT r.target_id) FROM tuning_record r WHERE r.workload_id = w.id) AS n_targets,
    (SELECT COUNT(DISTINCT k.model_id) FROM task k WHERE k.workload_id = w.id) AS n_models
FROM workload w
"""


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        "workload",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("shash", sa.String(length=16), nullable=False, comment="structural hash (16 hex)"),
        sa.Column("ignore_tensor_hash", sa.String(length=16), nullable=False, comment="hash ignoring constant tensor bytes"),
        sa.Column("anchor_hash", sa.String(length=16), nullable=False, comment="hash of the anchor block"),
        sa.Column("name", sa.String(length=255), nullable=True, comment="task or model layer name, for people"),
        sa.Column("flops", sa.BigInteger(), nullable=True, comment="estimated floating point operations"),
        sa.Column("script", sa.Text(), nullable=False, comment="the IR as TVMScript"),
        sa.Column("ir_format", sa.String(length=32), nullable=True, comment="codec of ir_blob"),
        sa.Column("ir_blob", sa.LargeBinary(), nullable=True, comment="the IR, serialized for fast loading"),
        sa.Column("tvm_payload", sa.Text(), nullable=True, comment="base64 payload of the TVM log line it came from"),
        sa.Column("tvm_shash", sa.String(length=20), nullable=True, comment="TVM's own shash from that line (provenance only)"),
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workload")),
    )
    op.create_index(op.f("ix_workload_shash"), "workload", ["shash"])
    op.create_index(op.f("ix_workload_ignore_tensor_hash"), "workload", ["ignore_tensor_hash"])
    op.create_index(op.f("ix_workload_anchor_hash"), "workload", ["anchor_hash"])

    op.create_table(
        "target",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("config", sa.Text(), nullable=False, comment="canonical config JSON (sorted keys)"),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("arch", sa.String(length=64), nullable=False, comment="mcpu or GPU arch, '' when not stated"),
        sa.Column("isa", sa.String(length=32), nullable=False, comment="instruction set from mtriple, '' when not stated"),
        sa.Column("device", sa.String(length=64), nullable=False, comment="device attribute, '' when not stated"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_target")),
        sa.UniqueConstraint("config", name=op.f("uq_target_config")),
    )
    op.create_index("ix_target_kind_arch", "target", ["kind", "arch"])

    op.create_table(
        "source",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False, comment="import, tune, merge or pull"),
        sa.Column("location", sa.Text(), nullable=True, comment="file path or URL"),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("username", sa.String(length=128), nullable=True),
        sa.Column("host", sa.String(length=255), nullable=True),
        sa.Column("tvm_version", sa.String(length=64), nullable=True),
        sa.Column("msdb_version", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_source")),
    )

    op.create_table(
        "tuning_record",
        sa.Column("id", sa.Integer(), nullable=False, comment="commit order"),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False, comment="the target row 'null' for none"),
        sa.Column("source_id", sa.Integer(), nullable=True),
        sa.Column("trace", sa.Text(), nullable=False, comment="TVM trace JSON [insts, decisions]"),
        sa.Column("trace_hash", sa.String(length=16), nullable=False, comment="hash of the trace JSON, for dedup"),
        sa.Column("run_secs", sa.Text(), nullable=True, comment="JSON list of run times; [1e10] = failed"),
        sa.Column("mean_run_secs", sa.Float(), nullable=True, comment="mean of run_secs, failures included"),
        sa.Column("is_valid", sa.Boolean(), nullable=False),
        sa.Column("args_info", sa.Text(), nullable=True, comment='JSON [["TENSOR", dtype, shape], ...]'),
        sa.ForeignKeyConstraint(["workload_id"], ["workload.id"], name=op.f("fk_tuning_record_workload_id_workload")),
        sa.ForeignKeyConstraint(["target_id"], ["target.id"], name=op.f("fk_tuning_record_target_id_target")),
        sa.ForeignKeyConstraint(["source_id"], ["source.id"], name=op.f("fk_tuning_record_source_id_source")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tuning_record")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_tuning_record_top_k", "tuning_record",
                    ["workload_id", "target_id", "is_valid", "mean_run_secs", "id"])
    op.create_index("ix_tuning_record_trace_hash", "tuning_record", ["trace_hash"])

    op.create_table(
        "model",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model")),
        sa.UniqueConstraint("name", name=op.f("uq_model_name")),
    )

    op.create_table(
        "task",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["model.id"], name=op.f("fk_task_model_id_model")),
        sa.ForeignKeyConstraint(["workload_id"], ["workload.id"], name=op.f("fk_task_workload_id_workload")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task")),
        sa.UniqueConstraint("model_id", "name", name="uq_task_model_id_name"),
    )
    op.create_index(op.f("ix_task_workload_id"), "task", ["workload_id"])

    op.execute(BEST_RECORD)
    op.execute(WORKLOAD_SUMMARY)


def downgrade() -> None:
    """Downgrade schema."""
    op.execute("DROP VIEW workload_summary")
    op.execute("DROP VIEW best_record")
    op.drop_index(op.f("ix_task_workload_id"), table_name="task")
    op.drop_table("task")
    op.drop_table("model")
    op.drop_index("ix_tuning_record_trace_hash", table_name="tuning_record")
    op.drop_index("ix_tuning_record_top_k", table_name="tuning_record")
    op.drop_table("tuning_record")
    op.drop_table("source")
    op.drop_index("ix_target_kind_arch", table_name="target")
    op.drop_table("target")
    op.drop_index(op.f("ix_workload_anchor_hash"), table_name="workload")
    op.drop_index(op.f("ix_workload_ignore_tensor_hash"), table_name="workload")
    op.drop_index(op.f("ix_workload_shash"), table_name="workload")
    op.drop_table("workload")
