"""Tensor intrinsics by name: a description (what the hardware instruction computes, as a
PrimFunc whose root block holds the computation) and an implementation (what replaces it), as
TVM registers them with `TensorIntrin.register` (docs/architecture.md, "Schedules and traces").
`Schedule.tensorize(block, name)` checks a block against the description and puts the
implementation in its place.

Built in: TVM's CUDA `dp4a` family (`__dp4a`: a 4-way int8 dot product accumulated into an
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
