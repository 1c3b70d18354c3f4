"""msdb's ScheduleUsingAnchorTrace gives the module TVM 0.27's gives: the same sampled traces
(msdb's design space, replayed by TVM on the tuned workload to make a TVM Trace) applied by
`tvm.s_tir.meta_schedule.trace_apply.schedule_using_anchor_trace` to the same query function,
TVM's result printed as TVMScript, parsed by msdb and compared structurally.

One difference is compared away, the one tests/tvm/test_tvm_replays_msdb_tuning.py describes:
after splitting a fused loop TVM keeps bindings such as `(f0 * 64 + f1) // 64` that msdb
simplifies to `f0`; both compute the same index, so bindings are compared simplified under
their loops' ranges."""

from __future__ import annotations

import json
from typing import Any

import pytest

from msdb.hashing import structural_equal, structural_hash
from msdb.interop.tvm.encode import encode_workload
from msdb.interop.tvm.payload import payload_bytes
from msdb.ir import expr as E
from msdb.ir import from_script
from msdb.ir import stmt as S
from msdb.ir.arith.analyzer import simplify
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.functor import IRMutator
from msdb.schedule import Schedule
from msdb.tuner.space.anchor_trace import schedule_using_anchor_trace
from tests.tuner.space.test_anchor_trace import CASES, CPU, HAND_WRITTEN, apply_hand_written, sampled_schedules

pytestmark = pytest.mark.tvm


class _CanonicalBindings(IRMutator):
    """Block bindings simplified under the ranges of the loops around them."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: dict[E.Var, E.Range] = {}

    def visit_For(self, node: S.For) -> S.Stmt:
        self.ranges[node.loop_var] = E.Range(node.min, node.extent)
        return super().visit_For(node)

    def visit_BlockRealize(self, node: S.BlockRealize) -> S.Stmt:
        values = tuple(simplify(v, self.ranges) for v in node.iter_values)
        return S.BlockRealize(values, node.predicate, self.visit(node.block))


def canonical(mod: IRModule) -> IRModule:
    return IRModule({name: f.with_body(_CanonicalBindings().visit(f.body)) for name, f in mod.functions.items()})


def to_tvm(func: PrimFunc):  # type: ignore[no-untyped-def]
    import tvm

    return tvm.ir.load_json(payload_bytes(encode_workload(IRModule.from_func(func))).decode())


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_msdb_and_tvm_schedule_the_query_alike(case: str, seed: int) -> None:
    tvm = pytest.importorskip("tvm")
    from tvm.s_tir.meta_schedule.trace_apply import schedule_using_anchor_trace as tvm_schedule_using_anchor_trace

    tuned, query = (make() for make in CASES[case])
    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    for tuned_sch in sampled_schedules(tuned, seed):
        # The same trace as a TVM Trace: TVM replays msdb's JSON on the tuned workload.
        tvm_tuned = tvm.s_tir.Schedule(to_tvm(tuned))
        tvm.s_tir.Trace.apply_json_to_schedule(json.loads(json.dumps(tuned_sch.trace.as_json())), tvm_tuned)
        theirs_sch = tvm.s_tir.Schedule(to_tvm(query))
        tvm_schedule_using_anchor_trace(theirs_sch, tvm_tuned.trace, target)

        ours = Schedule(query)
        schedule_using_anchor_trace(ours, tuned_sch.trace, CPU)

        theirs = canonical(from_script(theirs_sch.mod.script()))
        mine = canonical(ours.mod)
        assert structural_equal(theirs, mine), f"{case}: TVM's result differs:\n{theirs_sch.mod.script()}"
        assert structural_hash(theirs) == structural_hash(mine)


def tvm_trace(obj: Any):  # type: ignore[no-untyped-def]
    """msdb's trace JSON as a TVM Trace object (instructions built one by one: TVM replays JSON
    only onto a schedule, and these traces do not apply to any one function as they are)."""
    from tvm.s_tir.schedule import Instruction, InstructionKind, LoopRV, SBlockRV, Trace

    insts_json, _ = obj
    names: dict[str, Any] = {}
    insts = []
    for kind, inputs, attrs, outputs in insts_json:
        outs = []
        for name in outputs:
            names[name] = SBlockRV() if name.startswith("b") else LoopRV()
            outs.append(names[name])
        ins = [names[i] if isinstance(i, str) and i in names else i for i in inputs]
        attrs = [a[1:-1] if isinstance(a, str) and a.startswith('"') else a for a in attrs]
        insts.append(Instruction(InstructionKind.get(kind), ins, attrs, outs))
    return Trace(insts, {})


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_each_rule_of_the_procedure_gives_tvms_module(name: str) -> None:
    tvm = pytest.importorskip("tvm")
    from tvm.s_tir.meta_schedule.trace_apply import schedule_using_anchor_trace as tvm_schedule_using_anchor_trace

    make_query, make_trace = HAND_WRITTEN[name]
    theirs_sch = tvm.s_tir.Schedule(to_tvm(make_query()))
    tvm_schedule_using_anchor_trace(theirs_sch, tvm_trace(make_trace()), tvm.target.Target({"kind": "llvm", "num-cores": 1}))
    _, ours = apply_hand_written(name)
    theirs = canonical(from_script(theirs_sch.mod.script()))
    assert structural_equal(theirs, canonical(ours.mod)), f"{name}: TVM's result differs:\n{theirs_sch.mod.script()}"


def test_tvm_also_refuses_more_than_one_unscheduled_block() -> None:
    tvm = pytest.importorskip("tvm")
    from tvm.s_tir.meta_schedule.trace_apply import schedule_using_anchor_trace as tvm_schedule_using_anchor_trace

    query = CASES["conv->conv_bias_relu"][1]()
    with pytest.raises(Exception, match="only one \\(fused\\) spatial block can remain unscheduled"):
        tvm_schedule_using_anchor_trace(tvm.s_tir.Schedule(to_tvm(query)),
                                        tvm_trace([[["GetSBlock", [], ["root", "main"], ["b0"]]], []]),
                                        tvm.target.Target({"kind": "llvm", "num-cores": 1}))
