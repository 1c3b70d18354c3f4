"""Hand-built workloads for the hashing tests, shaped like TVM's `te.create_prim_func` output.

Kept free of test-only imports (and of relative imports) so the PYTHONHASHSEED subprocess test
can load it by path.
"""

from __future__ import annotations

from typing import Callable, Sequence

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.ir.regions import infer_access_regions

TRUE = E.IntImm("bool", 1)


def f32(value: float) -> E.FloatImm:
    return E.FloatImm("float32", float(value))


def buffer(name: str, shape: Sequence[int], dtype: str = "float32") -> E.Buffer:
    return E.Buffer(name, tuple(E.IntImm("int32", d) for d in shape), dtype)


def compute(
    name: str,
    out: E.Buffer,
    axes: Sequence[tuple[int, str]],
    value_fn: Callable[..., E.PrimExpr],
    init: E.PrimExpr | None = None,
    combine: Callable[[E.PrimExpr, E.PrimExpr], E.PrimExpr] = lambda acc, v: acc + v,
) -> S.Stmt:
    """A loop nest over `axes` ((extent, "S"|"R") pairs) holding one block that stores
    `value_fn(*iter_vars)` into `out` at the spatial iter vars (a reduction when `init` is set)."""
    loop_vars = [E.Var(f"{name}_i{k}") for k in range(len(axes))]
    iter_vars = [E.Var(f"v_{name}_{k}") for k in range(len(axes))]
    ivs = tuple(
        S.IterVar(
            E.Range(E.IntImm("int32", 0), E.IntImm("int32", ext)),
            v,
            S.IterType.DATA_PAR if kind == "S" else S.IterType.COMM_REDUCE,
        )
        for (ext, kind), v in zip(axes, iter_vars)
    )
    spatial = tuple(v for (_, kind), v in zip(axes, iter_vars) if kind == "S")
    value = value_fn(*iter_vars)
    if init is None:
        body: S.Stmt = S.BufferStore(out, value, spatial)
        init_stmt = None
    else:
        body = S.BufferStore(out, combine(E.BufferLoad(out, spatial), value), spatial)
        init_stmt = S.BufferStore(out, init, spatial)
    reads, writes = infer_access_regions(body, init_stmt)
    block = S.Block(ivs, reads, writes, name, body, init_stmt)
    stmt: S.Stmt = S.BlockRealize(tuple(loop_vars), TRUE, block)
    for (ext, _), lv in reversed(list(zip(axes, loop_vars))):
        stmt = S.For(lv, E.IntImm("int32", 0), E.IntImm("int32", ext), S.ForKind.SERIAL, stmt)
    return stmt


def func(params: Sequence[E.Buffer], stmts: Sequence[S.Stmt], allocs: Sequence[E.Buffer] = (),
         attrs: dict | None = None) -> PrimFunc:
    handles = tuple(E.Var(b.name + "_handle", "handle") for b in params)
    body = S.seq(*stmts)
    root = S.Block((), (), (), "root", body, None, tuple(allocs))
    if attrs is None:
        attrs = {"global_symbol": "main", "tir.noalias": True}
    return PrimFunc(handles, dict(zip(handles, params)), S.BlockRealize((), TRUE, root), attrs)


def _matmul_stmt(a: E.Buffer, b: E.Buffer, c: E.Buffer, n: int, m: int, k: int) -> S.Stmt:
    return compute("C", c, [(n, "S"), (m, "S"), (k, "R")], lambda i, j, r: a[i, r] * b[r, j], init=f32(0))


def matmul(n: int = 128, m: int = 128, k: int = 128, dtype: str = "float32") -> IRModule:
    a, b, c = buffer("A", (n, k), dtype), buffer("B", (k, m), dtype), buffer("C", (n, m), dtype)
    init = E.make_const(0, dtype)
    stmt = compute("C", c, [(n, "S"), (m, "S"), (k, "R")], lambda i, j, r: a[i, r] * b[r, j], init=init)
    return IRModule.from_func(func([a, b, c], [stmt]))


def matmul_fused(n: int = 128, m: int = 128, k: int = 128, bias: bool = False, relu: bool = False) -> IRModule:
    """matmul followed by an optional bias add and an optional relu, TE style (intermediates in
    the root block)."""
    a, b = buffer("A", (n, k)), buffer("B", (k, m))
    params = [a, b]
    allocs: list[E.Buffer] = []
    stages: list[S.Stmt] = []
    cur = buffer("T_matmul", (n, m))
    stages.append(_matmul_stmt(a, b, cur, n, m, k))
    steps = [s for s, on in (("bias", bias), ("relu", relu)) if on]
    if not steps:
        params.append(cur)
    else:
        allocs.append(cur)
    if bias:
        bias_buf = buffer("bias", (m,))
        params.insert(2, bias_buf)
    for idx, step in enumerate(steps):
        last = idx == len(steps) - 1
        nxt = buffer("out" if last else f"T_{step}", (n, m))
        src = cur
        if step == "bias":
            stages.append(compute("T_add", nxt, [(n, "S"), (m, "S")], lambda i, j, s=src: s[i, j] + bias_buf[j]))
        else:
            stages.append(compute("T_relu", nxt, [(n, "S"), (m, "S")], lambda i, j, s=src: E.Max(s[i, j], f32(0))))
        if last:
            params.append(nxt)
        else:
            allocs.append(nxt)
        cur = nxt
    return IRModule.from_func(func(params, stages, allocs))


def elementwise_relu(n: int = 64, m: int = 64) -> IRModule:
    a, out = buffer("A", (n, m)), buffer("B", (n, m))
    stmt = compute("relu", out, [(n, "S"), (m, "S")], lambda i, j: E.Max(a[i, j], f32(0)))
    return IRModule.from_func(func([a, out], [stmt]))


def conv2d_nhwc(n: int = 1, h: int = 224, w: int = 224, ci: int = 3, co: int = 64,
                kernel: int = 7, stride: int = 2, pad: int = 3) -> IRModule:
    """TVM te_workload C2D's shape: a padding block then the reduction."""
    inputs = buffer("inputs", (n, h, w, ci))
    weight = buffer("weight", (kernel, kernel, ci, co))
    ph, pw = h + 2 * pad, w + 2 * pad
    oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    padded = buffer("PadInput", (n, ph, pw, ci))
    out = buffer("conv2d_nhwc", (n, oh, ow, co))

    def pad_value(i0: E.Var, i1: E.Var, i2: E.Var, i3: E.Var) -> E.PrimExpr:
        cond = (E.IntImm("int32", pad) <= i1) & (i1 < h + pad) & (E.IntImm("int32", pad) <= i2) & (i2 < w + pad)
        return E.Call("float32", "if_then_else", (cond, inputs[i0, i1 - pad, i2 - pad, i3], f32(0)))

    pad_stmt = compute("PadInput", padded, [(n, "S"), (ph, "S"), (pw, "S"), (ci, "S")], pad_value)
    conv = compute(
        "conv2d_nhwc", out,
        [(n, "S"), (oh, "S"), (ow, "S"), (co, "S"), (kernel, "R"), (kernel, "R"), (ci, "R")],
        lambda b, y, x, c, rh, rw, rc: padded[b, y * stride + rh, x * stride + rw, c // co * ci + rc] * weight[rh, rw, rc, c],
        init=f32(0),
    )
    return IRModule.from_func(func([inputs, weight, out], [pad_stmt, conv], [padded]))


def matmul_then_rowsum(n: int = 64, m: int = 64, k: int = 64, big_first: bool = True) -> IRModule:
    """Two reductions: a matmul (n*m*k*2 FLOPs) and a row sum of its result (n*m FLOPs),
    in either order (the row sum of an input when it comes first)."""
    a, b = buffer("A", (n, k)), buffer("B", (k, m))
    c = buffer("C", (n, m))
    s = buffer("S", (n,))
    mm = _matmul_stmt(a, b, c, n, m, k)
    if big_first:
        rs = compute("rowsum", s, [(n, "S"), (m, "R")], lambda i, j: c[i, j], init=f32(0))
        return IRModule.from_func(func([a, b, s], [mm, rs], [c]))
    rs = compute("rowsum", s, [(n, "S"), (k, "R")], lambda i, j: a[i, j], init=f32(0))
    return IRModule.from_func(func([a, b, c, s], [rs, mm]))


def softmax(m: int = 256, n: int = 256) -> IRModule:
    """Row softmax in TVM's four stages: max, exp, sum, divide."""
    a = buffer("A", (m, n))
    mx, ex, sm, out = buffer("T_maxelem", (m,)), buffer("T_exp", (m, n)), buffer("T_expsum", (m,)), buffer("T_softmax", (m, n))
    neg_inf = E.FloatImm("float32", -3.4028234663852886e38)
    s1 = compute("T_softmax_maxelem", mx, [(m, "S"), (n, "R")], lambda i, k: a[i, k], init=neg_inf,
                 combine=lambda acc, v: E.Max(acc, v))
    s2 = compute("T_softmax_exp", ex, [(m, "S"), (n, "S")], lambda i, j: E.Call("float32", "exp", (a[i, j] - mx[i],)))
    s3 = compute("T_softmax_expsum", sm, [(m, "S"), (n, "R")], lambda i, k: ex[i, k], init=f32(0))
    s4 = compute("T_softmax_norm", out, [(m, "S"), (n, "S")], lambda i, j: ex[i, j] / sm[i])
    return IRModule.from_func(func([a, out], [s1, s2, s3, s4], [mx, ex, sm]))


SAMPLES: dict[str, Callable[[], IRModule]] = {
    "matmul": matmul,
    "matmul_bias_relu": lambda: matmul_fused(bias=True, relu=True),
    "relu": elementwise_relu,
    "conv2d_nhwc": conv2d_nhwc,
    "two_reductions": matmul_then_rowsum,
    "softmax": softmax,
}
