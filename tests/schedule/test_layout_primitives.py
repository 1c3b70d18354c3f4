"""reindex, transform_layout and transform_block_layout (TVM's tensor-core rule's primitives):
the module they give computes what the original did, their traces replay and print like
TVM's, and bad input is refused with one clear error that leaves the schedule as it was.
TVM's own results for the same schedules: test_layout_primitives_tvm.py; TVM's whole
tensor-core traces: tests/tuner/cuda/test_cuda_replay.py."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from msdb.errors import ScheduleError
from msdb.hashing import structural_equal
from msdb.ir import IRModule, from_script, te
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.schedule import Schedule, Trace
from msdb.schedule.index_map import IndexMap, rename_free_vars
from tests.schedule.test_block_primitives import assert_same_results, assert_unchanged_after_error, matmul


def conv_nhwc(n: int = 1, hw: int = 6, ci: int = 4, co: int = 8) -> IRModule:
    """A padded 3x3 NHWC conv2d (pad block, then the reduction), as TVM's te_workload writes it."""
    x = te.placeholder((n, hw, hw, ci), name="inputs")
    w = te.placeholder((3, 3, ci, co), name="weight")
    pad = te.compute((n, hw + 2, hw + 2, ci), lambda b, h, v, c: te.if_then_else(
        te.all(h >= 1, h < hw + 1, v >= 1, v < hw + 1), x[b, h - 1, v - 1, c], te.const(0.0, "float32")),
        name="PadInput")
    rh, rw, rc = (te.reduce_axis((0, 3), name="rh"), te.reduce_axis((0, 3), name="rw"),
                  te.reduce_axis((0, ci), name="rc"))
    out = te.compute((n, hw, hw, co), lambda b, h, v, o: te.sum(pad[b, h + rh, v + rw, rc] * w[rh, rw, rc, o],
                                                               axis=[rh, rw, rc]), name="conv")
    return IRModule.from_func(te.create_prim_func([x, w, out]))


def fold_conv(sch: Any, get: Callable[[str], Any]) -> None:
    """The conv2d as TVM's tensor-core rule folds it into a matrix multiply: every access
    reindexed, the buffers and the block laid out as (pixels, channels) matrices. `sch` is
    msdb's or TVM's schedule (test_layout_primitives_tvm.py runs it on both)."""
    conv = get("conv")
    out = sch.reindex(conv, ("write", 0))
    lhs = sch.reindex(conv, ("read", 0))
    rhs = sch.reindex(conv, ("read", 1))
    sch.transform_layout(conv, ("read", 0), lambda n, h, w, rh, rw, rc: (n * 36 + h * 6 + w, rh * 12 + rw * 4 + rc))
    sch.transform_layout(conv, ("read", 1), lambda co, rh, rw, rc: (co, rh * 12 + rw * 4 + rc))
    sch.transform_layout(conv, ("write", 0), lambda n, h, w, co: (n * 36 + h * 6 + w, co))
    sch.transform_block_layout(out, lambda n, h, w, co: (n * 36 + h * 6 + w, co))
    sch.transform_block_layout(lhs, lambda n, h, w, rh, rw, rc: (n * 36 + h * 6 + w, rh * 12 + rw * 4 + rc))
    sch.transform_block_layout(rhs, lambda co, rh, rw, rc: (co, rh * 12 + rw * 4 + rc))
    sch.transform_block_layout(conv, lambda n, h, w, co, rh, rw, rc: (n * 36 + h * 6 + w, co, rh * 12 + rw * 4 + rc))


def _folded_conv() -> Schedule:
    sch = Schedule(conv_nhwc())
    fold_conv(sch, sch.get_block)
    return sch


def _block(sch: Schedule, name: str) -> S.Block:
    return sch.get(sch.get_block(name))


def test_reindex_gives_each_access_the_blocks_own_iter_vars() -> None:
    sch = Schedule(conv_nhwc())
    conv = sch.get_block("conv")
    before = sch.mod
    out = sch.reindex(conv, ("write", 0))
    lhs = sch.reindex(conv, ("read", 0))
    assert sch.get(out).name_hint == "conv_reindex"
    assert sch.get(lhs).name_hint == "PadInput_reindex_reindex"  # TVM names the stage after the buffer it writes
    block = _block(sch, "conv")
    names = [iv.var for iv in block.iter_vars]
    buffers = {r.buffer.name: r for r in block.reads + block.writes}
    # the output drops no iter var it used; the padded input uses all but the output channel
    assert [int(E.const_int(d) or 0) for d in buffers["conv_reindex"].buffer.shape] == [1, 6, 6, 8]
    assert [int(E.const_int(d) or 0) for d in buffers["PadInput_reindex"].buffer.shape] == [1, 6, 6, 3, 3, 4]
    assert [r.min for r in buffers["PadInput_reindex"].region] == [names[i] for i in (0, 1, 2, 4, 5, 6)]
    order = [blk.name_hint for blk in _blocks(sch.mod)]
    assert order.index("PadInput_reindex_reindex") < order.index("conv") < order.index("conv_reindex")
    assert_same_results(before, sch.mod)


def _blocks(mod: IRModule) -> list[S.Block]:
    from msdb.ir.functor import post_order_visit

    found: list[S.Block] = []
    post_order_visit(mod.main.body, lambda n: found.append(n) if isinstance(n, S.Block) else None)
    return [b for b in found if b.name_hint != "root"]


def test_the_folded_conv_is_a_matrix_multiply_that_computes_the_conv() -> None:
    sch = _folded_conv()
    block = _block(sch, "conv")
    assert [(E.const_int(iv.dom.extent), iv.iter_type) for iv in block.iter_vars] == [
        (36, S.IterType.DATA_PAR), (8, S.IterType.DATA_PAR), (36, S.IterType.COMM_REDUCE)]
    v0, v1, v2 = (iv.var for iv in block.iter_vars)
    reads = {r.buffer.name: [r.min for r in reg.region] for r in block.reads for reg in [r]}
    assert reads == {"PadInput_reindex": [v0, v2], "weight_reindex": [v1, v2]}
    # the input stage gathers the window of the padded input, one matrix row per pixel
    stage = _block(sch, "PadInput_reindex_reindex")
    assert [E.const_int(iv.dom.extent) for iv in stage.iter_vars] == [36, 36]
    assert_same_results(conv_nhwc(), sch.mod)


def test_layout_traces_replay_to_the_same_module_and_print_like_tvm() -> None:
    sch = _folded_conv()
    trace = sch.trace
    again = Schedule(conv_nhwc())
    Trace.from_json(json.loads(json.dumps(trace.as_json()))).apply_to_schedule(again)
    assert structural_equal(again.mod, sch.mod)
    lines = trace.python_lines()
    assert any(line.startswith("sch.transform_block_layout(block=b") and
               "index_map=lambda n, h, w, co: (n * 36 + h * 6 + w, co,))" in line for line in lines)
    assert "b1 = sch.reindex(block=b0, buffer=0, buffer_index_type=1)" in lines


def test_an_index_map_over_sampled_variables_binds_their_values_and_follows_their_names() -> None:
    """TVM's tensor-core rule lays the accumulator out in tiles whose sizes are sampled
    variables of the trace (`i0 // 16 // (v27 * v28)`): replay binds the values, and a trace
    that numbers its variables otherwise renames them inside the map too."""
    from msdb.schedule.instruction import IndexMapInput

    sch = Schedule(matmul(32))
    c = sch.get_block("C")
    sch.reindex(c, ("write", 0))
    tile = sch.sample_categorical([2, 4], [0.5, 0.5], decision=1)
    i, j, v = E.Var("i", "int32"), E.Var("j", "int32"), E.Var("v2", "int32")
    tiles = IndexMap((i, j), (i // v, j // v, i % v, j % v))
    sch.transform_layout(c, ("write", 0), IndexMapInput(tiles.to_json(), {"v2": tile}), assume_injective_transform=True)
    assert [E.const_int(d) for d in _block(sch, "C").writes[0].buffer.shape] == [8, 8, 4, 4]
    (line,) = [x for x in sch.trace.python_lines() if "transform_layout" in x]
    assert line.endswith(
        "index_map=lambda i, j: (i // v2, j // v2, i % v2, j % v2,), pad_value=None, assume_injective_transform=True)")
    renamed = json.loads(json.dumps(sch.trace.as_json()).replace("v2", "v7"))
    assert '\"v7\"' in json.dumps(renamed) or '"data":"v7"' in renamed[0][-1][1][1]
    again = Schedule(matmul(32))
    Trace.from_json(renamed).apply_to_schedule(again)
    assert structural_equal(again.mod, sch.mod)
    assert Trace.from_json(renamed).as_json() == sch.trace.as_json()  # written back under the names of now


def test_rename_free_vars_keeps_every_other_byte() -> None:
    text = IndexMap(tuple([E.Var("i", "int32")]), (E.Var("i", "int32") // E.Var("v9", "int32"),)).to_json()
    renamed = rename_free_vars(text, {"v9": "v3"})
    assert renamed == text.replace('"v9"', '"v3"')
    assert rename_free_vars(text, {}) is text


def test_index_map_shape_and_inverse() -> None:
    m = IndexMap.from_function(lambda n, h, w: (n * 36 + h * 6 + w,))
    assert [E.const_int(d) for d in m.shape([1, 6, 6])] == [36]
    inv = m.inverse([1, 6, 6])
    y = inv.initial[0]
    assert [str(e) for e in inv.final][0] == "IntImm('int32', 0)" or E.const_int(inv.final[0]) == 0
    assert inv.final[1] == inv.final[1] and isinstance(inv.final[1], E.FloorDiv) and inv.final[1].a is y
    assert isinstance(inv.final[2], E.FloorMod)
    tiles = IndexMap.from_function(lambda i, j: (i // 16, j // 16, i % 16, j % 16))
    assert [E.const_int(d) for d in tiles.shape([64, 32])] == [4, 2, 16, 16]
    assert tiles.as_lambda() == "lambda i, j: (i // 16, j // 16, i % 16, j % 16,)"


@pytest.mark.parametrize("fn, needle", [
    (lambda i, j: (i + j, j), "not bijective"),
    (lambda i, j: (i * 3 + j,), "gaps or overlaps"),
    (lambda i, j: (i * j,), "not a sum"),
    (lambda i, j: (i,), "drops parameter"),
])
def test_index_map_inverse_refuses_maps_that_are_not_bijective_and_affine(fn, needle: str) -> None:
    with pytest.raises(ScheduleError, match=needle):
        IndexMap.from_function(fn).inverse([4, 4])


def test_index_map_json_errors_name_what_is_wrong() -> None:
    with pytest.raises(ScheduleError, match="not JSON"):
        IndexMap.from_json("{nope")
    with pytest.raises(ScheduleError, match="not a TVM object graph"):
        IndexMap.from_json('{"a": 1}')
    with pytest.raises(ScheduleError, match="neither a parameter nor a sampled variable"):
        IndexMap((E.Var("i", "int32"),), (E.Var("i", "int32") // E.Var("v5", "int32"),)).bind({})


def test_reindex_bad_input_leaves_the_schedule_as_it_was() -> None:
    sch = Schedule(conv_nhwc())
    conv = sch.get_block("conv")
    assert_unchanged_after_error(sch, lambda s: s.reindex(conv, ("read", 5)), "read buffer index 5", "out of range")
    assert_unchanged_after_error(sch, lambda s: s.reindex(conv, ("copy", 0)), '("read", index)')
    root = sch.get_block("root")
    assert_unchanged_after_error(sch, lambda s: s.reindex(root, ("write", 0)), "reindex")


def test_reindex_refuses_a_buffer_accessed_with_two_patterns() -> None:
    mod = from_script('''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((7,), "float32")):
    for i in range(7):
        with T.block("B"):
            v = T.axis.spatial(7, i)
            B[v] = A[v] + A[v + 1]
''')
    sch = Schedule(mod)
    b = sch.get_block("B")
    assert_unchanged_after_error(sch, lambda s: s.reindex(b, ("read", 0)), "more than one index pattern", "'A'")


def test_transform_layout_bad_input_leaves_the_schedule_as_it_was() -> None:
    sch = Schedule(matmul(16))
    c = sch.get_block("C")
    assert_unchanged_after_error(sch, lambda s: s.transform_layout(c, ("read", 0), lambda i, k: (k, i)),
                                 "not allocated by a block", "'A'")
    out = sch.reindex(c, ("write", 0))
    assert_unchanged_after_error(sch, lambda s: s.transform_layout(c, ("write", 0), lambda i, j: (i * 2, j)),
                                 "pads")
    assert_unchanged_after_error(sch, lambda s: s.transform_layout(c, ("write", 0), lambda i, j: (i // 3, j)),
                                 "not injective")
    assert_unchanged_after_error(sch, lambda s: s.transform_layout(c, ("write", 0), lambda i, j: (i, "x")),
                                 "integer expressions")
    assert_unchanged_after_error(sch, lambda s: s.transform_layout(c, ("write", 0), lambda i, j: (i, j),
                                                                  pad_value=0.0), "pad_value")
    assert_unchanged_after_error(sch, lambda s: s.transform_layout(c, ("write", 0), "{bad json"), "not JSON")
    assert_unchanged_after_error(sch, lambda s: s.transform_layout(c, ("write", 0), lambda i: (i,)), "takes 1")
    assert out is not None


def test_transform_block_layout_bad_input_leaves_the_schedule_as_it_was() -> None:
    sch = Schedule(matmul(16))
    c = sch.get_block("C")
    assert_unchanged_after_error(sch, lambda s: s.transform_block_layout(c, lambda i, j, k: (i * 16 + k, j)),
                                 "mixes iter vars of different kinds")
    assert_unchanged_after_error(sch, lambda s: s.transform_block_layout(c, lambda i, j, k: (i + j, j, k)),
                                 "not bijective")
    i, j, k = sch.get_loops(c)
    sch.split(i, [4, 4])
    assert_unchanged_after_error(sch, lambda s: s.transform_block_layout(c, lambda i, j, k: (i, j, k)),
                                 "bound to its loops one to one")


def test_old_tvm_transform_layout_layout_stays_opaque() -> None:
    """TVM before 0.13 recorded TransformLayout with its index map among the attributes: such an
    instruction is kept and written back unchanged, and replay refuses it by name."""
    text = [[["GetSBlock", [], ["C", "main"], ["b0"]],
             ["TransformLayout", ["b0"], [0, 1, '{"root":1}'], []]], []]
    trace = Trace.from_json(text)
    assert trace.as_json() == text
    with pytest.raises(ScheduleError, match="TransformLayout is not supported for replay"):
        trace.apply_to_schedule(Schedule(matmul(16)))


def _digit_consumer(rows: int) -> IRModule:
    """B = A * 2 over (rows, 4); C[k] = B[k // 4, k % 4] + 1 over k in [0, 8): a consumer that
    loads its producer at digits of its iter var."""
    return from_script(f'''
@T.prim_func
def main(A: T.Buffer(({rows}, 4), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer(({rows}, 4))
    for i, j in T.grid({rows}, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2.0)
    for k in range(8):
        with T.block("C"):
            vk = T.axis.spatial(8, k)
            C[vk] = B[vk // 4, vk % 4] + T.float32(1.0)
''')


def test_reverse_compute_inline_at_digits_computes_the_same() -> None:
    mod = _digit_consumer(2)
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    (block,) = _blocks(sch.mod)
    assert block.name_hint == "B"
    assert_same_results(mod, sch.mod)


def test_reverse_compute_inline_at_digits_refuses_a_producer_that_does_not_fill_the_digits() -> None:
    """Inlined into a (4, 4) producer, `C[k // 4 ...]` would write C[15] of an 8-element C: the
    producer's iter vars must range over exactly the digits the consumer loads."""
    sch = Schedule(_digit_consumer(4))
    c = sch.get_block("C")
    assert_unchanged_after_error(sch, lambda s: s.reverse_compute_inline(c), "does not range over [0, 2)")


@pytest.mark.parametrize("text, needle", [
    ('{"root_index": [1], "nodes": [{"type": "None"}]}', "does not exist"),
    ('{"root_index": 1, "nodes": [{"type": "None"}, {"type": "ffi.Array", "data": [1]}]}', "contains itself"),
    ('{"root_index": 1, "nodes": [{"type": "None"}, {"type": "prim.Call", "data": {}}]}', "integer arithmetic"),
])
def test_a_malformed_index_map_graph_is_one_clear_error(text: str, needle: str) -> None:
    with pytest.raises(ScheduleError, match=needle):
        IndexMap.from_json(text)
