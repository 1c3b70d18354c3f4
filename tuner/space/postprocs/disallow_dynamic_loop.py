"""`DisallowDynamicLoop` (docs/architecture.md, "Tuner"): TVM's post-processor that rejects a
candidate with a loop whose extent is not a constant.

The CPU code generator and the cost model's features need static trip counts; a dynamic extent
(a sampled tile that did not divide a symbolic shape, say) would be measured as something else
than what was searched. Like TVM it looks at the extent node itself: a constant integer
immediate passes, any expression fails, whether or not it would fold to a constant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.schedule.analysis import statements_under
from msdb.tuner.space.postprocs.base import Postproc

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.schedule.schedule import Schedule

__all__ = ["DisallowDynamicLoop", "has_dynamic_loop"]


def has_dynamic_loop(mod: IRModule) -> bool:
    """Whether some loop of some function (block inits included) has a non-immediate extent."""
    return any(isinstance(node, S.For) and not isinstance(node.extent, E.IntImm)
               for func in mod.functions.values()
               for node in statements_under(func.body, inits=True))


class DisallowDynamicLoop(Postproc):
    """Reject a schedule with a loop of non-constant extent (TVM's `DisallowDynamicLoop`)."""

    def apply(self, sch: Schedule) -> bool:
        return not has_dynamic_loop(sch.mod)
