"""`ApplyCustomRule` (TVM's rule, first in `ScheduleRule::DefaultCUDA`; docs/architecture.md,
"Tuner"): a block annotated `schedule_rule="<name>"` is scheduled by the user's function
registered for that name and one of the target's keys ("cuda", "gpu", "cpu"...), instead of by
the default rules, which skip such blocks (PostOrderApply). TVM looks the function up as the
global `s_tir.meta_schedule.<key>.<name>`; msdb keeps its own registry,
`register_custom_rule`.

An annotation no registered function answers is removed with a warning, as in TVM, so the
default rules then schedule the block; "None" means "leave the block to the defaults"."""

from __future__ import annotations

import logging
from typing import Callable

from msdb.schedule.rv import BlockRV
from msdb.schedule.schedule import Schedule
from msdb.tuner.space.rules.base import ScheduleRule

__all__ = ["ApplyCustomRule", "register_custom_rule", "CustomRuleFn", "SCHEDULE_RULE"]

logger = logging.getLogger(__name__)

SCHEDULE_RULE = "schedule_rule"

#: A user's schedule function: the schedules the block becomes.
CustomRuleFn = Callable[[Schedule, BlockRV], list[Schedule]]

_REGISTRY: dict[tuple[str, str], CustomRuleFn] = {}


def register_custom_rule(name: str, key: str, fn: CustomRuleFn | None) -> None:
    """Schedule blocks annotated `schedule_rule=name` with `fn` on targets with key `key`
    (e.g. "cuda"); `fn=None` removes the registration."""
    if fn is None:
        _REGISTRY.pop((key, name), None)
    else:
        _REGISTRY[(key, name)] = fn


class ApplyCustomRule(ScheduleRule):
    """Run the registered function of a block's `schedule_rule` annotation."""

    #: PostOrderApply shows this rule the blocks it hides from every other rule.
    sees_custom_blocks = True

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        name = sch.get(block).annotations.get(SCHEDULE_RULE)
        if not isinstance(name, str) or name == "None":
            return [sch]
        keys = self._target_keys()
        for key in keys:
            fn = _REGISTRY.get((key, name))
            if fn is not None:
                return list(fn(sch, block))
        logger.warning("Unknown schedule rule %r for target keys %s; the default rules schedule block %r",
                       name, keys, sch.get(block).name_hint)
        sch.unannotate(block, SCHEDULE_RULE)
        return [sch]

    def _target_keys(self) -> list[str]:
        target = self.context.target if self.context is not None else None
        if target is None:
            return []
        return [str(k) for k in target.config.get("keys", [target.kind])]
