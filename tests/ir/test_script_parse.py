"""Reading TVMScript: every shipped script parses, the tutorial programs give the IR TVM builds,
and the parser follows TVM's typing and folding rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from msdb.hashing import structural_equal
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir import from_script
from msdb.ir.function import IRModule, PrimFunc

DATA = Path(__file__).resolve().parent.parent / "data" / "tvmscript"
ALL_FILES = sorted(DATA.glob("*/*.py"))


def read(rel: str) -> IRModule:
    return from_script((DATA / rel).read_text(), rel)


def blocks(node) -> list[S.BlockRealize]:
    """The block realizes under a function's root block (or under a statement), in pre-order."""
    found: list[S.BlockRealize] = []

    def walk(stmt) -> None:
        if stmt is None:
            return
        if isinstance(stmt, S.SeqStmt):
            for s in stmt.seq:
                walk(s)
        elif isinstance(stmt, S.For):
            walk(stmt.body)
        elif isinstance(stmt, S.IfThenElse):
            walk(stmt.then_case)
            walk(stmt.else_case)
        elif isinstance(stmt, S.LetStmt):
            walk(stmt.body)
        elif isinstance(stmt, S.BlockRealize):
            found.append(stmt)
            walk(stmt.block.body)

    walk(node.body.block.body if isinstance(node, PrimFunc) else node)
    return found


def loops(stmt: S.Stmt) -> list[S.For]:
    out = []
    while isinstance(stmt, S.For):
        out.append(stmt)
        stmt = stmt.body
    return out


def region_text(region: S.BufferRegion) -> str:
    """A compact spelling of a region for assertions (only for simple affine indices)."""
    from msdb.ir.script.printer import _FuncPrinter

    printer = _FuncPrinter(None, "main")
    return printer.region(region)


def single(text: str) -> PrimFunc:
    return from_script(text).main


def store_value(func: PrimFunc, block_name: str | None = None) -> E.PrimExpr:
    realize = blocks(func)[0] if block_name is None else next(b for b in blocks(func) if b.block.name_hint == block_name)
    body = realize.block.body
    assert isinstance(body, S.BufferStore)
    return body.value


# -------------------------------------------------------------------------------------------
# every shipped script


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_data_file_parses(path: Path) -> None:
    mod = from_script(path.read_text(), str(path))
    assert len(mod) >= 1
    for func in mod.functions.values():
        assert isinstance(func.body, S.BlockRealize)
        assert not func.body.block.iter_vars
        assert blocks(func), "every shipped workload has at least one block"
        for param in func.params:
            assert param.dtype == "handle"
            assert param in func.buffer_map


def test_data_set_is_complete() -> None:
    names = {p.stem for p in (DATA / "tvm027").glob("*.py")}
    assert names == set("C1D C2D C3D CAP DEP DIL GMM GRP T2D CBR TBG NRM SFM".split())
    assert {p.stem for p in (DATA / "tvm02x").glob("*.py")} == {"GMM", "C2D", "SFM"}
    assert len(list((DATA / "tutorials").glob("*.py"))) >= 8


@pytest.mark.parametrize("name", ["GMM", "C2D", "SFM"])
def test_old_and_new_dialects_read_the_same(name: str) -> None:
    new = read(f"tvm027/{name}.py")
    old = read(f"tvm02x/{name}.py")
    assert structural_equal(new, old)
    noalias = old.main.attrs["tir.noalias"]  # `True` in GMM/SFM, `T.bool(True)` in C2D: kept as written
    assert noalias is True or (isinstance(noalias, E.IntImm) and (noalias.dtype, noalias.value) == ("bool", 1))
    assert "s_tir" not in old.main.attrs and new.main.attrs["s_tir"] is True


def test_hand_written_tutorials_equal_tvm_workloads() -> None:
    # The batch matmul tutorial is TVM's GMM; the MLC course's linear0 is the linear0 in the
    # real TVM 0.27 tuning log of team_a.
    assert structural_equal(read("tutorials/batch_matmul.py"), read("tvm027/GMM.py"))
    assert structural_equal(read("tutorials/batch_matmul.py"), read("fixtures/team_a_7523732197612418965.py"))
    linear0 = IRModule({"main": read("tutorials/mlp_linear0.py")["linear0"]})
    assert structural_equal(linear0, read("fixtures/team_a_12552862349517236333.py"))
    assert structural_equal(read("tutorials/mlc_matmul.py"), read("tutorials/matmul_027.py"))


# -------------------------------------------------------------------------------------------
# tutorial programs: structure


def test_mlc_matmul_structure() -> None:
    mod = read("tutorials/mlc_matmul.py")
    assert list(mod.functions) == ["main"]
    func = mod.main
    assert dict(func.attrs) == {"global_symbol": "main", "tir.noalias": True}
    a, b, c = func.buffers
    assert [buf.name for buf in (a, b, c)] == ["A", "B", "C"]
    for buf in (a, b, c):
        assert [d.value for d in buf.shape] == [128, 128] and buf.dtype == "float32" and buf.scope == "global"
    nest = loops(func.body.block.body)
    assert [(lp.loop_var.name, lp.min.value, lp.extent.value, lp.kind) for lp in nest] == [
        ("i", 0, 128, S.ForKind.SERIAL), ("j", 0, 128, S.ForKind.SERIAL), ("k", 0, 128, S.ForKind.SERIAL)]
    (realize,) = blocks(func)
    block = realize.block
    assert block.name_hint == "C"
    assert [iv.iter_type for iv in block.iter_vars] == [S.IterType.DATA_PAR, S.IterType.DATA_PAR, S.IterType.COMM_REDUCE]
    assert [iv.dom.extent.value for iv in block.iter_vars] == [128, 128, 128]
    assert all(v is lp.loop_var for v, lp in zip(realize.iter_values, nest))
    assert realize.predicate.dtype == "bool" and realize.predicate.value == 1
    # T.reads/T.writes were absent: inferred like TVM (the reduction's output is not a read).
    assert [region_text(r) for r in block.reads] == ["A[vi, vk]", "B[vk, vj]"]
    assert [region_text(r) for r in block.writes] == ["C[vi, vj]"]
    assert isinstance(block.init, S.BufferStore)
    assert isinstance(block.init.value, E.FloatImm) and block.init.value.dtype == "float32" and block.init.value.value == 0.0


def test_matmul_027_keeps_attrs_as_written() -> None:
    func = read("tutorials/matmul_027.py").main
    assert dict(func.attrs) == {"tirx.noalias": True, "global_symbol": "main", "s_tir": True}
    (realize,) = blocks(func)
    assert [region_text(r) for r in realize.block.reads] == ["A[vi, vk]", "B[vk, vj]"]


def test_match_buffer_on_handles() -> None:
    func = read("tutorials/matmul_1024_match_buffer.py").main
    assert [p.name for p in func.params] == ["a", "b", "c"]
    assert [func.buffer_map[p].name for p in func.params] == ["A", "B", "C"]
    assert all([d.value for d in buf.shape] == [1024, 1024] for buf in func.buffers)
    (realize,) = blocks(func)
    assert isinstance(realize.block.init.value, E.FloatImm)  # `C[vi, vj] = 0.0` typed after C


def test_mm_relu_intermediate_buffer() -> None:
    func = read("tutorials/mlc_mm_relu.py")["mm_relu"]
    root = func.body.block
    assert [buf.name for buf in root.alloc_buffers] == ["Y"]
    y_block, c_block = blocks(func)
    assert [iv.iter_type for iv in y_block.block.iter_vars] == [S.IterType.DATA_PAR] * 2 + [S.IterType.COMM_REDUCE]
    value = c_block.block.body.value
    assert isinstance(value, E.Max) and isinstance(value.a, E.BufferLoad) and value.a.buffer is root.alloc_buffers[0]
    assert [region_text(r) for r in c_block.block.reads] == ["Y[vi, vj]"]


def test_linear0_two_blocks() -> None:
    mod = read("tutorials/mlp_linear0.py")
    assert list(mod.functions) == ["linear0", "relu0"]
    func = mod["linear0"]
    assert [(buf.name, [d.value for d in buf.shape]) for buf in func.buffers] == [
        ("X", [1, 784]), ("W", [128, 784]), ("B", [128]), ("Z", [1, 128])]
    y, z = blocks(func)
    assert [lp.extent.value for lp in loops(func.body.block.body.seq[0])] == [1, 128, 784]
    assert y.block.init is not None and z.block.init is None
    assert [region_text(r) for r in y.block.reads] == ["X[vi, vk]", "W[vj, vk]"]
    assert [region_text(r) for r in z.block.reads] == ["Y[vi, vj]", "B[vj]"]
    assert mod["relu0"].attrs["global_symbol"] == "relu0"


def test_conv2d_padding_block() -> None:
    func = read("tutorials/conv2d_nhwc_pad.py").main
    pad, conv = blocks(func)
    value = pad.block.body.value
    assert isinstance(value, E.Call) and value.op == "if_then_else" and value.dtype == "float32"
    cond = value.args[0]
    assert isinstance(cond, E.And) and isinstance(cond.a, E.And)  # left-nested like TVM
    assert [region_text(r) for r in pad.block.reads] == ["inputs[vn, vh - 1, vw - 1, vc]"]
    assert [region_text(r) for r in conv.block.reads] == ["pad[vn, vh + vrh, vw + vrw, vrc]", "weight[vrh, vrw, vrc, vco]"]


def test_int8_conv_accumulates_in_int32() -> None:
    func = read("tutorials/conv2d_int8.py").main
    (realize,) = blocks(func)
    data, kernel, out = func.buffers
    assert (data.dtype, kernel.dtype, out.dtype) == ("int8", "int8", "int32")
    init = realize.block.init
    assert isinstance(init.value, E.IntImm) and init.value.dtype == "int32"
    value = realize.block.body.value
    assert isinstance(value, E.Add) and isinstance(value.b, E.Mul)
    assert all(isinstance(x, E.Cast) and x.dtype == "int32" and x.value.dtype == "int8" for x in (value.b.a, value.b.b))


def test_where_predicate_and_loop_kinds() -> None:
    func = read("tutorials/where_predicate.py").main
    outer, inner = loops(func.body.block.body)
    assert (outer.kind, outer.extent.value, inner.kind, inner.extent.value) == (
        S.ForKind.PARALLEL, 8, S.ForKind.VECTORIZED, 128)
    (realize,) = blocks(func)
    pred = realize.predicate
    assert isinstance(pred, E.LT) and isinstance(pred.a, E.Add) and pred.b.value == 1000
    (value,) = realize.iter_values
    assert isinstance(value, E.Add) and isinstance(value.a, E.Mul) and value.a.a is outer.loop_var


def test_scheduled_tvm_output() -> None:
    gpu = read("tvm027_sched/gmm_gpu_bound.py").main
    nest = loops(gpu.body.block.body)
    assert [lp.kind for lp in nest] == [S.ForKind.SERIAL, S.ForKind.THREAD_BINDING, S.ForKind.THREAD_BINDING, S.ForKind.SERIAL]
    binding = nest[1].thread_binding
    assert binding.thread_tag == "blockIdx.x" and binding.iter_type == S.IterType.THREAD_INDEX
    assert nest[2].thread_binding.thread_tag == "threadIdx.x"
    assert gpu.body.block.alloc_buffers[0].scope == "shared"

    cpu = read("tvm027_sched/gmm_cpu_tiled.py").main
    outer = loops(cpu.body.block.body)[0]
    assert outer.kind == S.ForKind.PARALLEL and dict(outer.annotations) == {"pragma_auto_unroll_max_step": 64}
    names = [b.block.name_hint for b in blocks(cpu)]
    assert names == ["Z_init", "Z_update", "Z_global"]
    init_block = blocks(cpu)[0]
    assert dict(init_block.block.annotations) == {"meta_schedule.tiling_structure": "SSRSRS"}
    assert init_block.block.reads == () and isinstance(init_block.predicate, E.LT)
    update = blocks(cpu)[1]
    assert isinstance(update.iter_values[0], E.IntImm)  # v_b = T.axis.spatial(1, 0)
    assert [iv.iter_type for iv in update.block.iter_vars][-1] == S.IterType.COMM_REDUCE

    sfm = read("tvm027_sched/sfm_root_annotated.py").main
    root = sfm.body.block
    assert dict(root.annotations) == {"meta_schedule.parallel": 16, "meta_schedule.unroll_explicit": 512, "meta_schedule.vectorize": 64}
    assert root.reads == () and root.writes == () and len(root.alloc_buffers) == 2


def test_softmax_min_value_constant() -> None:
    func = read("tvm027/SFM.py").main
    init = blocks(func)[0].block.init
    assert isinstance(init.value, E.FloatImm) and init.value.value == -3.4028234663852886e38
    assert dict(blocks(func)[3].block.annotations) == {"axis": 1}


# -------------------------------------------------------------------------------------------
# functions, modules, attrs, root block

HEAD = 'A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")'


def test_lone_prim_func_is_main_with_its_global_symbol() -> None:
    mod = from_script(f"@T.prim_func\ndef foo({HEAD}):\n    T.evaluate(0)\n")
    assert list(mod.functions) == ["main"]
    assert dict(mod.main.attrs) == {"global_symbol": "foo"}


def test_decorator_options() -> None:
    func = single(f"@T.prim_func(private=True, s_tir=True, check_well_formed=False)\ndef foo({HEAD}):\n    T.evaluate(0)\n")
    assert dict(func.attrs) == {"s_tir": True}


def test_module_functions_and_module_attrs() -> None:
    text = f'''
@I.ir_module
class Mod:
    I.module_attrs({{"target": "llvm"}})

    @T.prim_func
    def first({HEAD}):
        T.evaluate(0)

    @T.prim_func(private=True)
    def second({HEAD}):
        T.evaluate(1)
'''
    mod = from_script(text)
    assert list(mod.functions) == ["first", "second"]
    assert dict(mod.attrs) == {"target": "llvm"}
    assert mod["first"].attrs["global_symbol"] == "first" and "global_symbol" not in mod["second"].attrs


def test_tvm_script_ir_module_decorator_and_imports() -> None:
    text = f'''
import tvm
from tvm.script import tir as Tx


@tvm.script.ir_module
class Mod:
    @Tx.prim_func
    def main({HEAD.replace("T.", "Tx.")}):
        for i in range(128):
            with Tx.block("B"):
                vi = Tx.axis.remap("S", [i])
                B[vi] = A[vi] + Tx.float32(1)
'''
    func = from_script(text).main
    assert [b.block.name_hint for b in blocks(func)] == ["B"]


def test_body_without_blocks_is_wrapped_in_root() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}):
    C = T.alloc_buffer((128,))
    for i in range(128):
        C[i] = A[i]
        B[i] = C[i]
""")
    root = func.body.block
    assert root.name_hint == "root" and root.reads == () and root.writes == ()
    assert [buf.name for buf in root.alloc_buffers] == ["C"]
    assert isinstance(root.body, S.For)


def test_explicit_root_block_is_the_root() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}):
    with T.block("root"):
        C = T.alloc_buffer((128,))
        for i in range(128):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi]
        for i in range(128):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = C[vi]
""")
    root = func.body.block
    assert root.name_hint == "root" and [b.name for b in root.alloc_buffers] == ["C"]
    assert root.reads == () and root.writes == ()  # never inferred for the root
    assert [b.block.name_hint for b in blocks(func)] == ["C", "B"]


def test_lone_block_without_block_vars_becomes_the_root() -> None:
    # TVM's rule: no function-level allocations and a body that is one block with no block
    # vars -> that block is the root, whatever its name.
    func = single(f"""
@T.prim_func
def main({HEAD}):
    with T.block("top"):
        for i in range(128):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi]
""")
    assert func.body.block.name_hint == "top"
    assert [b.block.name_hint for b in blocks(func)] == ["B"]


def test_only_missing_regions_are_inferred() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}):
    for i in range(128):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            T.reads(A[0:128])
            B[vi] = A[vi]
""")
    block = blocks(func)[0].block
    assert [region_text(r) for r in block.reads] == ["A[0:128]"]
    assert [region_text(r) for r in block.writes] == ["B[vi]"]


def test_explicit_empty_regions_stay_empty() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}):
    for i in range(128):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            T.reads()
            T.writes([])
            B[vi] = A[vi]
""")
    block = blocks(func)[0].block
    assert block.reads == () and block.writes == ()


def test_indented_script_and_header_comments() -> None:
    text = """
        # from tvm.script import ir as I
        # from tvm.script import tir as T
        @T.prim_func
        def main(A: T.Buffer((4,), "float32")):
            '''docstring'''
            for i in range(4):
                A[i] = T.float32(1)
    """
    func = single(text)
    assert isinstance(func.body.block.body, S.For)


def test_old_buffer_subscript_annotation() -> None:
    func = single('@T.prim_func\ndef main(A: T.Buffer[(4, 8), "int8"], B: T.Buffer[16, "float16"]):\n    T.evaluate(0)\n')
    a, b = func.buffers
    assert ([d.value for d in a.shape], a.dtype) == ([4, 8], "int8")
    assert ([d.value for d in b.shape], b.dtype) == ([16], "float16")


def test_buffer_options_and_symbolic_shapes() -> None:
    func = single("""
@T.prim_func
def main(a: T.handle, n: T.int32, C: T.Buffer((8,), "float16", strides=(2,), elem_offset=3, scope="shared", align=16, offset_factor=4, axis_separators=[]), D: T.Buffer((T.int64(4),), "int64")):
    m = T.int32()
    A = T.match_buffer(a, (m, 4 * n), "float32")
    T.evaluate(0)
""")
    a, c, d = func.buffers
    assert isinstance(a.shape[0], E.Var) and a.shape[0].name == "m"
    assert isinstance(a.shape[1], E.Mul) and a.shape[1].b is func.params[1]
    assert func.params[1].dtype == "int32" and func.params[1] not in func.buffer_map
    assert (c.scope, c.strides[0].value, c.elem_offset.value, c.data_alignment, c.offset_factor) == ("shared", 2, 3, 16, 4)
    assert d.shape[0].dtype == "int64"


def test_block_level_alloc_and_match_buffer() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}):
    for i in range(32):
        with T.block("B"):
            vi = T.axis.spatial(32, i)
            S = T.alloc_buffer((4,), "float32", scope="local")
            Asub = T.match_buffer(A[vi * 4:vi * 4 + 4], (4,))
            for k in range(4):
                S[k] = Asub[k]
            for k in range(4):
                B[vi * 4 + k] = S[k]
""")
    block = blocks(func)[0].block
    assert [b.scope for b in block.alloc_buffers] == ["local"]
    (match,) = block.match_buffers
    assert match.source.buffer.name == "A" and match.source.region[0].extent.value == 4  # m:m + 4 read back as 4
    assert [region_text(r) for r in block.reads] == ["A[vi * 4:vi * 4 + 4]"]


def test_thread_binding_iter_var_follows_tvm() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}):
    for i in T.thread_binding(128, thread="threadIdx.x"):
        B[i] = A[i]
""")
    loop = func.body.block.body
    binding = loop.thread_binding
    assert loop.kind == S.ForKind.THREAD_BINDING
    assert binding.dom is None and binding.var.name == "iter" and binding.var is not loop.loop_var
    assert binding.iter_type == S.IterType.THREAD_INDEX and binding.thread_tag == "threadIdx.x"


def test_loop_forms() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}, n: T.int32):
    for i in range(2, 10):
        for j in T.serial(n, n + 4, annotations={{"k": "v"}}):
            for k in T.unroll(3):
                for l in range(T.int64(5)):
                    T.evaluate(i + j + k)
""")
    i, j, k, l = loops(func.body.block.body)
    assert (i.min.value, i.extent.value) == (2, 8)
    assert j.min is func.params[2] and j.extent.value == 4 and dict(j.annotations) == {"k": "v"}
    assert k.kind == S.ForKind.UNROLLED
    assert l.loop_var.dtype == "int64" and l.min.dtype == "int64"


def test_let_statements_scope_the_rest_of_the_body() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}):
    for i in range(128):
        x: T.float32 = A[i] * 2
        y = x + 1
        B[i] = y
""")
    let_x = func.body.block.body.body
    assert isinstance(let_x, S.LetStmt) and let_x.var.dtype == "float32"
    let_y = let_x.body
    assert isinstance(let_y, S.LetStmt) and isinstance(let_y.body, S.BufferStore)
    assert let_y.body.value is let_y.var


def test_if_elif_else() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}):
    for i in range(128):
        if i < 10:
            B[i] = 0.0
        elif i < 20:
            B[i] = 1.0
        else:
            B[i] = A[i]
""")
    stmt = func.body.block.body.body
    assert isinstance(stmt, S.IfThenElse) and isinstance(stmt.else_case, S.IfThenElse)
    assert isinstance(stmt.else_case.else_case, S.BufferStore)


# -------------------------------------------------------------------------------------------
# TVM's typing and folding rules


def expr_of(text: str, dtype: str = "int32", extra: str = "") -> E.PrimExpr:
    """The value stored by `B[vi] = <text>` in a one-block function (vi int32, x int64, f float32)."""
    func = single(f"""
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "{dtype}"), C: T.Buffer((128,), "int64"){extra}):
    for i, j in T.grid(128, T.int64(4)):
        with T.block("B"):
            vi = T.axis.spatial(128, i)
            vj = T.axis.spatial(T.int64(4), j)
            B[vi] = {text}
""")
    return store_value(func)


def test_literals_take_the_partner_dtype() -> None:
    e = expr_of("vj + 1", "int64")
    assert isinstance(e.b, E.IntImm) and e.b.dtype == "int64"
    e = expr_of("A[vi] * 2.5", "float32")
    assert e.b.dtype == "float32" and e.b.value == 2.5
    e = expr_of("vi + 3000000000", "int64")  # needs 64 bits: the int32 var widens
    assert isinstance(e, E.Add) and isinstance(e.a, E.Cast) and e.a.dtype == "int64" and e.b.dtype == "int64"
    e = expr_of("T.Cast(\"int32\", vi < 3) + vi")
    assert isinstance(e.a, E.Cast)


def test_arithmetic_folds_like_tvm() -> None:
    assert isinstance(expr_of("vi * 1 + 0"), E.Var)
    e = expr_of("T.Add(vi, 0)")
    assert isinstance(e, E.Add) and e.b.value == 0
    assert expr_of("2 * 3 + T.int32(4) * T.int32(5)").value == 26
    e = expr_of("vi + 2 + 3")  # left-nested: nothing to fold
    assert isinstance(e, E.Add) and isinstance(e.a, E.Add)
    assert expr_of("T.floordiv(vi, 1) + vi // 1 - vi % 1 + 0 * vi").__class__ is E.Add
    assert expr_of("T.min(T.int32(1), 2)").value == 1
    assert isinstance(expr_of("T.if_then_else(True, vi, 2)"), E.Var)
    e = expr_of("-vi")
    assert isinstance(e, E.Mul) and e.b.value == -1
    assert expr_of("-T.float32(2) + T.float32(0.5)", "float32").value == -1.5
    e = expr_of("A[vi] * T.float32(1) + T.float32(0)", "float32")
    assert isinstance(e, E.BufferLoad)


def test_division_flavours() -> None:
    assert isinstance(expr_of("vi // 3"), E.FloorDiv)
    assert isinstance(expr_of("vi % 3"), E.FloorMod)
    assert isinstance(expr_of("T.truncdiv(vi, 3)"), E.Div)
    assert isinstance(expr_of("T.truncmod(vi, 3)"), E.Mod)
    assert isinstance(expr_of("A[vi] / T.float32(3)", "float32"), E.Div)


def test_logic_builds_nodes_as_written() -> None:
    e = expr_of("T.Cast(\"int32\", vi < 3 and True)")
    assert isinstance(e.value, E.And) and e.value.b.dtype == "bool"
    e = expr_of("T.Cast(\"int32\", 1 < vi < 3)")
    assert isinstance(e.value, E.And) and isinstance(e.value.a, E.LT) and isinstance(e.value.b, E.LT)
    e = expr_of("T.Cast(\"int32\", not vi < 3 or T.Not(vi == 1))")
    assert isinstance(e.value, E.Or) and isinstance(e.value.a, E.Not) and isinstance(e.value.b, E.Not)
    e = expr_of("T.Cast(\"int32\", T.int32(1) < T.int32(2))")  # comparisons never fold
    assert isinstance(e.value, E.LT)


def test_constants_and_casts() -> None:
    e = expr_of("T.min_value(\"float32\")", "float32")
    assert isinstance(e, E.FloatImm) and e.value == -3.4028234663852886e38
    assert expr_of("T.max_value(\"int8\")", "int8").value == 127
    assert expr_of("T.max_value(\"int32\")").value == 2**31 - 1
    e = expr_of("T.float32(vi)", "float32")
    assert isinstance(e, E.Cast) and e.dtype == "float32"
    e = expr_of("T.float32(T.int32(3))", "float32")
    assert isinstance(e, E.FloatImm) and e.value == 3.0
    assert isinstance(expr_of("vi.astype(\"int32\")"), E.Var)
    assert isinstance(expr_of("vi.astype(\"int64\")", "int64"), E.Cast)
    e = expr_of("T.Cast(\"float32\", T.float32(1))", "float32")
    assert isinstance(e, E.Cast)  # the constructor form never folds
    e = expr_of("T.float32(\"inf\")", "float32")
    assert e.value == float("inf")
    e = expr_of("T.float32(-3.4028234663852886e+38)", "float32")
    assert e.value == -3.4028234663852886e38


def test_calls() -> None:
    e = expr_of("T.exp(A[vi]) + T.sqrt(A[vi]) + T.tanh(A[vi]) + T.sigmoid(A[vi]) + T.fabs(A[vi])", "float32")
    assert isinstance(e, E.Add)
    e = expr_of("T.pow(A[vi], T.float32(2))", "float32")
    assert isinstance(e, E.Call) and e.op == "pow"
    e = expr_of("T.if_then_else(vi < 3, A[vi], T.float32(0))", "float32")
    assert e.op == "if_then_else" and e.dtype == "float32"
    e = expr_of("T.Select(vi < 3, vi, 0)")
    assert isinstance(e, E.Select) and e.false_value.dtype == "int32"
    e = expr_of("T.abs(A[vi])", "float32")
    assert e.op == "fabs"
    e = expr_of("T.max(A[vi], T.float32(0))", "float32")
    assert isinstance(e, E.Max)
    e = expr_of("T.call_intrin(\"float32\", \"tir.round\", A[vi])", "float32")
    assert e.op == "round"
    # TVM <= 0.8 printed intrinsics with a dtype keyword
    e = expr_of("T.exp(A[vi], dtype=\"float32\") + T.if_then_else(vi < 1, A[vi], T.float32(0), dtype=\"float32\")", "float32")
    assert e.a.op == "exp" and e.b.op == "if_then_else"


def test_augmented_assignment() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}):
    for i in range(128):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] += A[vi]
""")
    value = store_value(func)
    assert isinstance(value, E.Add) and isinstance(value.a, E.BufferLoad) and value.a.buffer.name == "B"


def test_axis_forms() -> None:
    func = single(f"""
@T.prim_func
def main({HEAD}, n: T.int32):
    for i, j, k in T.grid(4, 8, 2):
        with T.block("B"):
            vi = T.axis.S(4, i)
            vj = T.axis.R(8, j)
            vk = T.axis.opaque((2, n), k)
            vl = T.axis.scan(3, k)
            vm = T.axis.spatial(T.int64(5), 0)
            B[vi] = A[vj]
""")
    realize = blocks(func)[0]
    ivs = realize.block.iter_vars
    assert [iv.iter_type for iv in ivs] == [S.IterType.DATA_PAR, S.IterType.COMM_REDUCE, S.IterType.OPAQUE, S.IterType.ORDERED, S.IterType.DATA_PAR]
    assert ivs[2].dom.min.value == 2 and isinstance(ivs[2].dom.extent, E.Sub)
    assert ivs[4].var.dtype == "int64" and realize.iter_values[4].dtype == "int64"


def test_statement_outside_blocks_allowed_without_blocks() -> None:
    func = single(f"@T.prim_func\ndef main({HEAD}):\n    for i in range(128):\n        B[i] = A[i]\n")
    assert isinstance(func.body.block.body.body, S.BufferStore)
