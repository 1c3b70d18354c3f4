"""Task extraction: a model's PrimFuncs as TVM's `ExtractedTask`s, unique by workload hash and
weighted by call count, and their record in the database.

TVM 0.27's rules to the letter (its anchor-block weight over-count included), in first-call order
where TVM's is not reproducible. See docs/architecture.md, "Models".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from msdb.hashing.modes import canonical_mode
from msdb.ir.function import IRModule, PrimFunc
from msdb.model.graph import Model, ModelError

if TYPE_CHECKING:
    from msdb.database.base import Database
    from msdb.records.target import Target

__all__ = ["ExtractedTask", "extract_tasks", "normalize_mod", "block_count", "record_model_tasks"]

logger = logging.getLogger(__name__)


@dataclass
class ExtractedTask:
    """One tuning task of a model, with TVM's field names: `task_name` (the representative
    function's name in the model), `mod` (its normalized module `{"main": f}`), `weight` (how
    many calls it stands for, TVM's count), `dispatched` (`[mod]`, as TVM's extractor fills it)
    and `target` (None: any)."""

    task_name: str
    mod: IRModule
    weight: int
    target: Target | None = None
    dispatched: list[IRModule] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.dispatched:
            self.dispatched = [self.mod]


def normalize_mod(func: PrimFunc | IRModule) -> IRModule:
    """TVM's `normalize_mod` on a PrimFunc: `{"main": f}` with `global_symbol` "main" when the
    function has none, and noalias set (msdb's `tir.noalias`, unless TVM 0.27's `tirx.noalias`
    is already there; hashing treats both as set, docs/architecture.md "Hashing"). A module of
    one function is rekeyed as "main"."""
    if isinstance(func, IRModule):
        if len(func.functions) != 1:
            return func
        func = next(iter(func.functions.values()))
    attrs = dict(func.attrs)
    attrs.setdefault("global_symbol", "main")
    if not attrs.get("tir.noalias") and not attrs.get("tirx.noalias"):
        attrs["tir.noalias"] = True
    return IRModule({"main": PrimFunc(func.params, func.buffer_map, func.body, attrs)})


def block_count(func: PrimFunc) -> int:
    """The number of blocks in `func`, the root block included (TVM's `BlockCounter`)."""
    from msdb.ir import stmt as S
    from msdb.ir.functor import post_order_visit

    count = 0

    def visit(node: object) -> None:
        nonlocal count
        if isinstance(node, S.Block):
            count += 1

    post_order_visit(func.body, visit)
    return count


@dataclass
class _Entry:
    task: ExtractedTask
    blocks: int


def extract_tasks(model: Model, target: Target | str | None = None, *,
                  module_equality: str = "structural") -> list[ExtractedTask]:
    """The model's tasks under `module_equality` ("structural", "ignore-tensor" or
    "anchor-block"), with TVM's weights (module docstring), in first-call order."""
    from msdb.hashing import structural_equal, structural_hash
    from msdb.records.target import Target as _Target

    mode = canonical_mode(module_equality)
    coerced = _Target.coerce(target) if target is not None else None
    buckets: dict[str, list[_Entry]] = {}
    ordered: list[_Entry] = []
    normalized: dict[str, IRModule] = {}
    for call in model.calls:
        func = model.functions.get(call.function)
        if func is None:
            raise ModelError(f"{model.source or model.name}: {call.node or call.function}: calls unknown function "
                             f"{call.function!r}")
        mod = normalized.get(call.function)
        if mod is None:
            mod = normalized[call.function] = normalize_mod(func)
        key = structural_hash(mod, mode)
        bucket = buckets.setdefault(key, [])
        entry = next((e for e in bucket if structural_equal(e.task.mod, mod, mode)), None)
        if entry is None:
            entry = _Entry(ExtractedTask(call.function, mod, 1, coerced), block_count(mod["main"]))
            bucket.append(entry)
            ordered.append(entry)
            continue
        entry.task.weight += 1
        blocks = block_count(mod["main"])
        if blocks < entry.blocks:
            # TVM erases the task and inserts the new function with weight 1 + (old + 1)
            entry.task = ExtractedTask(call.function, mod, 1 + entry.task.weight, coerced)
            entry.blocks = blocks
    tasks = [e.task for e in ordered]
    logger.info("%s: %d task(s) from %d call(s) under %s equality", model.name, len(tasks), len(model.calls), mode)
    return tasks


def record_model_tasks(database: Database, model_name: str, tasks: Sequence[ExtractedTask]) -> list[int] | None:
    """Store `model_name` and its tasks (workload, name, weight) in the database's `model` and
    `task` tables in one transaction (`Database.commit_model_tasks`); returns the task row ids,
    or None for a database without those tables (its workloads are committed all the same). A
    workload new to the database is named after its task (the model's function), so `msdb ls`
    shows that name."""
    from msdb.records.workload import Workload

    entries: list[tuple[str, Any, float]] = [(t.task_name, Workload(t.mod, name=t.task_name), float(t.weight))
                                             for t in tasks]
    return database.commit_model_tasks(model_name, entries)
