"""Space generators (docs/architecture.md, "Tuner"): `SpaceGenerator` and `create(kind)`;
`PostOrderApply` (rules on every block) and `ScheduleFn` (a user's function)."""

from __future__ import annotations

from msdb.tuner.space.generators.base import SpaceGenerator, create
from msdb.tuner.space.generators.post_order_apply import PostOrderApply
from msdb.tuner.space.generators.schedule_fn import ScheduleFn

__all__ = ["SpaceGenerator", "create", "PostOrderApply", "ScheduleFn"]
