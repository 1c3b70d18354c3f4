"""The post-processor interface (docs/architecture.md, "Tuner"): TVM's `Postproc`. After a
candidate's trace is replayed, each post-processor rewrites the schedule into what the code
generator builds (turning the rules' annotations into loops) or rejects it; a rejected
candidate is dropped.

A user's own post-processor subclasses `Postproc` and overrides `apply`;
`Postproc.create("llvm")` gives TVM's default CPU post-processors in TVM's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msdb.kinds import load_kind
from msdb.tuner.space.part import SpacePart

if TYPE_CHECKING:
    from msdb.schedule.schedule import Schedule

__all__ = ["Postproc", "create"]


class Postproc(SpacePart):
    """Base class of post-processors."""

    def apply(self, sch: Schedule) -> bool:
        """Rewrite `sch` in place (recorded in its trace after EnterPostproc); False rejects
        the candidate."""
        raise NotImplementedError

    @staticmethod
    def create(kind: str = "llvm") -> list[Postproc]:
        return create(kind)


_KINDS = {"llvm": ("msdb.tuner.space.postprocs.defaults", "llvm_postprocs"),
          "cuda": ("msdb.tuner.space.postprocs.defaults", "cuda_postprocs"),
          "cuda-tensorcore": ("msdb.tuner.space.postprocs.defaults", "cuda_tensorcore_postprocs")}


def create(kind: str = "llvm") -> list[Postproc]:
    """The default post-processors of a target kind ("llvm": TVM's DefaultLLVM, "cuda":
    DefaultCUDA, "cuda-tensorcore": DefaultCUDATensorCore), in order."""
    factory: Any = load_kind(_KINDS, kind, "post-processor set")
    postprocs: list[Postproc] = factory()
    return postprocs
