"""`PostOrderApply` (TVM's default space generator): every schedule rule, in order, is applied
to every block, visiting blocks from the root down in reverse post-order as TVM does; a rule
that returns several schedules multiplies the design spaces. A block annotated
`schedule_rule` is left to the user: only ApplyCustomRule sees it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from msdb.ir import stmt as S
from msdb.ir.functor import post_order_visit
from msdb.schedule.schedule import Schedule
from msdb.tuner.space.generators.base import SpaceGenerator

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.schedule.rv import BlockRV

__all__ = ["PostOrderApply"]


class PostOrderApply(SpaceGenerator):
    """Design spaces by applying the rules block by block; `block_filter(block)` may restrict
    the blocks the rules see."""

    def __init__(self, block_filter: Callable[[S.Block], bool] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.block_filter = block_filter

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        sch = Schedule(mod, seed=self._fork_seed())
        blocks = self._collect_blocks(sch)
        result = [sch]
        for rule in self.sch_rules:
            stack: list[tuple[Schedule, list[BlockRV]]] = [(s, list(blocks)) for s in result]
            result = []
            while stack:
                current, remaining = stack.pop()
                if not remaining:
                    result.append(current)
                    continue
                block = remaining.pop()
                if not current.has_block(block) or ("schedule_rule" in current.get(block).annotations
                                                    and not getattr(rule, "sees_custom_blocks", False)):
                    stack.append((current, remaining))
                    continue
                for applied in rule.apply(current, block):
                    stack.append((applied, list(remaining)))
        return result

    def _collect_blocks(self, sch: Schedule) -> list[BlockRV]:
        """Every block of the function, children before parents (the root last)."""
        names: list[str] = []

        def visit(node: object) -> None:
            if type(node) is S.Block and (self.block_filter is None or self.block_filter(node)):
                names.append(node.name_hint)

        post_order_visit(sch.state.func(sch.func_name).body, visit)
        return [sch.get_block(name) for name in names]
