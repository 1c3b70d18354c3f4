"""The SQL schema of an msdb database, as SQLAlchemy Core tables.

The *current* schema for queries and Alembic's autogenerate; only the migrations in
`msdb.schema` create or change it (a test checks that the two agree). What each table holds and
why its indexes are what they are: docs/architecture.md, "Databases".
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger, Boolean, Column, DateTime, Float, ForeignKey, Index, Integer, LargeBinary, MetaData, String,
    Table, Text, UniqueConstraint,
)

__all__ = ["metadata", "workload", "target", "source", "tuning_record", "model", "task", "measurement_claim",
           "NAMING_CONVENTION"]

#: Constraint names are deterministic, so batch migrations on SQLite can drop them by name.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

workload = Table(
    "workload", metadata,
    Column("id", Integer, primary_key=True),
    Column("shash", String(16), nullable=False, index=True, comment="structural hash (16 hex)"),
    Column("ignore_tensor_hash", String(16), nullable=False, index=True, comment="hash ignoring constant tensor bytes"),
    Column("anchor_hash", String(16), nullable=False, index=True, comment="hash of the anchor block"),
    Column("name", String(255), nullable=True, comment="task or model layer name, for people"),
    Column("flops", BigInteger, nullable=True, comment="estimated floating point operations"),
    Column("script", Text, nullable=False, comment="the IR as TVMScript"),
    Column("ir_format", String(32), nullable=True, comment="codec of ir_blob"),
    Column("ir_blob", LargeBinary, nullable=True, comment="the IR, serialized for fast loading"),
    Column("tvm_payload", Text, nullable=True, comment="base64 payload of the TVM log line it came from"),
    Column("tvm_shash", String(20), nullable=True, comment="TVM's own shash from that line (provenance only)"),
    Column("created_at", DateTime, nullable=True),
    Column("family_hash", String(16), nullable=True, index=True,
           comment="shape-free key of the anchor block (16 hex); NULL for opaque workloads"),
    Column("family_extents", Text, nullable=True,
           comment="JSON list of the sizes the family key abstracted, in walk order"),
)

target = Table(
    "target", metadata,
    Column("id", Integer, primary_key=True),
    Column("config", Text, nullable=False, unique=True, comment="canonical config JSON (sorted keys)"),
    Column("kind", String(32), nullable=False),
    Column("arch", String(64), nullable=False, comment="mcpu or GPU arch, '' when not stated"),
    Column("isa", String(32), nullable=False, comment="instruction set from mtriple, '' when not stated"),
    Column("device", String(64), nullable=False, comment="device attribute, '' when not stated"),
    Index("ix_target_kind_arch", "kind", "arch"),
)

source = Table(
    "source", metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", String(16), nullable=False, comment="import, tune, merge or pull"),
    Column("location", Text, nullable=True, comment="file path or URL"),
    Column("sha256", String(64), nullable=True, comment="of the file the records came from (an import's record file)"),
    Column("username", String(128), nullable=True),
    Column("host", String(255), nullable=True),
    Column("tvm_version", String(64), nullable=True),
    Column("msdb_version", String(64), nullable=True),
    Column("created_at", DateTime, nullable=False),
    Column("workload_sha256", String(64), nullable=True, comment="of an import's workload file"),
)

tuning_record = Table(
    "tuning_record", metadata,
    Column("id", Integer, primary_key=True, comment="commit order"),
    Column("workload_id", Integer, ForeignKey("workload.id"), nullable=False),
    Column("target_id", Integer, ForeignKey("target.id"), nullable=False, comment="the target row 'null' for none"),
    Column("source_id", Integer, ForeignKey("source.id"), nullable=True),
    Column("trace", Text, nullable=False, comment="TVM trace JSON [insts, decisions]"),
    Column("trace_hash", String(16), nullable=False, comment="hash of the trace JSON, for dedup"),
    Column("run_secs", Text, nullable=True, comment="JSON list of run times; [1e10] = failed"),
    Column("mean_run_secs", Float, nullable=True, comment="mean of run_secs, failures included"),
    Column("is_valid", Boolean, nullable=False),
    Column("args_info", Text, nullable=True, comment='JSON [["TENSOR", dtype, shape], ...]'),
    Index("ix_tuning_record_top_k", "workload_id", "target_id", "is_valid", "mean_run_secs", "id"),
    sqlite_autoincrement=True,
)

model = Table(
    "model", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(255), nullable=False, unique=True),
)

task = Table(
    "task", metadata,
    Column("id", Integer, primary_key=True),
    Column("model_id", Integer, ForeignKey("model.id"), nullable=False),
    Column("workload_id", Integer, ForeignKey("workload.id"), nullable=False, index=True),
    Column("name", String(255), nullable=False),
    Column("weight", Float, nullable=False, default=1.0),
    UniqueConstraint("model_id", "name", name="uq_task_model_id_name"),
)

measurement_claim = Table(
    "measurement_claim", metadata,
    Column("workload_id", Integer, ForeignKey("workload.id"), primary_key=True),
    Column("target_id", Integer, ForeignKey("target.id"), primary_key=True),
    Column("module_key", String(16), primary_key=True,
           comment="structural hash of the post-processed module (the search's dedup key)"),
    Column("owner", String(32), nullable=False, comment="the claiming search session"),
    Column("expires_at", Float, nullable=True, comment="unix time the lease ends (database clock); NULL once measured"),
)
