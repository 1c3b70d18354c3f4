"""Lowering paths of the CPU code generator added for the default schedules' speed budgets, each checked against
numpy on seeded inputs and for the IR shape it is meant to produce (docs/architecture.md,
"Tuner"; `msdb.tuner.codegen.emit`):

- strided vector loads (a stride-2 conv's input row) are one wide load and a shufflevector;
- with `EmitOptions.exact_lanes`, vectorized loops of any extent up to 64 lanes are vectors of
  exactly that length, not power-of-two vectors with masked-off lanes (the default);
- a scalar `if_then_else` whose arms load (padding inlined into a conv) is a select over
  guarded loads, without branches, and still never touches the untaken arm's address.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from msdb.records.target import Target
from msdb.ir import from_script
from msdb.tuner import build
from msdb.tuner.codegen import compile_module
from msdb.tuner.codegen.masked import piece_width
from msdb.tuner.space.register_tile import vector_lanes
from msdb.tuner.codegen.emit import EmitOptions


def _strided_script(lanes: int, stride: int, reverse: bool) -> str:
    n = lanes * abs(stride) + 3
    index = f"{n - 1} - vj * {stride}" if reverse else f"vj * {stride} + 1"
    return f'''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((4, {n}), "float32"), O: T.Buffer((4, {lanes}), "float32")):
    for i in range(4):
        for j in T.vectorized({lanes}):
            with T.block("O"):
                vi, vj = T.axis.remap("SS", [i, j])
                O[vi, vj] = A[vi, {index}] * T.float32(2) + T.float32(1)
'''


@pytest.mark.parametrize("lanes,stride,reverse", [(16, 2, False), (7, 2, False), (8, 3, False), (16, 4, False),
                                                  (8, 2, True), (5, 3, True)])
def test_strided_vector_load_is_a_wide_load_and_a_shuffle(lanes: int, stride: int, reverse: bool, isa_target: Target) -> None:
    mod = from_script(_strided_script(lanes, stride, reverse))
    options = EmitOptions(exact_lanes=True)  # padded lanes would be masked: those stay gathers
    compiled = compile_module(mod, isa_target, options=options)
    span = (lanes - 1) * stride + 1
    assert f"load <{span} x float>" in compiled.llvm_ir
    assert "shufflevector" in compiled.llvm_ir and "insertelement <" not in compiled.llvm_ir.split("shufflevector")[0]
    n = lanes * stride + 3
    a = np.random.default_rng(0).uniform(-1, 1, size=(4, n)).astype("float32")
    out = np.zeros((4, lanes), dtype="float32")
    build(mod, isa_target, options=options)(a, out)
    cols = n - 1 - stride * np.arange(lanes) if reverse else stride * np.arange(lanes) + 1
    np.testing.assert_array_equal(out, a[:, cols] * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("lanes,stride,reverse", [(7, 2, False), (14, 2, False), (5, 3, True)])
def test_strided_load_with_padding_lanes_is_a_masked_wide_load(lanes: int, stride: int, reverse: bool, isa_target: Target) -> None:
    """Padded to a power of two (the default), the wide load is masked to the active lanes'
    span: the padding lanes' addresses may be past the buffer."""
    mod = from_script(_strided_script(lanes, stride, reverse))
    ir_text = compile_module(mod, isa_target).llvm_ir
    padded = 1 << (lanes - 1).bit_length()
    span = (padded - 1) * stride + 1
    # in pieces of at most one register (tuner/codegen/masked.py)
    piece = piece_width(span, vector_lanes(isa_target))
    assert f"llvm.masked.load.v{piece}f32" in ir_text and "llvm.masked.gather" not in ir_text
    n = lanes * stride + 3
    a = np.random.default_rng(3).uniform(-1, 1, size=(4, n)).astype("float32")
    out = np.zeros((4, lanes), dtype="float32")
    build(mod, isa_target)(a, out)
    cols = n - 1 - stride * np.arange(lanes) if reverse else stride * np.arange(lanes) + 1
    np.testing.assert_array_equal(out, a[:, cols] * np.float32(2) + np.float32(1))


def test_strides_above_the_limit_stay_scalar_loads(isa_target: Target) -> None:
    compiled = compile_module(from_script(_strided_script(8, 7, False)), isa_target)
    assert "shufflevector <50 x float>" not in compiled.llvm_ir
    assert "insertelement <8 x float>" in compiled.llvm_ir


def _odd_script(extent: int) -> str:
    return f'''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((3, {extent}), "float32"), B: T.Buffer((3, {extent}), "float32"),
         O: T.Buffer((3, {extent}), "float32")):
    for i in range(3):
        for j in T.vectorized({extent}):
            with T.block("O"):
                vi, vj = T.axis.remap("SS", [i, j])
                O[vi, vj] = T.max(A[vi, vj] * B[vi, vj] + A[vi, vj], T.float32(0.25))
'''


EXACT = EmitOptions(exact_lanes=True)


@pytest.mark.parametrize("extent,width,exact", [(7, 7, True), (14, 14, True), (28, 28, True), (43, 43, True),
                                                (100, 4, True), (7, 8, False), (28, 32, False), (100, 16, False)])
def test_odd_extents_exact_or_padded(extent: int, width: int, exact: bool, isa_target: Target) -> None:
    mod = from_script(_odd_script(extent))
    options = EXACT if exact else EmitOptions()
    ir_text = compile_module(mod, isa_target, options=options).llvm_ir
    assert f"<{width} x float>" in ir_text
    assert ("llvm.masked" in ir_text) != exact  # padding lanes are masked off, exact vectors have none
    rng = np.random.default_rng(1)
    a, b = (rng.uniform(-1, 1, size=(3, extent)).astype("float32") for _ in range(2))
    out = np.zeros((3, extent), dtype="float32")
    build(mod, isa_target, options=options)(a, b, out)
    np.testing.assert_allclose(out, np.maximum(a * b + a, np.float32(0.25)), rtol=1e-6, atol=1e-7)


PREDICATED_ODD = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((7,), "float32"), O: T.Buffer((7,), "float32")):
    for j in T.vectorized(7):
        with T.block("O"):
            vj = T.axis.spatial(7, j)
            O[vj] = T.if_then_else(vj >= 2, A[vj - 2], T.float32(-1))
'''


def test_odd_length_vector_with_a_lane_dependent_condition(isa_target: Target) -> None:
    mod = from_script(PREDICATED_ODD)
    assert "<7 x i1>" in compile_module(mod, isa_target, options=EXACT).llvm_ir  # the condition's mask, at the exact width
    a = np.arange(7, dtype="float32") + 10
    out = np.zeros(7, dtype="float32")
    build(mod, isa_target, options=EXACT)(a, out)
    np.testing.assert_array_equal(out, np.array([-1, -1, 10, 11, 12, 13, 14], dtype="float32"))


PADDED_CONV_ROW = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((6, 6), "float32"), W: T.Buffer((3, 3), "float32"), O: T.Buffer((6, 6), "float32")):
    for i, j, ry, rx in T.grid(6, 6, 3, 3):
        with T.block("O"):
            vi, vj, vry, vrx = T.axis.remap("SSRR", [i, j, ry, rx])
            with T.init():
                O[vi, vj] = T.float32(0)
            O[vi, vj] = O[vi, vj] + T.if_then_else(1 <= vi + vry and vi + vry < 7 and 1 <= vj + vrx and vj + vrx < 7,
                                                   A[vi + vry - 1, vj + vrx - 1], T.float32(0)) * W[vry, vrx]
'''


def test_padding_if_then_else_is_branch_free_and_correct(isa_target: Target) -> None:
    mod = from_script(PADDED_CONV_ROW)
    ir_text = compile_module(mod, isa_target).llvm_ir
    assert "ite_then" not in ir_text and re.search(r"select\s+i1 %\S+, ptr", ir_text)  # a guarded address
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, size=(6, 6)).astype("float32")
    w = rng.uniform(-1, 1, size=(3, 3)).astype("float32")
    out = np.zeros((6, 6), dtype="float32")
    build(mod, isa_target)(a, w, out)
    padded = np.pad(a, 1)
    expected = np.zeros((6, 6), dtype="float32")
    for ry in range(3):
        for rx in range(3):
            expected += padded[ry:ry + 6, rx:rx + 6] * w[ry, rx]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


FAR_ARM = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((16,), "float32"), O: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("O"):
            vi = T.axis.spatial(16, i)
            O[vi] = T.if_then_else(A[vi] >= T.float32(0), A[vi], A[vi + T.int64(1099511627776)])
'''

DIVIDING_ARM = '''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((16,), "float32"), N: T.Buffer((1,), "int32"), O: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("O"):
            vi = T.axis.spatial(16, i)
            O[vi] = T.if_then_else(N[0] != 0, A[T.floormod(vi, N[0])], T.float32(3))
'''


def test_speculated_arm_never_reads_the_untaken_address(isa_target: Target) -> None:
    mod = from_script(FAR_ARM)
    assert "ite_then" not in compile_module(mod, isa_target).llvm_ir
    a = np.arange(16, dtype="float32")
    out = np.zeros(16, dtype="float32")
    build(mod, isa_target)(a, out)  # A >= 0: the untaken arm is 4 TiB past A, a crash if it were read
    np.testing.assert_array_equal(out, a)


def test_an_arm_dividing_by_a_variable_keeps_its_branch(isa_target: Target) -> None:
    mod = from_script(DIVIDING_ARM)
    assert "ite_then" in compile_module(mod, isa_target).llvm_ir  # evaluated eagerly, it would divide by zero
    a = np.arange(16, dtype="float32")
    out = np.zeros(16, dtype="float32")
    build(mod, isa_target)(a, np.zeros(1, dtype="int32"), out)
    np.testing.assert_array_equal(out, np.full(16, 3, dtype="float32"))
    build(mod, isa_target)(a, np.array([5], dtype="int32"), out)
    np.testing.assert_array_equal(out, a[np.arange(16) % 5])


_NCHW_CONV_7X7 = '''
from tvm.script import tir as T
@T.prim_func
def main(X: T.Buffer((1, 32, 7, 7), "float32"), W: T.Buffer((32, 32, 3, 3), "float32"),
         Y: T.Buffer((1, 32, 7, 7), "float32")):
    T.func_attr({"tir.noalias": True})
    pad = T.alloc_buffer((1, 32, 9, 9))
    for i0, i1, i2, i3 in T.grid(1, 32, 9, 9):
        with T.block("pad"):
            n, c, h, w = T.axis.remap("SSSS", [i0, i1, i2, i3])
            pad[n, c, h, w] = T.if_then_else(1 <= h and h < 8 and 1 <= w and w < 8, X[n, c, h - 1, w - 1],
                                             T.float32(0))
    for nn, ff, yy, xx, rc, ry, rx in T.grid(1, 32, 7, 7, 32, 3, 3):
        with T.block("conv"):
            n, f, y, x, c, r, s = T.axis.remap("SSSSRRR", [nn, ff, yy, xx, rc, ry, rx])
            with T.init():
                Y[n, f, y, x] = T.float32(0)
            Y[n, f, y, x] = Y[n, f, y, x] + pad[n, c, y + r, x + s] * W[f, c, r, s]
'''


def test_contraction_decided_in_the_ir_costs_a_padded_accumulator_no_memory_traffic(isa_target: Target) -> None:
    """A conv in TVM's layout whose output rows are 7 wide gets 7-lane vectors padded to 8, and
    its accumulators live in memory (masked lanes cannot stay in registers); LLVM folds each
    store of an accumulator into its next load within a step of the reduction. It must do so as
    well when the sum is msdb's `llvm.fmuladd` as when it is a product and a sum (the masked
    loads and stores within a quarter of each other's count): a masked load's padding lanes
    are poison (`masked._passthru`). With zero there LLVM kept every store and load (1.6x the
    count with AVX2, 5x with AVX-512), and ResNet-18's 7 x 7 and 14 x 14 convs ran 3x slower.
    The values are numpy's."""
    from msdb.tuner.space.default_schedule import default_schedule

    sch = default_schedule(from_script(_NCHW_CONV_7X7), isa_target)
    counts = []
    for options in (EmitOptions(), EmitOptions(fast_math=())):
        optimized = compile_module(sch.mod, isa_target, options=options).optimized_ir()
        assert ("llvm.fmuladd" in optimized) == bool(options.fast_math)
        counts.append((optimized.count("call void @llvm.masked.store."), optimized.count("@llvm.masked.load.")))
    fused, plain = (sum(c) for c in counts)
    assert counts[1][0] > 0 and fused <= 1.25 * plain, counts
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, 32, 7, 7)).astype("float32")
    w = rng.uniform(-1, 1, (32, 32, 3, 3)).astype("float32")
    y = np.zeros((1, 32, 7, 7), dtype="float32")
    build(sch.mod, isa_target)(x, w, y)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = np.zeros_like(y)
    for r in range(3):
        for s in range(3):
            expected += np.einsum("nchw,fc->nfhw", padded[:, :, r:r + 7, s:s + 7], w[:, :, r, s])
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def test_a_library_call_on_a_padded_vector_runs_for_the_loops_lanes_only(isa_target: Target) -> None:
    """A C math call goes lane by lane; on a 7-lane vector padded to 8 it is called for the 7
    lanes of the loop, never on a padding lane (whose loaded value is poison), and the values
    are numpy's."""
    mod = from_script('''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((3, 7), "float32"), B: T.Buffer((3, 7), "float32")):
    for i in range(3):
        for j in T.vectorized(7):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.atan(A[vi, vj]) + T.atan2(A[vi, vj], T.float32(2))
''')
    compiled = compile_module(mod, isa_target)
    assert compiled.llvm_ir.count('call float @"atanf"(') == 7
    assert compiled.llvm_ir.count('call float @"atan2f"(') == 7
    a = np.random.default_rng(0).uniform(-3, 3, (3, 7)).astype("float32")
    b = np.zeros((3, 7), dtype="float32")
    build(mod, isa_target)(a, b)
    np.testing.assert_allclose(b, np.arctan(a) + np.arctan2(a, np.float32(2)), rtol=1e-5, atol=1e-6)


def test_a_condition_on_a_padded_load_keeps_the_padding_lanes_off(isa_target: Target) -> None:
    """A lane-dependent condition reads a padding lane as poison (`masked._passthru`), so the
    masks built on it are a select on the padding mask, not an `and`, which would pass poison
    on and let LLVM treat a padding lane as on (a store past the row, a division by what the
    lane held). The values are numpy's, for a guarded division and a conditional store."""
    mod = from_script('''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((4, 7), "int32"), D: T.Buffer((4, 7), "int32"), B: T.Buffer((4, 7), "int32"),
         C: T.Buffer((4, 7), "int32")):
    for i in range(4):
        for j in T.vectorized(7):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.if_then_else(D[vi, vj] != 0, T.floordiv(A[vi, vj], D[vi, vj]), 0)
                if A[vi, vj] > 0:
                    C[vi, vj] = A[vi, vj] * 2
''')
    text = compile_module(mod, isa_target).llvm_ir
    anded = re.findall(r'(%"[\w.]+") = and <8 x i1>', text)
    masked_ops = [line for line in text.splitlines() if "call" in line and "llvm.masked." in line]
    assert masked_ops and not [line for line in masked_ops if any(name in line for name in anded)]
    assert re.search(r"select\s+<8 x i1> <i1 1, i1 1, i1 1, i1 1, i1 1, i1 1, i1 1, i1 0>", text)
    rng = np.random.default_rng(0)
    a = rng.integers(-50, 50, (4, 7)).astype("int32")
    d = rng.integers(-3, 4, (4, 7)).astype("int32")
    b = np.full((4, 7), 77, dtype="int32")
    c = np.full((4, 7), 5, dtype="int32")
    build(mod, isa_target)(a, d, b, c)
    np.testing.assert_array_equal(b, np.where(d != 0, a // np.where(d == 0, 1, d), 0))
    np.testing.assert_array_equal(c, np.where(a > 0, a * 2, 5))


PADDING_GATHER = '''
from tvm.script import tir as T
@T.prim_func
def main(X: T.Buffer((2, 6, 5), "float32"), P: T.Buffer((2, 8, 7), "float32")):
    for c, r in T.grid(2, 2):
        for f in T.vectorized(28):
            with T.block("pad"):
                vc = T.axis.spatial(2, c)
                vh = T.axis.spatial(8, r * 4 + f // 7)
                vw = T.axis.spatial(7, f % 7)
                P[vc, vh, vw] = T.if_then_else(1 <= vh and vh < 7 and 1 <= vw and vw < 6, X[vc, vh - 1, vw - 1],
                                               T.float32(0))
'''


def test_a_gather_under_a_lane_dependent_mask_reads_guarded_addresses_without_branches(isa_target: Target) -> None:
    """Padding copied by a vectorized loop over fused rows and columns reads its input through
    a gather whose mask is the padding condition, which depends on the row loop. As a masked
    gather, LLVM gave each lane a branch (a heavily unrolled ResNet-18 conv had 8,000 blocks
    and took 10 s to compile); now the masked-off lanes read the buffer's first element and a
    select gives zero there (`_Emitter.guarded_pointers`): no gather takes a computed mask, the
    optimized code has no branch per lane, and the values are numpy's padding."""
    mod = from_script(PADDING_GATHER)
    compiled = compile_module(mod, isa_target)
    gathers = [line for line in compiled.llvm_ir.splitlines() if "call" in line and "llvm.masked.gather" in line]
    assert gathers and all(re.search(r"<\d+ x i1> <i1 1(, i1 1)*>", line) for line in gathers)
    assert re.search(r"select\s+<\d+ x i1> %\S+, <\d+ x ptr>", compiled.llvm_ir)  # the guarded addresses
    blocks = re.findall(r"^[\w.\"]+:", compiled.optimized_ir(), re.M)
    assert len(blocks) < 16, len(blocks)  # 74 with a branch per masked lane
    x = np.random.default_rng(3).standard_normal((2, 6, 5)).astype("float32")
    padded = np.full((2, 8, 7), 9, dtype="float32")
    build(mod, isa_target)(x, padded)
    np.testing.assert_array_equal(padded, np.pad(x, ((0, 0), (1, 1), (1, 1))))


def test_unrolled_vector_lanes_and_constant_mask_pieces_are_constants(isa_target: Target) -> None:
    """In unrolled code a vectorized loop's lane indices and the pieces of a constant mask are
    known when the IR is written: they are constants, not instructions LLVM must parse and
    fold (a heavily unrolled conv's text was 30% such instructions)."""
    mod = from_script('''
from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((4, 40), "float32"), B: T.Buffer((4, 40), "float32")):
    for i in T.unroll(4):
        for j in T.vectorized(40):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)
''')
    text = compile_module(mod, isa_target).llvm_ir
    assert not re.search(r"= add( nsw)? <\d+ x i64> <", text)  # lane indices of a constant base
    assert not re.search(r"shufflevector <\d+ x i1> <", text)  # a piece of a constant mask
    a = np.random.default_rng(4).standard_normal((4, 40)).astype("float32")
    b = np.zeros((4, 40), dtype="float32")
    build(mod, isa_target)(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
