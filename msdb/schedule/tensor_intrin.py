"""Tensor intrinsics by name: a description (what the hardware instruction computes, as a
PrimFunc whose root block holds the computation) and an implementation (what replaces it), as
TVM registers them with `TensorIntrin.register` (docs/architecture.md, "Schedules and traces").
`Schedule.tensorize(block, name)` checks a block against the description and puts the
implementation in its place.

Built in: TVM's CUDA warp-level matrix intrinsics (`wmma_*`, 16x16x16 tiles: fp16 and int8
inputs, fp32, fp16 and int32 accumulators; the fragments live in the "wmma.matrix_a",
"wmma.matrix_b" and "wmma.accumulator" scopes) under TVM 0.27's names, which TVM's tensor-core
rule writes into traces: `wmma_load_16x16x16_f16_a_shared_dyn`, `wmma_sync_16x16x16_f16f16f32_trans`,
`wmma_fill_16x16x16_f32`, `wmma_store_16x16x16_f32_shared_dyn`, ... Their implementations call
TVM's builtins (`T.tvm_load_matrix_sync`, `T.tvm_mma_sync`, `T.tvm_fill_fragment`,
`T.tvm_store_matrix_sync`) with the fragment index TVM computes from the buffer's elem_offset and
first stride.

And TVM's CUDA `dp4a` family (`__dp4a`: a 4-way int8 dot product accumulated into an
int32), under TVM 0.27's names (`dp4a_s8s8s32`, `dp4a_u8s8s32`, `dp4a_s8u8s32`) and the name
older TVM traces use (`dp4a`, the signed one). msdb's IR has no vector lanes, so the
implementation passes the first element of each 4-element operand (`A[0]`) where TVM passes the
4-lane vector load `A[T.Ramp(0, 1, 4)]`; the operands are match buffers of 4 contiguous,
4-byte-aligned elements, so a code generator reads each as one 32-bit word (`*(int*)&A[0]`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from msdb.errors import ScheduleError
from msdb.ir.function import IRModule, PrimFunc

__all__ = ["TensorIntrin", "register", "get", "registered"]


@dataclass(frozen=True)
class TensorIntrin:
    """A description and an implementation over the same buffers (same count, shapes, dtypes
    and scopes, in the same order)."""

    name: str
    desc: PrimFunc
    impl: PrimFunc


_SOURCES: dict[str, tuple[str, str]] = {}
_REGISTERED: dict[str, TensorIntrin] = {}


def register(name: str, desc: PrimFunc | str, impl: PrimFunc | str, *, override: bool = False) -> None:
    """Register a tensor intrinsic: PrimFuncs, or TVMScript text parsed on first use."""
    if not override and name in registered():
        raise ScheduleError(f"tensor intrinsic {name!r} is already registered; pass override=True to replace it")
    _REGISTERED.pop(name, None)
    _SOURCES.pop(name, None)
    _parse.cache_clear()
    if isinstance(desc, str) and isinstance(impl, str):
        _SOURCES[name] = (desc, impl)
    elif isinstance(desc, PrimFunc) and isinstance(impl, PrimFunc):
        _check_pair(name, desc, impl)
        _REGISTERED[name] = TensorIntrin(name, desc, impl)
    else:
        raise ScheduleError(f"tensor intrinsic {name!r}: give the description and the implementation both as "
                            "PrimFuncs or both as TVMScript")


def registered() -> list[str]:
    """The names of every registered tensor intrinsic."""
    return sorted(set(_REGISTERED) | set(_SOURCES))


def get(name: str) -> TensorIntrin:
    """The tensor intrinsic registered as `name`; ScheduleError naming the known ones if none."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _SOURCES:
        return _parse(name)
    raise ScheduleError(f"tensor intrinsic {name!r} is not registered; registered: {registered()}")


@lru_cache(maxsize=None)
def _parse(name: str) -> TensorIntrin:
    from msdb.ir import from_script

    desc_text, impl_text = _SOURCES[name]
    desc, impl = (_only_func(from_script(text)) for text in (desc_text, impl_text))
    _check_pair(name, desc, impl)
    return TensorIntrin(name, desc, impl)


def _only_func(mod: IRModule) -> PrimFunc:
    (func,) = mod.functions.values()
    return func


def _check_pair(name: str, desc: PrimFunc, impl: PrimFunc) -> None:
    descs = [desc.buffer_map[p] for p in desc.params]
    impls = [impl.buffer_map[p] for p in impl.params]
    if len(descs) != len(impls) or any(
            (a.dtype, a.scope, len(a.shape)) != (b.dtype, b.scope, len(b.shape)) for a, b in zip(descs, impls)):
        raise ScheduleError(f"tensor intrinsic {name!r}: the description and the implementation must take the same "
                            "buffers (count, dtype, scope, rank) in the same order")


def _dp4a(dtype_a: str, dtype_b: str, dtype_c: str) -> tuple[str, str]:
    params = (f'A: T.Buffer((4,), "{dtype_a}", offset_factor=1, align=4, scope="shared"), '
              f'B: T.Buffer((4,), "{dtype_b}", offset_factor=1, align=4, scope="shared"), '
              f'C: T.Buffer((1,), "{dtype_c}", offset_factor=1, align=4, scope="local")')
    head = "@T.prim_func(s_tir=True)\ndef {name}(" + params + "):\n"
    scope = '    with T.sblock("root"):\n        T.reads(C[0], A[0:4], B[0:4])\n        T.writes(C[0])\n'
    desc = (head.format(name="dp4a_desc") + scope
            + "        for i in range(4):\n"
            + '            with T.sblock("update"):\n'
            + '                vi = T.axis.remap("R", [i])\n'
            + f'                C[0] = C[0] + T.cast(A[vi], "{dtype_c}") * T.cast(B[vi], "{dtype_c}")\n')
    zero = "T.uint32(0)" if dtype_c == "uint32" else "T.int32(0)"
    impl = (head.format(name="dp4a_impl") + scope
            + f'        C[0] = C[0] + T.call_pure_extern("{dtype_c}", "__dp4a", A[0], B[0], {zero})\n')
    return desc, impl


for _name, _types in (("dp4a_s8s8s32", ("int8", "int8", "int32")), ("dp4a_u8s8s32", ("uint8", "int8", "int32")),
                      ("dp4a_s8u8s32", ("int8", "uint8", "int32")), ("dp4a_u8u8u32", ("uint8", "uint8", "uint32")),
                      ("dp4a", ("int8", "int8", "int32"))):
    register(_name, *_dp4a(*_types))


_WMMA = 16  # the m, n and k of every wmma intrinsic msdb registers
_SHORT = {"float16": "f16", "float32": "f32", "int8": "s8", "int32": "s32"}
_ZERO = {"float32": "T.float32(0.0)", "float16": "T.float16(0.0)", "int32": "T.int32(0)"}


def _frag_index(buf: str) -> str:
    """The index of a 16x16 fragment in its fragment array, from the buffer's offset and first
    stride (TVM's `get_wmma_fragment_index`)."""
    o, st = f"{buf}.elem_offset", f"{buf}.strides[0]"
    return f"{o} // {st} // {_WMMA} * ({st} // {_WMMA}) + {o} % {st} // {_WMMA}"


def _wmma_func(name: str, params: list[tuple[str, str, str, str]], reads: str, writes: str, body: list[str]) -> str:
    """A 16x16 intrinsic PrimFunc as TVMScript: `params` are (name, dtype, scope, strides)."""
    decls = []
    for pname, dtype, scope, strides in params:
        parts = [f"({_WMMA}, {_WMMA})", f'"{dtype}"']
        if strides:
            parts.append(f"strides={strides}")
        if scope != "global":
            parts.append(f'scope="{scope}"')
        parts.append(f"offset_factor={_WMMA}")
        decls.append(f"{pname}: T.Buffer({', '.join(parts)})")
    lines = [f"@T.prim_func(s_tir=True)", f"def {name}({', '.join(decls)}):", '    with T.sblock("root"):',
             f"        T.reads({reads})", f"        T.writes({writes})"]
    return "\n".join(lines + ["        " + line for line in body]) + "\n"


def _copy_desc(block: str) -> list[str]:
    return [f"for i, j in T.grid({_WMMA}, {_WMMA}):", f'    with T.sblock("{block}"):',
            '        vii, vjj = T.axis.remap("SS", [i, j])', "        C[vii, vjj] = A[vii, vjj]"]


def _wmma_load(dtype: str, scope: str, is_b: bool, col_major: bool) -> tuple[str, str]:
    frag = "wmma.matrix_b" if is_b else "wmma.matrix_a"
    whole = f"A[0:{_WMMA}, 0:{_WMMA}]", f"C[0:{_WMMA}, 0:{_WMMA}]"
    desc = _wmma_func("wmma_load_desc", [("A", dtype, scope, ""), ("C", dtype, frag, "")], *whole, _copy_desc("load"))
    call = (f"T.tvm_load_matrix_sync(C.data, {_WMMA}, {_WMMA}, {_WMMA}, {_frag_index('C')}, "
            f'T.tvm_access_ptr(T.type_annotation("{dtype}"), A.data, A.elem_offset, A.strides[0] * {_WMMA}, 1), '
            f'A.strides[0], "{"col_major" if col_major else "row_major"}")')
    impl = _wmma_func("wmma_load_impl", [("A", dtype, scope, '("s1", "s0")'), ("C", dtype, frag, '("d1", "d0")')],
                      *whole, [call])
    return desc, impl


def _wmma_fill(dtype: str) -> tuple[str, str]:
    acc = "wmma.accumulator"
    desc = _wmma_func("wmma_fill_desc", [("C", dtype, acc, "")], "", f"C[0:{_WMMA}, 0:{_WMMA}]",
                      [f"for i, j in T.grid({_WMMA}, {_WMMA}):", '    with T.sblock("init"):',
                       '        vii, vjj = T.axis.remap("SS", [i, j])', f"        C[vii, vjj] = {_ZERO[dtype]}"])
    impl = _wmma_func("wmma_fill_impl", [("C", dtype, acc, '("d1", "d0")')], "", f"C[0:{_WMMA}, 0:{_WMMA}]",
                      # TVM passes a float32 zero whatever the accumulator's type; CUDA converts it
                      [f"T.tvm_fill_fragment(C.data, {_WMMA}, {_WMMA}, {_WMMA}, {_frag_index('C')}, T.float32(0.0))"])
    return desc, impl


def _wmma_store(dtype: str, scope: str) -> tuple[str, str]:
    acc = "wmma.accumulator"
    whole = f"A[0:{_WMMA}, 0:{_WMMA}]", f"C[0:{_WMMA}, 0:{_WMMA}]"
    desc = _wmma_func("wmma_store_desc", [("A", dtype, acc, ""), ("C", dtype, scope, "")], *whole, _copy_desc("store"))
    call = (f"T.tvm_store_matrix_sync(A.data, {_WMMA}, {_WMMA}, {_WMMA}, {_frag_index('A')}, "
            f'T.tvm_access_ptr(T.type_annotation("{dtype}"), C.data, C.elem_offset, C.strides[0] * {_WMMA}, 2), '
            'C.strides[0], "row_major")')
    impl = _wmma_func("wmma_store_impl", [("A", dtype, acc, '("d1", "d0")'), ("C", dtype, scope, '("s1", "s0")')],
                      *whole, [call])
    return desc, impl


def _wmma_sync(in_dtype: str, out_dtype: str, b_transposed: bool) -> tuple[str, str]:
    frags = [("A", in_dtype, "wmma.matrix_a"), ("B", in_dtype, "wmma.matrix_b"), ("C", out_dtype, "wmma.accumulator")]
    reads = f"C[0:{_WMMA}, 0:{_WMMA}], A[0:{_WMMA}, 0:{_WMMA}], B[0:{_WMMA}, 0:{_WMMA}]"
    writes = f"C[0:{_WMMA}, 0:{_WMMA}]"
    b_load = "B[vjj, vkk]" if b_transposed else "B[vkk, vjj]"
    cast = (lambda x: x) if in_dtype == out_dtype else (lambda x: f'T.Cast("{out_dtype}", {x})')
    desc = _wmma_func("wmma_sync_desc", [(n, d, sc, "") for n, d, sc in frags], reads, writes,
                      [f"for i, j, k in T.grid({_WMMA}, {_WMMA}, {_WMMA}):", '    with T.sblock(""):',
                       '        vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])',
                       f"        C[vii, vjj] = C[vii, vjj] + {cast('A[vii, vkk]')} * {cast(b_load)}"])
    strides = {"A": '("a1", "a0")', "B": '("b1", "b0")', "C": '("c1", "c0")'}
    call = ("T.tvm_mma_sync(C.data, " + _frag_index("C") + ", A.data, " + _frag_index("A") + ", B.data, "
            + _frag_index("B") + ", C.data, " + _frag_index("C") + ")")
    impl = _wmma_func("wmma_sync_impl", [(n, d, sc, strides[n]) for n, d, sc in frags], reads, writes, [call])
    return desc, impl


def _register_wmma() -> None:
    """TVM 0.27's 16x16x16 wmma intrinsics, by TVM's names."""
    shape = f"{_WMMA}x{_WMMA}x{_WMMA}"
    for in_dtype, out_dtypes in (("float16", ("float32", "float16")), ("int8", ("int32",))):
        for out_dtype in out_dtypes:
            for trans in (False, True):
                name = f"wmma_sync_{shape}_{_SHORT[in_dtype] * 2}{_SHORT[out_dtype]}" + ("_trans" if trans else "")
                register(name, *_wmma_sync(in_dtype, out_dtype, trans))
        for operand in ("a", "b"):
            for trans in (False, True):
                for scope in ("shared", "shared.dyn"):
                    name = (f"wmma_load_{shape}_{_SHORT[in_dtype]}_{operand}" + ("_trans" if trans else "")
                            + "_" + scope.replace(".", "_"))
                    # a transposed operand is loaded column-major
                    register(name, *_wmma_load(in_dtype, scope, operand == "b", trans))
    for dtype in ("float32", "float16", "int32"):
        register(f"wmma_fill_{shape}_{_SHORT[dtype]}", *_wmma_fill(dtype))
        for scope in ("shared", "shared.dyn", "global"):
            register(f"wmma_store_{shape}_{_SHORT[dtype]}_{scope.replace('.', '_')}", *_wmma_store(dtype, scope))


_register_wmma()
