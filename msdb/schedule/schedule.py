"""`Schedule`: TVM's scheduling primitives over msdb's IR, each recorded into a trace.

Core only in this file: the symbol table of random variables, the trace being recorded, seeding,
copying, and the internal helpers every primitive uses. Loop primitives, sampling and block
primitives are added by the sections below and by mixins (`BlockPrimitives`).

Internal API for primitive implementations (stable; mixins rely on it):
- `self._state`: `ScheduleState` (module + index); `self._func_name`: function worked on.
- `self._block(rv) -> Block`, `self._block_name(rv) -> str`, `self._loop(rv) -> For`,
  `self._value(rv_or_int) -> int`.
- `self._new_block_rv(name) -> BlockRV`, `self._new_loop_rv(var) -> LoopRV`,
  `self._new_expr_rv(value) -> ExprRV`.
- `self._record(kind, inputs, attrs, outputs, decision=None)`: append an instruction.
- `self._atomic()`: context manager; on ScheduleError the state and the symbol table are
  restored, so a failed primitive leaves the schedule unchanged and usable.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, Iterator

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir.function import IRModule, PrimFunc
from msdb.schedule.instruction import Instruction
from msdb.schedule.rv import RV, BlockRV, ExprRV, LoopRV
from msdb.schedule.state import ScheduleState


class Schedule:
    """A schedule of an IRModule (a lone PrimFunc is treated as {"main": f}).

    `seed` makes sampling deterministic: the same seed and the same calls give the same
    decisions. Every primitive is recorded in `trace`.
    """

    def __init__(self, mod: IRModule | PrimFunc, seed: int | None = None) -> None:
        if isinstance(mod, PrimFunc):
            mod = IRModule.from_func(mod)
        if not isinstance(mod, IRModule):
            raise TypeError(f"Schedule expects an IRModule or PrimFunc, got {type(mod).__name__}")
        self._state = ScheduleState(mod)
        self._func_name: str = "main" if "main" in mod.functions or len(mod.functions) != 1 else next(iter(mod.functions))
        self._symbols: dict[RV, Any] = {}
        self._insts: list[Instruction] = []
        self._decisions: dict[Instruction, Any] = {}
        self._seed = seed
        self._rng = random.Random(seed if seed is not None else random.SystemRandom().randrange(1, 2**31))

    # ---- public core ----
    @property
    def mod(self) -> IRModule:
        """The module as transformed so far."""
        return self._state.mod

    @property
    def func_name(self) -> str:
        return self._func_name

    def work_on(self, func_name: str) -> None:
        """Direct later primitives (get_block without func_name) at `func_name`."""
        self._state.func(func_name)
        self._func_name = func_name

    @property
    def trace(self) -> "Trace":  # noqa: F821
        """The instructions recorded so far, with their sampling decisions."""
        from msdb.schedule.trace import Trace

        return Trace(tuple(self._insts), dict(self._decisions))

    def copy(self) -> Schedule:
        """An independent schedule in the same state: same RVs, same trace, forked RNG state."""
        clone = Schedule.__new__(Schedule)
        clone._state = self._state.copy()
        clone._func_name = self._func_name
        clone._symbols = dict(self._symbols)
        clone._insts = list(self._insts)
        clone._decisions = dict(self._decisions)
        clone._seed = self._seed
        clone._rng = random.Random()
        clone._rng.setstate(self._rng.getstate())
        return clone

    def seed(self, seed: int) -> None:
        """Reseed the sampler."""
        self._seed = seed
        self._rng = random.Random(seed)

    def fork_seed(self) -> int:
        """A new seed drawn from this schedule's RNG (for child schedules)."""
        return self._rng.randrange(1, 2**31)

    def get(self, rv: RV | int) -> Any:
        """What an RV stands for now: a Block, a For, or an int (for an ExprRV)."""
        if isinstance(rv, BlockRV):
            return self._block(rv)
        if isinstance(rv, LoopRV):
            return self._loop(rv)
        if isinstance(rv, ExprRV):
            return self._value(rv)
        if isinstance(rv, int):
            return rv
        raise TypeError(f"get() expects a BlockRV, LoopRV or ExprRV, got {type(rv).__name__}")

    def remove_rv(self, rv: RV) -> None:
        """Forget an RV (TVM's RemoveRV)."""
        self._symbols.pop(rv, None)

    # ---- internal helpers for primitives ----
    def _lookup(self, rv: RV, kind: type) -> Any:
        if not isinstance(rv, kind):
            raise ScheduleError(f"expected a {kind.__name__}, got {type(rv).__name__}")
        try:
            return self._symbols[rv]
        except KeyError:
            raise ScheduleError(f"{kind.__name__} {rv!r} does not belong to this schedule (or was removed)") from None

    def _block_name(self, rv: BlockRV) -> str:
        return self._lookup(rv, BlockRV)

    def _block(self, rv: BlockRV) -> S.Block:
        return self._state.block(self._func_name, self._block_name(rv))

    def _loop(self, rv: LoopRV) -> S.For:
        return self._state.loop(self._func_name, self._lookup(rv, LoopRV))

    def _value(self, rv: ExprRV | int | E.IntImm) -> int:
        if isinstance(rv, int):
            return rv
        if isinstance(rv, E.IntImm):
            return rv.value
        return self._lookup(rv, ExprRV)

    def _new_block_rv(self, name: str) -> BlockRV:
        rv = BlockRV()
        self._symbols[rv] = name
        return rv

    def _new_loop_rv(self, var: E.Var) -> LoopRV:
        rv = LoopRV()
        self._symbols[rv] = var
        return rv

    def _new_expr_rv(self, value: int) -> ExprRV:
        rv = ExprRV()
        self._symbols[rv] = int(value)
        return rv

    def _record(self, kind: str, inputs: list[Any] | tuple[Any, ...], attrs: list[Any] | tuple[Any, ...],
                outputs: list[Any] | tuple[Any, ...], decision: Any = None) -> Instruction:
        inst = Instruction(kind, tuple(inputs), tuple(attrs), tuple(outputs))
        self._insts.append(inst)
        if decision is not None:
            self._decisions[inst] = decision
        return inst

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        saved = (self._state.copy(), dict(self._symbols), len(self._insts), dict(self._decisions), self._rng.getstate())
        try:
            yield
        except ScheduleError:
            state, symbols, n_insts, decisions, rng_state = saved
            self._state = state
            self._symbols = symbols
            del self._insts[n_insts:]
            self._decisions = decisions
            self._rng.setstate(rng_state)
            raise
