"""msdb's own GPU design spaces (its cuda schedule rules, `PostOrderApply` with kind "cuda")
for the shipped workloads replay, and each is one of TVM 0.27's design spaces for the same
workload and target, instruction by instruction (kinds, and the shape of every sampling
decision); the design spaces TVM has and msdb lacks are only software-pipelined variants
(TVM adds them for sm_80 and later)."""

from __future__ import annotations

from typing import Any

import pytest

from msdb.hashing import structural_equal
from msdb.ir import from_script
from msdb.schedule import Schedule, Trace
from tests.tuner.cuda._candidates import load

WORKLOADS = ("matmul", "conv2d", "softmax")


def _shape(trace_json: Any) -> list[tuple[str, Any]]:
    """Each instruction's kind with the shape of its decision (tile: the number of factors;
    categorical: the number of candidates), in order."""
    insts, decisions = trace_json
    by_index = dict((i, d) for i, d in decisions)
    out: list[tuple[str, Any]] = []
    for i, inst in enumerate(insts):
        kind = inst[0]
        if kind == "SamplePerfectTile":
            out.append((kind, len(by_index[i])))
        elif kind == "SampleCategorical":
            out.append((kind, len(inst[2][0])))
        else:
            out.append((kind, None))
    return out


def _ours(name: str) -> list[Schedule]:
    from msdb.tuner.space.generators.post_order_apply import PostOrderApply

    generator = PostOrderApply(sch_rules="cuda", postprocs="cuda", mutator_probs="cuda")
    return generator.generate_design_space(from_script(load(name)["workload"]))


@pytest.mark.parametrize("name", WORKLOADS)
def test_msdb_cuda_design_spaces_are_tvms(name: str) -> None:
    data = load(name)
    theirs = [_shape(space["trace"]) for space in data["design_spaces"]]
    ours = _ours(name)
    assert ours
    found = []
    for sch in ours:
        shape = _shape(sch.trace.as_json())
        assert shape in theirs, f"{name}: msdb's design space is none of TVM's:\n{sch.trace}"
        found.append(theirs.index(shape))
        replayed = Schedule(from_script(data["workload"]))
        Trace.from_json(sch.trace.as_json()).apply_to_schedule(replayed, remove_postproc=False)
        assert structural_equal(replayed.mod, sch.mod)
    for i, space in enumerate(data["design_spaces"]):
        if i not in found:
            keys = {inst[2][0] for inst in space["trace"][0] if inst[0] == "Annotate"}
            assert "software_pipeline_stage" in keys, f"{name}: msdb lacks TVM's design space {i}"
