"""The space generator interface (docs/architecture.md, "Tuner"): TVM's `SpaceGenerator`, which
turns a task's module into its design spaces (schedules whose traces hold sampling
instructions) and carries what the search needs to explore them: the post-processors every
candidate goes through and the mutators with their probabilities.

Rules, post-processors and mutators default to the target kind's, as TVM picks them when the
generator joins a task (`TuneContext.space_kind`: "cuda" for GPU targets, else "llvm"; "llvm"
before it joins one); a user passes a kind name or lists of their own (subclasses of
`ScheduleRule`, `Postproc`, `Mutator`) instead."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Sequence

from msdb.kinds import load_kind

if TYPE_CHECKING:
    from msdb.ir.function import IRModule
    from msdb.schedule.schedule import Schedule
    from msdb.tuner.context import TuneContext
    from msdb.tuner.space.mutators.base import Mutator
    from msdb.tuner.space.postprocs.base import Postproc
    from msdb.tuner.space.rules.base import ScheduleRule

__all__ = ["SpaceGenerator", "create", "TARGET_DEFAULT"]

#: The default of each of the three lists: the task's target kind decides (TVM leaves them unset
#: and fills them in InitializeWithTuneContext); "llvm" until the generator joins a task.
TARGET_DEFAULT = "target-default"


class SpaceGenerator:
    """Base class: subclass it and override `generate_design_space`."""

    def __init__(self, sch_rules: Sequence[ScheduleRule] | str | None = TARGET_DEFAULT,
                 postprocs: Sequence[Postproc] | str | None = TARGET_DEFAULT,
                 mutator_probs: dict[Mutator, float] | str | None = TARGET_DEFAULT) -> None:
        self._rules_arg = sch_rules
        self._postprocs_arg = postprocs
        self._mutators_arg = mutator_probs
        self.sch_rules: list[ScheduleRule] = []
        self.postprocs: list[Postproc] = []
        self.mutator_probs: dict[Mutator, float] = {}
        self.context: TuneContext | None = None
        self._default_kind = "llvm"
        self._resolve()

    def _resolve(self) -> None:
        """Turn kind names into the kind's default lists (TVM fills them from the target)."""
        from msdb.tuner.space.mutators.base import create as create_mutators
        from msdb.tuner.space.postprocs.base import create as create_postprocs
        from msdb.tuner.space.rules.base import create as create_rules

        def kind(arg: Any) -> Any:
            return self._default_kind if arg == TARGET_DEFAULT else arg

        rules, postprocs, mutators = kind(self._rules_arg), kind(self._postprocs_arg), kind(self._mutators_arg)
        self.sch_rules = create_rules(rules) if isinstance(rules, str) else list(rules or [])
        self.postprocs = create_postprocs(postprocs) if isinstance(postprocs, str) else list(postprocs or [])
        self.mutator_probs = create_mutators(mutators) if isinstance(mutators, str) else dict(mutators or {})
        for prob in self.mutator_probs.values():
            if not prob >= 0:
                raise ValueError(f"mutator probabilities must be >= 0, got {prob!r}")

    def _initialize_with_tune_context(self, context: TuneContext) -> None:
        self.context = context
        space_kind = context.space_kind()
        if space_kind != self._default_kind and TARGET_DEFAULT in (self._rules_arg, self._postprocs_arg,
                                                                   self._mutators_arg):
            self._default_kind = space_kind
            self._resolve()
        for rule in self.sch_rules:
            rule._initialize_with_tune_context(context)
        for postproc in self.postprocs:
            postproc._initialize_with_tune_context(context)
        for mutator in self.mutator_probs:
            mutator._initialize_with_tune_context(context)

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        """The design spaces of `mod` (one Schedule each, traced)."""
        raise NotImplementedError

    def clone(self) -> SpaceGenerator:
        """A copy for another task, with cloned rules, post-processors and mutators."""
        twin = copy.copy(self)
        twin.context = None
        twin.sch_rules = [rule.clone() for rule in self.sch_rules]
        twin.postprocs = [postproc.clone() for postproc in self.postprocs]
        twin.mutator_probs = {mutator.clone(): prob for mutator, prob in self.mutator_probs.items()}
        return twin

    def _fork_seed(self) -> int:
        """A seed for a new design-space schedule, from the task's random state."""
        return self.context.fork_seed() if self.context is not None else 0

    @staticmethod
    def create(kind: str = "post-order-apply", **kwargs: Any) -> SpaceGenerator:
        return create(kind, **kwargs)


_KINDS = {
    "post-order-apply": ("msdb.tuner.space.generators.post_order_apply", "PostOrderApply"),
    "schedule-fn": ("msdb.tuner.space.generators.schedule_fn", "ScheduleFn"),
}


def create(kind: str = "post-order-apply", **kwargs: Any) -> SpaceGenerator:
    """A space generator by name: "post-order-apply" (TVM's default) or "schedule-fn"."""
    generator: SpaceGenerator = load_kind(_KINDS, kind, "space generator")(**kwargs)
    return generator
