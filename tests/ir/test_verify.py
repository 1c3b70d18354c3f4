"""The well-formedness verifier: every workload msdb knows (the zoo, every TVM-printed script,
every workload payload real TVM wrote) is well formed, and each rule rejects a hand-built
function that breaks it, naming the function, the block and the rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msdb.errors import MsdbError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir import zoo
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.verify import IRVerifyError, problems, verify, well_formed

DATA = Path(__file__).resolve().parents[1] / "data"

# ---------------------------------------------------------------------------------------------
# Builders: a well-formed 8x8x8 matmul, assembled from parts the negative tests replace
# ---------------------------------------------------------------------------------------------

TRUE = E.IntImm("bool", 1)


def c(value: int, dtype: str = "int32") -> E.IntImm:
    return E.IntImm(dtype, value)


def f32(value: float) -> E.FloatImm:
    return E.FloatImm("float32", value)


def buf(name: str, shape: tuple, dtype: str = "float32") -> E.Buffer:
    return E.Buffer(name, tuple(c(s) if isinstance(s, int) else s for s in shape), dtype)


def loop(var: E.Var, extent: int | E.PrimExpr, body: S.Stmt, kind: S.ForKind = S.ForKind.SERIAL,
         binding: S.IterVar | None = None) -> S.For:
    ext = c(extent, var.dtype) if isinstance(extent, int) else extent
    return S.For(var, c(0, var.dtype), ext, kind, body, binding)


def iv(var: E.Var, extent: int, kind: str = "S") -> S.IterVar:
    types = {"S": S.IterType.DATA_PAR, "R": S.IterType.COMM_REDUCE, "O": S.IterType.OPAQUE}
    return S.IterVar(E.Range(c(0, var.dtype), c(extent, var.dtype)), var, types[kind])


def realize(name: str, iters: list[S.IterVar], values: list[E.PrimExpr], body: S.Stmt, *,
            init: S.Stmt | None = None, predicate: E.PrimExpr = TRUE, allocs: tuple = (),
            matches: tuple = (), reads: tuple = (), writes: tuple = ()) -> S.BlockRealize:
    block = S.Block(tuple(iters), reads, writes, name, body, init, allocs, matches)
    return S.BlockRealize(tuple(values), predicate, block)


def func(body: S.Stmt, buffers: list[E.Buffer], *, root_allocs: tuple = (), root_name: str = "root") -> PrimFunc:
    params = tuple(E.Var(b.name, "handle") for b in buffers)
    root = S.BlockRealize((), TRUE, S.Block((), (), (), root_name, body, None, root_allocs))
    return PrimFunc(params, dict(zip(params, buffers)), root, {"global_symbol": "main"})


def region(b: E.Buffer, *indices: E.PrimExpr) -> S.BufferRegion:
    return S.BufferRegion(b, tuple(E.Range(i, c(1)) for i in indices))


class Matmul:
    """The parts of `C[i, j] += A[i, k] * B[k, j]` over 8x8x8; `build()` assembles them."""

    def __init__(self) -> None:
        self.A, self.B, self.C = buf("A", (8, 8)), buf("B", (8, 8)), buf("C", (8, 8))
        self.i, self.j, self.k = E.Var("i"), E.Var("j"), E.Var("k")
        self.vi, self.vj, self.vk = E.Var("vi"), E.Var("vj"), E.Var("vk")
        self.iters = [iv(self.vi, 8), iv(self.vj, 8), iv(self.vk, 8, "R")]
        self.values: list[E.PrimExpr] = [self.i, self.j, self.k]
        self.init: S.Stmt | None = S.BufferStore(self.C, f32(0.0), (self.vi, self.vj))
        self.update: S.Stmt = S.BufferStore(
            self.C, self.C[self.vi, self.vj] + self.A[self.vi, self.vk] * self.B[self.vk, self.vj], (self.vi, self.vj))
        self.name = "C"

    def block(self) -> S.BlockRealize:
        A, B, C = self.A, self.B, self.C
        reads = (region(C, self.vi, self.vj), region(A, self.vi, self.vk), region(B, self.vk, self.vj))
        return realize(self.name, self.iters, self.values, self.update, init=self.init, reads=reads,
                       writes=(region(C, self.vi, self.vj),))

    def nest(self, body: S.Stmt | None = None) -> S.Stmt:
        return loop(self.i, 8, loop(self.j, 8, loop(self.k, 8, body or self.block())))

    def build(self, body: S.Stmt | None = None) -> PrimFunc:
        return func(body or self.nest(), [self.A, self.B, self.C])


def rejects(f: PrimFunc | IRModule, rule: str, block: str | None, *fragments: str) -> IRVerifyError:
    """verify raises naming the function, the block and the rule; well_formed lists it too."""
    with pytest.raises(IRVerifyError) as info:
        verify(f)
    err = info.value
    assert isinstance(err, MsdbError)
    found = [p for p in err.problems if p.rule == rule and all(frag in str(p) for frag in fragments)]
    assert found, f"no {rule} problem saying {fragments} in {[str(p) for p in err.problems]}"
    problem = found[0]
    assert problem.func == "main" and problem.block == block, str(problem)
    text = str(problem)
    assert text.startswith("function 'main'") and f": {rule}: " in text
    if block is not None:
        assert f"block {block!r}" in text
    assert text in well_formed(f)
    assert str(err).startswith("ill-formed IR: function 'main'")
    return err


# ---------------------------------------------------------------------------------------------
# Everything msdb knows is well formed
# ---------------------------------------------------------------------------------------------


def test_the_hand_built_matmul_is_well_formed() -> None:
    f = Matmul().build()
    verify(f)
    verify(IRModule.from_func(f))
    assert well_formed(f) == [] and problems(f) == []


@pytest.mark.parametrize("name", zoo.names())
def test_every_zoo_workload_is_well_formed(name: str) -> None:
    for index in range(len(zoo.configs(name))):
        assert well_formed(zoo.workload(name, index)) == [], (name, index)


def _scripts() -> list[Path]:
    paths = sorted((DATA / "tvmscript").rglob("*.py"))
    paths += sorted((DATA / "tvm027_workloads").glob("*.tvmscript.py"))
    paths += sorted((DATA / "fixtures" / "tvm-0.27-derived" / "replayed").glob("*.py"))
    return paths


def test_the_script_corpus_is_all_there() -> None:
    assert len(_scripts()) >= 36 + 1 + 48


@pytest.mark.parametrize("path", _scripts(), ids=lambda p: str(p.relative_to(DATA)))
def test_every_tvm_printed_script_is_well_formed(path: Path) -> None:
    from msdb.ir import from_script

    assert well_formed(from_script(path.read_text())) == []


def _payload_files() -> list[Path]:
    return sorted((DATA / "fixtures").rglob("database_workload.json")) + sorted(
        (DATA / "tvm027_workloads").glob("*_database_workload.json"))


def test_the_payload_corpus_is_there() -> None:
    folders = {p.parent.name for p in _payload_files()}
    assert {"team_a", "tvm027_workloads"} <= folders, folders


@pytest.mark.parametrize("path", _payload_files(), ids=lambda p: str(p.relative_to(DATA)))
def test_every_tvm_workload_payload_decodes_well_formed(path: Path) -> None:
    from msdb.interop.tvm.payload import decode_workload

    lines = [line for line in path.read_text().splitlines() if line.strip()]
    assert lines
    for number, line in enumerate(lines):
        assert well_formed(decode_workload(json.loads(line)[1])) == [], f"{path.name} line {number}"


# ---------------------------------------------------------------------------------------------
# Variables
# ---------------------------------------------------------------------------------------------


def test_undefined_var_in_a_binding() -> None:
    m = Matmul()
    stray = E.Var("t")
    m.values = [m.i, m.j, stray]
    rejects(m.build(), "undefined-var", "root", "'t'", "not defined")


def test_undefined_var_in_a_loop_extent() -> None:
    m = Matmul()
    n = E.Var("n")
    body = loop(m.i, 8, loop(m.j, 8, loop(m.k, n, m.block())))
    rejects(m.build(body), "undefined-var", "root", "'n'")


def test_loop_var_used_inside_a_block_body() -> None:
    m = Matmul()
    m.update = S.BufferStore(m.C, m.C[m.vi, m.vj] + m.A[m.i, m.vk] * m.B[m.vk, m.vj], (m.vi, m.vj))
    rejects(m.build(), "loop-var-in-block", "C", "loop var 'i'", "only its iter vars")


def test_loop_var_used_in_a_block_read_region() -> None:
    m = Matmul()
    blk = m.block().block
    bad = S.Block(blk.iter_vars, (region(m.A, m.i, m.vk),) + blk.reads[1:], blk.writes, "C", blk.body, blk.init)
    rejects(m.build(m.nest(S.BlockRealize(tuple(m.values), TRUE, bad))), "loop-var-in-block", "C", "'i'")


def test_loop_var_inside_a_nested_block_defined_in_the_outer_one() -> None:
    # a loop inside block "outer" feeds block "inner" only through inner's bindings
    A = buf("A", (8, 8))
    i, j, vi, vj = E.Var("i"), E.Var("j"), E.Var("vi"), E.Var("vj")
    inner = realize("inner", [iv(vj, 8)], [j], S.BufferStore(A, f32(1.0), (vi, j)))
    outer = realize("outer", [iv(vi, 8)], [i], loop(j, 8, inner))
    rejects(func(loop(i, 8, outer), [A]), "loop-var-in-block", "inner", "'j'")


def test_opaque_blocks_and_outer_block_iter_vars_are_allowed() -> None:
    # TVM's rule exempts blocks without iter vars, and nested blocks may use an outer block's
    # iter vars (checked against TVM 0.27's verify_well_formed)
    A = buf("A", (8, 8))
    i, j, vi, vj = E.Var("i"), E.Var("j"), E.Var("vi"), E.Var("vj")
    opaque = realize("opaque", [], [], S.BufferStore(A, f32(1.0), (i, c(0))))
    inner = realize("inner", [iv(vj, 8)], [j], S.BufferStore(A, f32(2.0), (vi, vj)))
    outer = realize("outer", [iv(vi, 8)], [i], loop(j, 8, inner))
    verify(func(loop(i, 8, S.seq(opaque, outer)), [A]))


def test_nested_redefinition_of_a_loop_var() -> None:
    m = Matmul()
    body = loop(m.i, 8, loop(m.i, 8, loop(m.k, 8, m.block())))
    rejects(m.build(body), "var-redefined", "root", "loop var 'i'", "enclosing scope")


def test_sibling_loops_sharing_one_var() -> None:
    A = buf("A", (8,))
    i, vi, vi2 = E.Var("i"), E.Var("vi"), E.Var("vi2")
    first = loop(i, 8, realize("B1", [iv(vi, 8)], [i], S.BufferStore(A, f32(1.0), (vi,))))
    second = loop(i, 8, realize("B2", [iv(vi2, 8)], [i], S.BufferStore(A, f32(2.0), (vi2,))))
    rejects(func(S.seq(first, second), [A]), "var-redefined", "root", "elsewhere in the function")


def test_an_iter_var_that_is_also_a_loop_var() -> None:
    m = Matmul()
    m.iters = [iv(m.i, 8), iv(m.vj, 8), iv(m.vk, 8, "R")]
    m.update = S.BufferStore(m.C, m.C[m.i, m.vj] + m.A[m.i, m.vk] * m.B[m.vk, m.vj], (m.i, m.vj))
    m.init = S.BufferStore(m.C, f32(0.0), (m.i, m.vj))
    rejects(m.build(), "var-redefined", "C", "iter var 'i'")


def test_let_vars_are_scoped() -> None:
    A = buf("A", (8,))
    i, vi, x = E.Var("i"), E.Var("vi"), E.Var("x")
    inside = S.LetStmt(x, vi + 1, S.BufferStore(A, f32(1.0), (x % 8,)))
    verify(func(loop(i, 8, realize("B", [iv(vi, 8)], [i], inside)), [A]))
    outside = S.seq(S.LetStmt(x, vi + 1, S.Evaluate(c(0))), S.BufferStore(A, f32(1.0), (x % 8,)))
    rejects(func(loop(i, 8, realize("B", [iv(vi, 8)], [i], outside)), [A]), "undefined-var", "B", "'x'")


def test_symbolic_shapes_are_defined_by_the_parameters() -> None:
    n = E.Var("n")
    A, B = buf("A", (n,)), buf("B", (n,))
    i, vi = E.Var("i"), E.Var("vi")
    body = S.For(i, c(0), n, S.ForKind.SERIAL, realize(
        "B", [S.IterVar(E.Range(c(0), n), vi, S.IterType.DATA_PAR)], [i], S.BufferStore(B, A[vi], (vi,))))
    verify(func(body, [A, B]))
    m = E.Var("m")
    scratch = buf("S", (m,))
    rejects(func(body, [A, B], root_allocs=(scratch,)), "undefined-var", "root", "'m'")


# ---------------------------------------------------------------------------------------------
# Buffers and indices
# ---------------------------------------------------------------------------------------------


def test_store_to_an_unknown_buffer() -> None:
    m = Matmul()
    D = buf("D", (8, 8))
    m.update = S.BufferStore(D, m.A[m.vi, m.vk], (m.vi, m.vj))
    rejects(m.build(), "undefined-buffer", "C", "store to buffer 'D'")


def test_a_buffer_allocated_by_one_block_is_not_visible_in_its_sibling() -> None:
    A = buf("A", (8,))
    T = buf("T", (8,))
    i, vi, j, vj = E.Var("i"), E.Var("vi"), E.Var("j"), E.Var("vj")
    producer = realize("P", [iv(vi, 8)], [i], S.BufferStore(T, f32(1.0), (vi,)), allocs=(T,))
    consumer = realize("Q", [iv(vj, 8)], [j], S.BufferStore(A, T[vj], (vj,)))
    rejects(func(S.seq(loop(i, 8, producer), loop(j, 8, consumer)), [A]), "undefined-buffer", "Q",
            "load of buffer 'T'")
    # allocated by the root block, the same buffer is visible to both
    producer = realize("P", [iv(vi, 8)], [i], S.BufferStore(T, f32(1.0), (vi,)))
    verify(func(S.seq(loop(i, 8, producer), loop(j, 8, consumer)), [A], root_allocs=(T,)))


def test_match_buffers_declare_a_view() -> None:
    A = buf("A", (8, 8))
    i, vi = E.Var("i"), E.Var("vi")
    row = buf("row", (8,))
    match = S.MatchBufferRegion(row, S.BufferRegion(A, (E.Range(vi, c(1)), E.Range(c(0), c(8)))))
    body = realize("R", [iv(vi, 8)], [i], S.BufferStore(row, f32(1.0), (c(0),)), matches=(match,))
    verify(func(loop(i, 8, body), [A]))
    ghost = buf("G", (8, 8))
    bad = S.MatchBufferRegion(row, S.BufferRegion(ghost, (E.Range(vi, c(1)), E.Range(c(0), c(8)))))
    body = realize("R", [iv(vi, 8)], [i], S.BufferStore(row, f32(1.0), (c(0),)), matches=(bad,))
    rejects(func(loop(i, 8, body), [A]), "undefined-buffer", "R", "'G'")


def test_load_with_too_few_indices() -> None:
    m = Matmul()
    m.update = S.BufferStore(m.C, m.C[m.vi, m.vj] + E.BufferLoad(m.A, (m.vi,)) * m.B[m.vk, m.vj], (m.vi, m.vj))
    rejects(m.build(), "index-count", "C", "load of 'A' has 1 indices, the buffer has 2 dimensions")


def test_store_with_too_many_indices() -> None:
    m = Matmul()
    m.init = S.BufferStore(m.C, f32(0.0), (m.vi, m.vj, m.vk))
    rejects(m.build(), "index-count", "C", "store to 'C' has 3 indices")


def test_region_with_the_wrong_rank() -> None:
    m = Matmul()
    blk = m.block().block
    bad = S.Block(blk.iter_vars, blk.reads, (region(m.C, m.vi),), "C", blk.body, blk.init)
    rejects(m.build(m.nest(S.BlockRealize(tuple(m.values), TRUE, bad))), "index-count", "C", "1 ranges")


# ---------------------------------------------------------------------------------------------
# Blocks
# ---------------------------------------------------------------------------------------------


def test_iter_value_count_must_match() -> None:
    m = Matmul()
    m.values = [m.i, m.j]
    rejects(m.build(), "iter-value-count", "root", "block 'C' has 3 iter vars bound to 2 values")


def test_iter_var_domain_must_be_positive() -> None:
    m = Matmul()
    m.iters = [iv(m.vi, 8), iv(m.vj, 0), iv(m.vk, 8, "R")]
    rejects(m.build(), "iter-var-domain", "C", "'vj'", "extent 0")


def test_block_names_are_unique() -> None:
    A = buf("A", (8,))
    i, j, vi, vj = E.Var("i"), E.Var("j"), E.Var("vi"), E.Var("vj")
    first = loop(i, 8, realize("B", [iv(vi, 8)], [i], S.BufferStore(A, f32(1.0), (vi,))))
    second = loop(j, 8, realize("B", [iv(vj, 8)], [j], S.BufferStore(A, f32(2.0), (vj,))))
    rejects(func(S.seq(first, second), [A]), "duplicate-block-name", "B", "named 'B'")


def test_the_root_block_must_be_named_root() -> None:
    rejects(func(Matmul().nest(), [Matmul().A], root_name="main"), "root-block", "main", "not 'root'")


def test_the_body_must_be_a_root_block_realize() -> None:
    m = Matmul()
    params = tuple(E.Var(b.name, "handle") for b in (m.A, m.B, m.C))
    f = PrimFunc(params, dict(zip(params, (m.A, m.B, m.C))), m.nest(), {})
    rejects(f, "root-block", None, "the body is a For")


def test_only_the_root_is_named_root() -> None:
    m = Matmul()
    m.name = "root"
    rejects(m.build(), "root-block", "root", "other than the function's root")


def test_a_block_outside_a_block_realize() -> None:
    m = Matmul()
    rejects(m.build(m.nest(m.block().block)), "block-realize", "root", "block 'C' is not the block of a BlockRealize")


def test_init_needs_a_reduction_iter_var() -> None:
    m = Matmul()
    m.iters = [iv(m.vi, 8), iv(m.vj, 8), iv(m.vk, 8, "S")]
    rejects(m.build(), "init-without-reduction", "C", "block 'C' has an init")


# ---------------------------------------------------------------------------------------------
# Loops
# ---------------------------------------------------------------------------------------------


def test_loop_extent_must_be_positive() -> None:
    m = Matmul()
    rejects(m.build(loop(m.i, 8, loop(m.j, 0, loop(m.k, 8, m.block())))), "loop-extent", "root",
            "loop 'j' has extent 0")


def test_thread_binding_loop_needs_a_binding() -> None:
    m = Matmul()
    body = loop(m.i, 8, loop(m.j, 8, loop(m.k, 8, m.block())), kind=S.ForKind.THREAD_BINDING)
    rejects(m.build(body), "loop-kind", "root", "loop 'i' is thread_binding but has no thread tag")


def test_a_serial_loop_must_not_carry_a_binding() -> None:
    m = Matmul()
    tx = S.IterVar(None, E.Var("threadIdx.x"), S.IterType.THREAD_INDEX, "threadIdx.x")
    body = loop(m.i, 8, loop(m.j, 8, loop(m.k, 8, m.block())), kind=S.ForKind.PARALLEL, binding=tx)
    rejects(m.build(body), "loop-kind", "root", "of kind parallel has a thread binding ('threadIdx.x')")
    verify(m.build(loop(m.i, 8, loop(m.j, 8, loop(m.k, 8, m.block())), S.ForKind.THREAD_BINDING, tx)))


# ---------------------------------------------------------------------------------------------
# Dtypes
# ---------------------------------------------------------------------------------------------


def test_store_value_dtype_must_match_the_buffer() -> None:
    m = Matmul()
    m.init = S.BufferStore(m.C, E.FloatImm("float64", 0.0), (m.vi, m.vj))
    rejects(m.build(), "dtype", "C", "a store to 'C' (float32) has a float64 value")


def test_binary_operands_share_a_dtype() -> None:
    m = Matmul()
    m.update = S.BufferStore(m.C, E.Add(m.C[m.vi, m.vj], E.Cast("float16", m.A[m.vi, m.vk])), (m.vi, m.vj))
    rejects(m.build(), "dtype", "C", "the operands of Add have different dtypes float32 and float16")


def test_arithmetic_keeps_and_comparison_gives_bool() -> None:
    m = Matmul()
    m.update = S.BufferStore(m.C, E.Mul(m.A[m.vi, m.vk], m.B[m.vk, m.vj], "float16"), (m.vi, m.vj))
    rejects(m.build(), "dtype", "C", "Mul of float32 operands has dtype float16")
    m = Matmul()
    m.values = [m.i, m.j, m.k]
    cond = E.LT(m.i, c(8), "int32")
    rejects(m.build(m.nest(S.IfThenElse(cond, m.block()))), "dtype", "root", "LT must have dtype bool")


def test_conditions_are_bool() -> None:
    m = Matmul()
    rejects(m.build(m.nest(S.IfThenElse(m.i + 1, m.block()))), "dtype", "root",
            "the condition of an if has dtype int32, not bool")
    blk = m.block()
    pred = S.BlockRealize(blk.iter_values, c(1), blk.block)
    rejects(m.build(m.nest(pred)), "dtype", "root", "the predicate of block 'C' has dtype int32")
    m = Matmul()
    m.update = S.BufferStore(m.C, E.Select(m.vi, m.A[m.vi, m.vk], f32(0.0)), (m.vi, m.vj))
    rejects(m.build(), "dtype", "C", "the condition of Select has dtype int32")
    m = Matmul()
    m.update = S.BufferStore(m.C, E.Call("float32", "if_then_else", (m.vk, m.A[m.vi, m.vk], f32(0.0))), (m.vi, m.vj))
    rejects(m.build(), "dtype", "C", "the condition of if_then_else has dtype int32")


def test_logic_takes_bools() -> None:
    m = Matmul()
    cond = E.And(m.vi, m.vj)
    m.update = S.BufferStore(m.C, E.Select(cond, m.A[m.vi, m.vk], f32(0.0)), (m.vi, m.vj))
    rejects(m.build(), "dtype", "C", "And needs bool operands")
    m = Matmul()
    m.update = S.BufferStore(m.C, E.Select(E.Not(m.vi), m.A[m.vi, m.vk], f32(0.0)), (m.vi, m.vj))
    rejects(m.build(), "dtype", "C", "Not needs a bool operand")


def test_indices_are_integers() -> None:
    m = Matmul()
    m.init = S.BufferStore(m.C, f32(0.0), (m.vi, E.Cast("float32", m.vj)))
    rejects(m.build(), "dtype", "C", "an index of 'C' has dtype float32")


def test_loop_var_dtype_matches_its_bounds() -> None:
    m = Matmul()
    body = S.For(m.i, c(0, "int64"), c(8, "int64"), S.ForKind.SERIAL, loop(m.j, 8, loop(m.k, 8, m.block())))
    err = rejects(m.build(body), "dtype", "root", "loop var 'i' (int32) has bounds of dtypes int64 and int64")
    # the binding i -> vi is then int32 = int32, so that is the only problem
    assert len(err.problems) == 1


def test_iter_value_dtype_matches_its_iter_var() -> None:
    m = Matmul()
    m.values = [m.i, E.Cast("int64", m.j), m.k]
    rejects(m.build(), "dtype", "root", "iter var 'vj' (int32) of block 'C' is bound to a int64 value")


def test_let_value_dtype_matches_its_var() -> None:
    A = buf("A", (8,))
    i, vi, x = E.Var("i"), E.Var("vi"), E.Var("x", "int64")
    body = S.LetStmt(x, vi + 1, S.BufferStore(A, f32(1.0), (vi,)))
    rejects(func(loop(i, 8, realize("B", [iv(vi, 8)], [i], body)), [A]), "dtype", "B", "let var 'x' (int64)")


# ---------------------------------------------------------------------------------------------
# Sequences, reporting
# ---------------------------------------------------------------------------------------------


def test_seq_stmts_are_flat_and_of_two_or_more() -> None:
    m = Matmul()
    rejects(m.build(m.nest(S.SeqStmt((m.block(),)))), "seq-stmt", "root", "a SeqStmt of 1 statement(s)")
    A = buf("A", (8,))
    stores = [S.BufferStore(A, f32(float(n)), (c(n),)) for n in range(3)]
    nested = S.SeqStmt((stores[0], S.SeqStmt((stores[1], stores[2]))))
    rejects(func(nested, [A]), "seq-stmt", "root", "directly inside a SeqStmt")


def test_every_problem_is_reported_and_the_error_counts_them() -> None:
    m = Matmul()
    m.values = [m.i, m.j, E.Var("t")]
    m.update = S.BufferStore(m.C, m.C[m.vi, m.vj] + m.A[m.i, m.vk] * m.B[m.vk, m.vj], (m.vi, m.vj))
    f = m.build()
    messages = well_formed(f)
    assert [msg.split(": ")[1] for msg in messages] == ["undefined-var", "loop-var-in-block"]
    with pytest.raises(IRVerifyError, match=r"^ill-formed IR: function 'main', block 'root': undefined-var: .*"
                       r"\(and 1 more problem\(s\)\)$") as info:
        verify(f)
    assert info.value.rule == "undefined-var" and info.value.block == "root" and info.value.func == "main"


def test_module_functions_are_named_by_their_key() -> None:
    m = Matmul()
    m.values = [m.i, m.j]
    mod = IRModule({"main": Matmul().build(), "other": m.build()})
    assert well_formed(mod) == [
        "function 'other', block 'root': iter-value-count: block 'C' has 3 iter vars bound to 2 values"]


def test_verify_needs_a_module_or_function() -> None:
    with pytest.raises(TypeError, match="IRModule or a PrimFunc"):
        verify(Matmul().nest())  # type: ignore[arg-type]
