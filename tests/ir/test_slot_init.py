"""The IR's constructors that set slots directly (`msdb.ir.slot_init`) build what the
dataclass constructors build: defaults, default factories, `__post_init__`, keywords, frozen
nodes, `dataclasses.replace`; and a field they cannot handle is refused."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType

import pytest

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.slot_init import fast_init


def test_defaults_factories_and_post_init_are_the_dataclasses() -> None:
    i = E.Var("i")
    zero, four = E.IntImm("int32", 0), E.IntImm("int32", 4)
    body = S.Evaluate(i)
    plain = S.For(i, zero, four, S.ForKind.SERIAL, body)
    assert plain.thread_binding is None
    assert isinstance(plain.annotations, MappingProxyType) and dict(plain.annotations) == {}
    assert S.For(i, zero, four, S.ForKind.SERIAL, body).annotations is not plain.annotations  # a fresh map each
    annotated = S.For(loop_var=i, min=zero, extent=four, kind=S.ForKind.PARALLEL, body=body,
                      annotations={"pragma": 1})
    assert isinstance(annotated.annotations, MappingProxyType) and annotated.annotations["pragma"] == 1
    moved = dataclasses.replace(annotated, extent=E.IntImm("int32", 8))
    assert moved.extent.value == 8 and moved.annotations == annotated.annotations
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.extent = zero  # type: ignore[misc]
    with pytest.raises(TypeError):
        S.For(i, zero)  # type: ignore[call-arg]
    assert (i + 1).dtype == "int32" and (i < 1).dtype == "bool" and E.Not(i < 1).a.b.value == 1


def test_a_keyword_only_field_is_refused() -> None:
    with pytest.raises(TypeError, match="field 'b' of Odd is not a plain positional field"):
        @fast_init
        @dataclass(frozen=True, slots=True)
        class Odd:
            a: int
            b: int = field(default=0, kw_only=True)
