"""The TE builder: graph construction, lowering to blocks the way TVM's `te.create_prim_func`
does, and the simplification of stored values (pinned against real TVM 0.27)."""

from __future__ import annotations

import numpy as np
import pytest

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir import te
from msdb.ir.function import PrimFunc
from msdb.ir.interpreter import interpret


def sx(e: E.PrimExpr) -> str:
    """Prefix form with dtypes (the same notation the TVM reference values were written in)."""
    if isinstance(e, E.IntImm):
        return f"{e.dtype}({e.value})"
    if isinstance(e, E.FloatImm):
        return f"{e.dtype}({float(e.value)!r})"
    if isinstance(e, E.Var):
        return f"{e.name}:{e.dtype}"
    if isinstance(e, E.BufferLoad):
        return f"{e.buffer.name}[{', '.join(sx(i) for i in e.indices)}]"
    if isinstance(e, E.BinaryOp):
        return f"({type(e).__name__}:{e.dtype} {sx(e.a)} {sx(e.b)})"
    if isinstance(e, E.Call):
        return f"(call:{e.op}:{e.dtype} {' '.join(sx(a) for a in e.args)})"
    if isinstance(e, E.Cast):
        return f"(Cast:{e.dtype} {sx(e.value)})"
    raise AssertionError(f"unexpected node {e!r}")


def blocks(func: PrimFunc) -> list[S.Block]:
    found: list[S.Block] = []

    def walk(s: S.Stmt) -> None:
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                walk(x)
        elif isinstance(s, S.For):
            walk(s.body)
        elif isinstance(s, S.BlockRealize):
            found.append(s.block)
            walk(s.block.body)

    walk(func.body)
    return found[1:]  # without the root


def loops(func: PrimFunc) -> list[list[S.For]]:
    """The loop nest above each block, outermost first."""
    nests: list[list[S.For]] = []
    seqs = func.root_block.body
    for top in (seqs.seq if isinstance(seqs, S.SeqStmt) else (seqs,)):
        nest = []
        s = top
        while isinstance(s, S.For):
            nest.append(s)
            s = s.body
        nests.append(nest)
    return nests


def matmul(n: int = 4, m: int = 5, k: int = 6):
    a = te.placeholder((n, k), name="A")
    b = te.placeholder((k, m), name="B")
    kk = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, kk] * b[kk, j], axis=kk), name="C")
    return a, b, c


# ---------------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------------


def test_tensors_have_shape_dtype_and_name():
    a = te.placeholder((3, 4), dtype="float16", name="A")
    assert [E.const_int(d) for d in a.shape] == [3, 4]
    assert a.dtype == "float16" and a.name == "A" and a.ndim == 2
    assert all(d.dtype == "int32" for d in a.shape)
    b = te.compute((3,), lambda i: a[i, 0].astype("float32"))
    assert b.dtype == "float32" and b.name == "compute"
    assert te.placeholder((2,)).name == "placeholder"


def test_chained_tuple_and_call_indexing_read_the_same_element():
    a = te.placeholder((3, 4, 5), name="A")
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    loads = [a[i, j, k], a[i][j][k], a[i, j][k], a(i, j, k), a[(i, j, k)]]
    for load in loads:
        assert isinstance(load, E.BufferLoad)
        assert [x is y for x, y in zip(load.indices, (i, j, k))] == [True] * 3
    assert sx(a[0, j, 1]) == "A[int32(0), j:int32, int32(1)]"


def test_axis_names_follow_the_lambda_and_default_to_i0_i1():
    a = te.placeholder((2, 3), name="A")
    named = te.compute((2, 3), lambda row, col: a[row, col], name="named")
    varargs = te.compute((2, 3), lambda *idx: a[idx], name="varargs")
    mixed = te.compute((2, 3), lambda row, *rest: a[row, rest[0]], name="mixed")
    f = te.create_prim_func([a, named, varargs, mixed])
    assert [[l.loop_var.name for l in nest] for nest in loops(f)] == [["row", "col"], ["i0", "i1"], ["row", "i0"]]
    assert [[iv.var.name for iv in b.iter_vars] for b in blocks(f)] == [["v_row", "v_col"], ["v_i0", "v_i1"], ["v_row", "v_i0"]]


def test_reduce_axis_takes_a_range_or_an_extent():
    k1 = te.reduce_axis((2, 10), name="k1")
    k2 = te.reduce_axis(7)
    assert (E.const_int(k1.dom.min), E.const_int(k1.dom.extent)) == (2, 8)
    assert (E.const_int(k2.dom.min), E.const_int(k2.dom.extent)) == (0, 7)
    assert k2.name == "rv" and k2.var is k2 and k2.iter_type == S.IterType.COMM_REDUCE


def test_symbolic_and_64_bit_extents_give_matching_loop_types():
    n = te.var("n")
    a = te.placeholder((n, 4), name="A")
    b = te.compute((n, 4), lambda i, j: a[i, j] * 2.0, name="B")
    f = te.create_prim_func([a, b])
    (nest,) = loops(f)
    assert nest[0].extent is n and nest[0].loop_var.dtype == "int32"
    big = te.placeholder((2**31 + 2,), name="big")
    k = te.reduce_axis((0, 2**31 + 2), name="k")
    total = te.compute((1,), lambda i: te.sum(big[k], axis=k), name="total")
    (_, k_loop), = loops(te.create_prim_func([big, total]))
    assert (k_loop.loop_var.dtype, k_loop.min.dtype, k_loop.extent.dtype) == ("int64", "int64", "int64")
    (block,) = blocks(te.create_prim_func([big, total]))
    assert [iv.var.dtype for iv in block.iter_vars] == ["int32", "int64"]


# ---------------------------------------------------------------------------------------------
# Lowering
# ---------------------------------------------------------------------------------------------


def test_matmul_lowers_to_one_block_in_a_spatial_then_reduce_loop_nest():
    a, b, c = matmul()
    f = te.create_prim_func([a, b, c])
    assert [p.name for p in f.params] == ["A", "B", "C"] and all(p.dtype == "handle" for p in f.params)
    assert [f.buffer_map[p].name for p in f.params] == ["A", "B", "C"]
    assert dict(f.attrs) == {"global_symbol": "main", "tir.noalias": True}
    root = f.root_block
    assert root.name_hint == "root" and root.iter_vars == () and root.alloc_buffers == ()
    (nest,) = loops(f)
    assert [(l.loop_var.name, E.const_int(l.min), E.const_int(l.extent), l.kind) for l in nest] == [
        ("i", 0, 4, S.ForKind.SERIAL), ("j", 0, 5, S.ForKind.SERIAL), ("k", 0, 6, S.ForKind.SERIAL)]
    realize = nest[-1].body
    assert isinstance(realize, S.BlockRealize) and sx(realize.predicate) == "bool(1)"
    assert all(v is l.loop_var for v, l in zip(realize.iter_values, nest))
    (block,) = blocks(f)
    assert block.name_hint == "C"
    assert [(iv.var.name, iv.iter_type, E.const_int(iv.dom.extent)) for iv in block.iter_vars] == [
        ("v_i", S.IterType.DATA_PAR, 4), ("v_j", S.IterType.DATA_PAR, 5), ("v_k", S.IterType.COMM_REDUCE, 6)]
    assert sx(block.init.value) == "float32(0.0)"
    assert sx(block.body.value) == "(Add:float32 C[v_i:int32, v_j:int32] (Mul:float32 A[v_i:int32, v_k:int32] B[v_k:int32, v_j:int32]))"
    assert [sx(i) for i in block.body.indices] == ["v_i:int32", "v_j:int32"]
    assert [r.buffer.name for r in block.reads] == ["A", "B"]
    assert [r.buffer.name for r in block.writes] == ["C"]
    assert [(sx(r.min), sx(r.extent)) for r in block.reads[1].region] == [("v_k:int32", "int32(1)"), ("v_j:int32", "int32(1)")]


def test_intermediates_are_root_allocations_in_topological_order():
    x = te.placeholder((4,), name="x")
    y = te.placeholder((4,), name="y")
    a = te.compute((4,), lambda i: x[i] * 2.0, name="a")
    b = te.compute((4,), lambda i: y[i] + 1.0, name="b")
    out = te.compute((4,), lambda i: a[i] + b[i] + a[i], name="out")
    f = te.create_prim_func([y, x, out])
    assert [f.buffer_map[p].name for p in f.params] == ["y", "x", "out"]
    assert [buf.name for buf in f.root_block.alloc_buffers] == ["a", "b"]
    assert [blk.name_hint for blk in blocks(f)] == ["a", "b", "out"]
    # an output that is also read by another output stays a parameter, not an allocation
    g = te.create_prim_func([x, y, a, out])
    assert [buf.name for buf in g.root_block.alloc_buffers] == ["b"]


def test_reducer_identities_and_combiners():
    a = te.placeholder((8,), name="a")
    ai = te.placeholder((8,), dtype="int32", name="ai")
    k = te.reduce_axis((0, 8), name="k")
    cases = [
        (te.compute((1,), lambda i: te.sum(a[k], axis=k), name="s"), "float32(0.0)", E.Add),
        (te.compute((1,), lambda i: te.max(a[k], axis=k), name="mx"), "float32(-3.4028234663852886e+38)", E.Max),
        (te.compute((1,), lambda i: te.min(a[k], axis=[k]), name="mn"), "float32(3.4028234663852886e+38)", E.Min),
        (te.compute((1,), lambda i: te.max(ai[k], axis=k), name="mxi"), "int32(-2147483648)", E.Max),
        (te.compute((1,), lambda i: te.min(ai[k], axis=k), name="mni"), "int32(2147483647)", E.Min),
    ]
    for out, identity, combiner in cases:
        src = ai if out.dtype == "int32" else a
        (block,) = blocks(te.create_prim_func([src, out]))
        assert sx(block.init.value) == identity
        assert type(block.body.value) is combiner
        assert isinstance(block.body.value.a, E.BufferLoad) and block.body.value.a.buffer.name == out.name


def test_max_and_min_of_two_operands_are_elementwise():
    a = te.placeholder((4,), name="a")
    i = E.Var("i")
    assert sx(te.max(a[i], 0.0)) == "(Max:float32 a[i:int32] float32(0.0))"
    assert sx(te.min(a[i], te.const(1, "float32"))) == "(Min:float32 a[i:int32] float32(1.0))"
    assert sx(te.sum(a[i], 2.0)) == "(Add:float32 a[i:int32] float32(2.0))"


def test_duplicate_names_are_made_unique_like_tvm():
    # TVM names blocks compute, compute_1 and prints the buffers as A, A_1 / compute, compute_1.
    a = te.placeholder((4, 4), name="A")
    r1 = te.relu(a)
    r2 = te.relu(r1)
    d = te.compute((4, 4), lambda i, j: r2[i, j] + 1.0, name="A")
    f = te.create_prim_func([a, d])
    assert [f.buffer_map[p].name for p in f.params] == ["A", "A_1"]
    assert [p.name for p in f.params] == ["A", "A_1"]
    assert [b.name for b in f.root_block.alloc_buffers] == ["compute", "compute_1"]
    assert [b.name_hint for b in blocks(f)] == ["compute", "compute_1", "A"]


def test_relu_is_topis_compute():
    a = te.placeholder((2, 3), name="A")
    f = te.create_prim_func([a, te.relu(a)])
    (block,) = blocks(f)
    assert block.name_hint == "compute"
    assert [iv.var.name for iv in block.iter_vars] == ["v_i0", "v_i1"]
    assert sx(block.body.value) == "(Max:float32 A[v_i0:int32, v_i1:int32] float32(0.0))"


def test_softmax_has_topis_four_stages():
    a = te.placeholder((3, 5), name="A")
    f = te.create_prim_func([a, te.softmax(a, axis=1)])
    bs = blocks(f)
    assert [b.name_hint for b in bs] == ["T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"]
    assert [[iv.var.name for iv in b.iter_vars] for b in bs] == [["v_i0", "v_k"], ["v_i0", "v_i1"], ["v_i0", "v_k"], ["v_i0", "v_i1"]]
    assert dict(bs[3].annotations) == {"axis": 1} and all(not b.annotations for b in bs[:3])
    assert sx(bs[1].body.value) == "(call:exp:float32 (Sub:float32 A[v_i0:int32, v_i1:int32] T_softmax_maxelem[v_i0:int32]))"
    assert sx(bs[3].body.value) == "(Div:float32 T_softmax_exp[v_i0:int32, v_i1:int32] T_softmax_expsum[v_i0:int32])"
    assert sx(bs[0].init.value) == "float32(-3.4028234663852886e+38)"


def test_pad_guards_only_padded_dimensions_and_a_zero_pad_is_a_copy():
    x = te.placeholder((1, 5, 6), name="x")
    f = te.create_prim_func([x, te.pad(x, [0, 2, 0], [0, 1, 3])])
    (block,) = blocks(f)
    assert block.name_hint == "PadInput"
    assert [E.const_int(d) for d in f.buffers[1].shape] == [1, 8, 9]
    assert sx(block.body.value) == (
        "(call:if_then_else:float32 (And:bool (And:bool (And:bool (LE:bool int32(2) v_i1:int32) "
        "(LT:bool v_i1:int32 int32(7))) (LE:bool int32(0) v_i2:int32)) (LT:bool v_i2:int32 int32(6))) "
        "x[v_i0:int32, (Sub:int32 v_i1:int32 int32(2)), v_i2:int32] float32(0.0))"
    )
    g = te.create_prim_func([x, te.pad(x, [0, 0, 0], name="P")])
    (copy,) = blocks(g)
    assert copy.name_hint == "P" and sx(copy.body.value) == "x[v_i0:int32, v_i1:int32, v_i2:int32]"


def test_index_arithmetic_of_a_convolution_is_folded_as_tvm_does():
    # stride 1, dilation 1 and a single group fold away at construction in TVM
    x = te.placeholder((1, 6, 8), name="x")
    w = te.placeholder((3, 8, 8), name="w")
    rl = te.reduce_axis((0, 3), name="rl")
    rc = te.reduce_axis((0, 8), name="rc")
    out = te.compute((1, 4, 8), lambda n, l, co: te.sum(
        x[n, l * 1 + rl * 1, co // 8 * 8 + rc] * w[rl, rc, co % 1 + co], axis=[rl, rc]), name="out")
    (block,) = blocks(te.create_prim_func([x, w, out]))
    assert sx(block.body.value.b) == (
        "(Mul:float32 x[v_n:int32, (Add:int32 v_l:int32 v_rl:int32), "
        "(Add:int32 (Mul:int32 (FloorDiv:int32 v_co:int32 int32(8)) int32(8)) v_rc:int32)] "
        "w[v_rl:int32, v_rc:int32, v_co:int32])"
    )


def test_casts_to_the_same_dtype_disappear_and_others_stay():
    a = te.placeholder((4,), dtype="int8", name="a")
    k = te.reduce_axis((0, 4), name="k")
    out = te.compute((1,), lambda i: te.sum(a[k].astype("int32") * a[k].astype("int8").astype("int32"), axis=k), name="o")
    (block,) = blocks(te.create_prim_func([a, out]))
    assert out.dtype == "int32"
    assert sx(block.body.value.b) == "(Mul:int32 (Cast:int32 a[v_k:int32]) (Cast:int32 a[v_k:int32]))"
    assert sx(block.init.value) == "int32(0)"


def test_lowered_programs_compute_what_they_describe():
    rng = np.random.default_rng(7)
    x = te.placeholder((3, 5), name="x")
    k = te.reduce_axis((0, 5), name="k")
    rowmax = te.compute((3,), lambda i: te.max(x[i, k], axis=k), name="rowmax")
    clipped = te.compute((3, 5), lambda i, j: te.if_then_else(te.all(j >= 1, j < 4), x[i, j] - rowmax[i], 0.0), name="clipped")
    total = te.compute((3,), lambda i: te.sum(te.exp(clipped[i, k]) * 2.0, axis=k), name="total")
    f = te.create_prim_func([x, total])
    xs = rng.standard_normal((3, 5)).astype("float32")
    out = np.zeros(3, "float32")
    interpret(f, xs, out)
    mid = np.where((np.arange(5) >= 1) & (np.arange(5) < 4), xs - xs.max(1, keepdims=True), 0.0)
    np.testing.assert_allclose(out, (np.exp(mid) * 2.0).sum(1), rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Simplification: TVM 0.27's `arith.Analyzer().simplify` results, pinned
# ---------------------------------------------------------------------------------------------

# (expression over int32 vars h r c i j and float32 x, TVM's simplified result)
SIMPLIFY_CASES = [
    ('r + h * 2', '(Add:int32 (Mul:int32 h:int32 int32(2)) r:int32)'),
    ('2 * h + r', '(Add:int32 (Mul:int32 h:int32 int32(2)) r:int32)'),
    ('h * 2 + r * 2', '(Add:int32 (Mul:int32 h:int32 int32(2)) (Mul:int32 r:int32 int32(2)))'),
    ('(h + r) // 2', '(FloorDiv:int32 (Add:int32 h:int32 r:int32) int32(2))'),
    ('3 - r', '(Sub:int32 int32(3) r:int32)'),
    ('h - 3', '(Sub:int32 h:int32 int32(3))'),
    ('h >= 3', '(LE:bool int32(3) h:int32)'),
    ('h > 3', '(LT:bool int32(3) h:int32)'),
    ('ALL(h >= 1, h < 5)', '(And:bool (LE:bool int32(1) h:int32) (LT:bool h:int32 int32(5)))'),
    ('c // 64 * 3 + r', '(Add:int32 (Mul:int32 (FloorDiv:int32 c:int32 int32(64)) int32(3)) r:int32)'),
    ('h + r + c', '(Add:int32 (Add:int32 h:int32 r:int32) c:int32)'),
    ('c + h', '(Add:int32 c:int32 h:int32)'),
    ('h * 2 + r + 1', '(Add:int32 (Add:int32 (Mul:int32 h:int32 int32(2)) r:int32) int32(1))'),
    ('1 + h', '(Add:int32 h:int32 int32(1))'),
    ('(h + 1) * 2', '(Add:int32 (Mul:int32 h:int32 int32(2)) int32(2))'),
    ('h - r', '(Sub:int32 h:int32 r:int32)'),
    ('NOT(h < 3)', '(LE:bool int32(3) h:int32)'),
    ('h * 1', 'h:int32'),
    ('h * (-1) + 3', '(Sub:int32 int32(3) h:int32)'),
    ('r * 2 + h * 2', '(Add:int32 (Mul:int32 r:int32 int32(2)) (Mul:int32 h:int32 int32(2)))'),
    ('ITE(h >= 1, x, x * 2.0)', '(call:if_then_else:float32 (LE:bool int32(1) h:int32) x:float32 (Mul:float32 x:float32 float32(2.0)))'),
    ('x * 1.0', 'x:float32'),
    ('x + 0.0', 'x:float32'),
    ('h + 0', 'h:int32'),
    ('h // 1', 'h:int32'),
    ('h % 1', 'int32(0)'),
    ('r - h * 2 + 5', '(Sub:int32 (Add:int32 r:int32 int32(5)) (Mul:int32 h:int32 int32(2)))'),
    ('r + c // 64', '(Add:int32 (FloorDiv:int32 c:int32 int32(64)) r:int32)'),
    ('r + c % 4', '(Add:int32 r:int32 (FloorMod:int32 c:int32 int32(4)))'),
    ('c % 4 + c // 64 + r', '(Add:int32 (Add:int32 (FloorDiv:int32 c:int32 int32(64)) r:int32) (FloorMod:int32 c:int32 int32(4)))'),
    ('h * 3 - h', '(Mul:int32 h:int32 int32(2))'),
    ('h + h', '(Mul:int32 h:int32 int32(2))'),
    ('h - h', 'int32(0)'),
    ('r * 2 - h * 2 - 7', '(Sub:int32 (Sub:int32 (Mul:int32 r:int32 int32(2)) (Mul:int32 h:int32 int32(2))) int32(7))'),
    ('(h * 4 + r) // 4', '(Add:int32 (FloorDiv:int32 r:int32 int32(4)) h:int32)'),
    ('(h + r) // 2 * 2', '(Mul:int32 (FloorDiv:int32 (Add:int32 h:int32 r:int32) int32(2)) int32(2))'),
    ('h * 2 + r < 10', '(LT:bool (Add:int32 (Mul:int32 h:int32 int32(2)) r:int32) int32(10))'),
    ('h + 1 < 5', '(LT:bool h:int32 int32(4))'),
    ('1 + h >= 2', '(LE:bool int32(1) h:int32)'),
    ('h * 2 * 3', '(Mul:int32 h:int32 int32(6))'),
    ('(h * 2) // 2', 'h:int32'),
    ('((h + r) % 2).equal(0)', '(EQ:bool (FloorMod:int32 (Add:int32 h:int32 r:int32) int32(2)) int32(0))'),
    ('c * 64 // 64', 'c:int32'),
    ('(c // 4) % 8', '(FloorDiv:int32 (FloorMod:int32 c:int32 int32(32)) int32(4))'),
    ('(c // 4) // 2', '(FloorDiv:int32 c:int32 int32(8))'),
    ('(c % 16) // 4', '(FloorDiv:int32 (FloorMod:int32 c:int32 int32(16)) int32(4))'),
    ('(c % 16) % 4', '(FloorMod:int32 c:int32 int32(4))'),
    ('(h * 4 + r) % 4', '(FloorMod:int32 r:int32 int32(4))'),
    ('(h * 4 + r + 5) // 4', '(Add:int32 (FloorDiv:int32 (Add:int32 r:int32 int32(5)) int32(4)) h:int32)'),
    ('(h * 4 + 8) // 4', '(Add:int32 h:int32 int32(2))'),
    ('(h * 6 + r) // 4', '(FloorDiv:int32 (Add:int32 (Mul:int32 h:int32 int32(6)) r:int32) int32(4))'),
    ('h + 1 <= 3', '(LE:bool h:int32 int32(2))'),
    ('h * 2 + 1 < r', '(LT:bool (Add:int32 (Mul:int32 h:int32 int32(2)) int32(1)) r:int32)'),
    ('h - r < 0', '(LT:bool (Sub:int32 h:int32 r:int32) int32(0))'),
    ('h * 2 + r * 2 < 4', '(LT:bool (Add:int32 h:int32 r:int32) int32(2))'),
    ('(h + r) * (c + 1)', '(Mul:int32 (Add:int32 h:int32 r:int32) (Add:int32 c:int32 int32(1)))'),
    ('h * c + r', '(Add:int32 (Mul:int32 h:int32 c:int32) r:int32)'),
    ('NOT(h.equal(1))', '(NE:bool h:int32 int32(1))'),
    ('NOT(h <= r)', '(LT:bool r:int32 h:int32)'),
    ('h // 2 + h // 2', '(Mul:int32 (FloorDiv:int32 h:int32 int32(2)) int32(2))'),
    ('(i * 8 + j) // 16', '(FloorDiv:int32 (Add:int32 (Mul:int32 i:int32 int32(8)) j:int32) int32(16))'),
    ('(i * 8 + j) % 16', '(FloorMod:int32 (Add:int32 (Mul:int32 i:int32 int32(8)) j:int32) int32(16))'),
    ('7 - i', '(Sub:int32 int32(7) i:int32)'),
    ('(i + 3) % 8', '(FloorMod:int32 (Add:int32 i:int32 int32(3)) int32(8))'),
    ('i * 4 + r - 1', '(Sub:int32 (Add:int32 (Mul:int32 i:int32 int32(4)) r:int32) int32(1))'),
    ('ALL(j + r >= 2, j + r < 10)', '(And:bool (LE:bool int32(2) (Add:int32 j:int32 r:int32)) (LT:bool (Add:int32 j:int32 r:int32) int32(10)))'),
    ('ITE(i > 0, x, 0.0)', '(call:if_then_else:float32 (LT:bool int32(0) i:int32) x:float32 float32(0.0))'),
    ('(r * 2) // 4', '(FloorDiv:int32 r:int32 int32(2))'),
    ('(r % 4) // 4', 'int32(0)'),
    ('(r * 2) % 8', '(Mul:int32 (FloorMod:int32 r:int32 int32(4)) int32(2))'),
    ('3 > r // 8', '(LT:bool r:int32 int32(24))'),
    ('h + 1 >= 3', '(LE:bool int32(2) h:int32)'),
    ('(3 - i) * 2 == 6', '(EQ:bool i:int32 int32(0))'),
    ('-(h * 2) > 8 - 2 * h * 0', '(LT:bool h:int32 int32(-4))'),
    ('i * 2 + 1 >= 2 * i', 'bool(1)'),
    ('MAX(h, 0)', '(Max:int32 h:int32 int32(0))'),
    ('MIN(h, 3)', '(Min:int32 h:int32 int32(3))'),
    ('ITE(ALL(i >= 1, i < 9), x, 0.0)', '(call:if_then_else:float32 (And:bool (LE:bool int32(1) i:int32) (LT:bool i:int32 int32(9))) x:float32 float32(0.0))'),
    ('x - x * 0.0', 'x:float32'),
    ('(h + 0) * (r * 1)', '(Mul:int32 h:int32 r:int32)'),
    ('h.equal(h)', 'bool(1)'),
]


def _eval_case(source: str) -> E.PrimExpr:
    names = {n: E.Var(n) for n in "hrcij"}
    names.update(x=E.Var("x", "float32"), ALL=te.all, ITE=te.if_then_else, NOT=E.Not, MAX=te.max, MIN=te.min)
    if "==" in source:  # `a == b` is Python identity on IR nodes; the case means an EQ node
        left, right = source.split("==")
        source = f"({left}).equal({right})"
    return eval(source, {}, names)  # noqa: S307 - test-local expression table


@pytest.mark.parametrize("source,expected", SIMPLIFY_CASES, ids=[c[0] for c in SIMPLIFY_CASES])
def test_simplify_matches_tvm(source, expected):
    assert sx(te.simplify(_eval_case(source))) == expected


def test_simplify_folds_constants_with_tvm_semantics():
    assert sx(te.simplify(E.FloorDiv(E.IntImm("int32", -7), E.IntImm("int32", 2)))) == "int32(-4)"
    assert sx(te.simplify(E.FloorMod(E.IntImm("int32", -7), E.IntImm("int32", 2)))) == "int32(1)"
    assert sx(te.simplify(E.Div(E.IntImm("int32", -7), E.IntImm("int32", 2)))) == "int32(-3)"
    assert sx(te.simplify(E.Mod(E.IntImm("int32", -7), E.IntImm("int32", 2)))) == "int32(-1)"
    assert sx(te.simplify(E.Add(E.FloatImm("float32", 1.5), E.FloatImm("float32", 2.0)))) == "float32(3.5)"
    assert sx(te.simplify(E.Cast("float32", E.IntImm("int32", 3)))) == "float32(3.0)"
    assert sx(te.simplify(E.Cast("int8", E.IntImm("int32", 200)))) == "int8(-56)"
    one = E.IntImm("bool", 1)
    x = E.Var("x", "float32")
    assert sx(te.simplify(te.if_then_else(one, x, 0.0))) == "x:float32"
    assert sx(te.simplify(E.And(one, E.LT(E.Var("h"), E.IntImm("int32", 3))))) == "(LT:bool h:int32 int32(3))"


# ---------------------------------------------------------------------------------------------
# Misuse
# ---------------------------------------------------------------------------------------------


def test_wrong_index_counts_are_rejected():
    a = te.placeholder((2, 3), name="A")
    with pytest.raises(te.TEError, match="has 2 dimensions, indexed with 3"):
        a[0, 1, 2]
    with pytest.raises(te.TEError, match="too few indices"):
        te.compute((2,), lambda i: a[i])
    with pytest.raises(te.TEError, match="integer"):
        a[0.5, 1]
    with pytest.raises(te.TEError, match="takes 1 index arguments, the shape has 2"):
        te.compute((2, 3), lambda i: a[i, 0])


def test_reductions_must_be_whole_bodies_of_reduce_axes():
    a = te.placeholder((4,), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(te.TEError, match="whole body"):
        te.compute((1,), lambda i: te.sum(a[k], axis=k) + 1.0)
    with pytest.raises(te.TEError, match="whole body"):
        te.compute((1,), lambda i: te.exp(te.sum(a[k], axis=k)))
    with pytest.raises(te.TEError, match="reduce_axis"):
        te.compute((4,), lambda i: te.sum(a[i], axis=[i]))
    with pytest.raises(te.TEError, match="where"):
        te.sum(a[k], axis=k, where=k < 2)


def test_every_read_placeholder_must_be_an_argument():
    a, b, c = matmul()
    with pytest.raises(te.TEError, match="placeholder 'B' .* not an argument"):
        te.create_prim_func([a, c])
    with pytest.raises(te.TEError, match="twice"):
        te.create_prim_func([a, b, c, a])
    with pytest.raises(te.TEError, match="te tensors"):
        te.create_prim_func([a, "B"])
    assert issubclass(te.TEError, ValueError)
