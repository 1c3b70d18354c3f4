"""`EvolutionarySearch`: TVM's default search strategy, warm-started from the database.

Each round evolves the database's best schedules and random samples of the design spaces under
the cost model and measures the best-scored modules not measured before. TVM's defaults, and what
msdb does beyond TVM (measured mutants before the model ranks, the default schedule and
relatives' re-fitted records in the first round, remembered replays): see docs/architecture.md,
"Search".
"""

from __future__ import annotations

import heapq
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from msdb.schedule.trace import Trace
from msdb.tuner.search.base import SearchStrategy
from msdb.tuner.profiler import Profiler
from msdb.tuner.search.prefix_replay import PrefixReplays
from msdb.tuner.search.replay import ReplayFailures, apply_trace, module_key

if TYPE_CHECKING:
    from msdb.schedule.schedule import Schedule
    from msdb.tuner.candidate import MeasureCandidate

__all__ = ["EvolutionarySearch"]

logger = logging.getLogger(__name__)

#: Forked sampling workers each get at least this many tries (fewer are not worth a fork).
PARALLEL_MIN_TRIES_PER_WORKER = 32


class EvolutionarySearch(SearchStrategy):
    """TVM's evolutionary search over the design spaces, scored by a cost model."""

    def __init__(self, *, population_size: int = 512, init_measured_ratio: float = 0.2,
                 init_min_unmeasured: int = 50, max_fail_count: int = 5, genetic_num_iters: int = 4,
                 genetic_mutate_prob: float = 0.85, genetic_max_fail_count: int = 10, eps_greedy: float = 0.05,
                 num_empty_iters_before_early_stop: int = 5, replay_cache_size: int = 4096,
                 measure_default_schedule: bool = True, transfer_neighbours: int = 3,
                 replay_from_parent: bool = True) -> None:
        super().__init__()
        if not 0 <= init_measured_ratio <= 1 or not 0 <= genetic_mutate_prob <= 1 or not 0 <= eps_greedy <= 1:
            raise ValueError("init_measured_ratio, genetic_mutate_prob and eps_greedy are probabilities in [0, 1]")
        self.population_size = population_size
        self.init_measured_ratio = init_measured_ratio
        self.init_min_unmeasured = init_min_unmeasured
        self.max_fail_count = max_fail_count
        self.genetic_num_iters = genetic_num_iters
        self.genetic_mutate_prob = genetic_mutate_prob
        self.genetic_max_fail_count = genetic_max_fail_count
        self.eps_greedy = eps_greedy
        self.num_empty_iters_before_early_stop = num_empty_iters_before_early_stop
        self.failures = ReplayFailures()
        self._empty_iters = 0
        self.replay_cache_size = replay_cache_size
        self._replays: dict[str, Schedule | None] = {}
        self.replay_from_parent = replay_from_parent
        self._prefixes: PrefixReplays | None = PrefixReplays() if replay_from_parent else None
        self.measure_default_schedule = measure_default_schedule
        if isinstance(transfer_neighbours, bool) or not isinstance(transfer_neighbours, int) or transfer_neighbours < 0:
            raise ValueError(f"transfer_neighbours must be an int >= 0, got {transfer_neighbours!r}")
        self.transfer_neighbours = transfer_neighbours
        self._first_round = True
        self._mostly_failing = False  # most random samples fail: sample on every core

    def pre_tuning(self, *args: Any, **kwargs: Any) -> None:
        super().pre_tuning(*args, **kwargs)
        self._replays = {}
        if self._prefixes is not None:
            self._prefixes.clear()
        self._empty_iters = 0
        self._first_round = True
        self._mostly_failing = False

    # ---- one round -----------------------------------------------------------------------
    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        from msdb.tuner.candidate import MeasureCandidate

        wanted = self._round_size()
        if wanted == 0 or self._empty_iters >= self.num_empty_iters_before_early_stop:
            return None
        ranks = self._model_ranks()
        measured, speeds = self._pick_best_from_database(int(self.population_size * self.init_measured_ratio))
        if self._prefixes is not None:  # last round's candidates are no one's parents now
            self._prefixes.keep_only(measured)
        want_unmeasured = self.population_size - len(measured) if ranks else max(self.init_min_unmeasured, wanted)
        with Profiler.timeit("sampling"):
            unmeasured = self._sample_init_population(want_unmeasured)
        if len(unmeasured) < self.init_min_unmeasured:
            logger.warning("task %r: only %d random samples of the design space succeeded (want %d); the task ends",
                           self._context().task_name, len(unmeasured), self.init_min_unmeasured)
            return None
        if ranks:
            bests = self._evolve_with_cost_model(measured + unmeasured, wanted)
        else:  # the model's scores would be noise: mutate what measured fast instead
            bests = self._mutants_of_measured(measured, speeds, (wanted + 1) // 2) if measured else []
        baseline = self._default_schedule_candidate() if self._first_round else []
        if self._first_round:
            baseline += self._transferred_candidates(wanted - len(baseline))
        self._first_round = False
        picks = baseline + self._pick_with_eps_greedy(unmeasured, bests, wanted - len(baseline))
        if not picks:
            self._empty_iters += 1
            return None if self._empty_iters >= self.num_empty_iters_before_early_stop else []
        self._empty_iters = 0
        return [MeasureCandidate.of(sch) for sch in picks]

    # ---- steps ---------------------------------------------------------------------------
    def _postprocs(self) -> list[Any]:
        generator = self._context().space_generator
        return list(generator.postprocs) if generator is not None else []

    def _model_ranks(self) -> bool:
        """Whether the cost model's scores rank candidates yet (see `CostModel.can_rank`); a
        model without the method is trusted."""
        can_rank = getattr(self.cost_model, "can_rank", None)
        return self.cost_model is not None and (can_rank is None or bool(can_rank()))

    def _equality(self) -> str:
        return self.database.module_equality if self.database is not None else "structural"

    def _apply(self, trace: Trace, parent: Schedule | None = None) -> Schedule | None:
        """The trace replayed and post-processed (None: it failed); a fully decided trace seen
        before in this session is not replayed again, and one mutated from `parent` is
        replayed from where it first differs from the parent (`prefix_replay`)."""
        mod = self._context().mod
        assert mod is not None
        key = trace.decided_json()
        if key is not None and key in self._replays:
            return self._replays[key]
        sch = apply_trace(mod, trace, self._postprocs(), self.rng.getrandbits(31), self.failures,
                          prefixes=self._prefixes, parent=parent if key is not None else None)
        self._remember(key, sch)
        if key is None and sch is not None:  # sampled anew: remember it under its decisions
            self._remember(sch.trace.decided_json(), sch)
        return sch

    def _remember(self, key: str | None, sch: Schedule | None) -> None:
        if key is None or self.replay_cache_size <= 0:
            return
        if len(self._replays) >= self.replay_cache_size:
            del self._replays[next(iter(self._replays))]
        self._replays[key] = sch

    def _pick_best_from_database(self, count: int) -> tuple[list[Schedule], list[float]]:
        """The database's best `count` measured schedules of the workload on the target,
        replayed with their decisions (warm start: they are parents, never re-measured), and
        each one's speed relative to the best (1 for the best)."""
        context = self._context()
        if self.database is None or count <= 0:
            return [], []
        picked, costs = [], []
        with Profiler.timeit("database"):
            records = self.database.get_top_k(context.mod, count, context.target)  # type: ignore[arg-type]
        for record in records:
            sch = self._apply(record.trace)
            if sch is not None:
                picked.append(sch)
                costs.append(record.mean_run_secs)
        best = min(costs, default=1.0)
        return picked, [best / cost if cost > 0 else 0.0 for cost in costs]

    def _mutants_of_measured(self, measured: list[Schedule], speeds: list[float], count: int) -> list[Schedule]:
        """`count` mutants of measured schedules, parents drawn by measured speed (what the
        evolution does under a model's scores, one generation deep, with the measurements as
        the scores), in random order."""
        mutators = self._mutators()
        if not mutators:
            return []
        children = self._next_generation(measured, np.asarray(speeds, dtype=np.float64), mutators, size=count,
                                         mutate_prob=1.0)
        self.rng.shuffle(children)
        return children

    def _sample_init_population(self, count: int) -> list[Schedule]:
        """Random samples of the design spaces (every decision drawn anew), as TVM's
        SampleInitPopulation: rounds of `count` tries each (a failed replay or post-processor
        drops its try, so a round can give fewer), until `init_min_unmeasured` are found or
        `max_fail_count` rounds found nothing. A round in which most tries failed (GPU spaces:
        about 90% of random samples fail VerifyGPUCode; docs/architecture.md, "Tuner") makes the
        next rounds TVM's full population: the warm-up's short rounds would often find nothing
        and end the task; and from then on the session's rounds run on every core
        (`parallel_sampling`: the same samples, found sooner)."""
        out: list[Schedule] = []
        fruitless = 0
        tries = max(count, 1)
        first = True
        while first or (len(out) < self.init_min_unmeasured and fruitless < self.max_fail_count):
            first = False
            before = len(out)
            out.extend(self._sample_round(tries))
            found = len(out) - before
            if found == 0:
                fruitless += 1
            if 2 * found < tries:
                tries = max(tries, self.population_size)
                self._mostly_failing = True
        return out

    def _sample_round(self, tries: int) -> list[Schedule]:
        """One round of `tries` fresh samples: each draws its design space, then its seed (the
        order `_apply` draws them in); in forked workers once most samples fail, the survivors
        replayed here with their seeds (`parallel_sampling`), else one after another."""
        from msdb.tuner.search.parallel_sampling import available_workers, survivors

        plan = []
        for _ in range(tries):
            index = self.rng.randrange(len(self.design_spaces))
            plan.append((index, self.rng.getrandbits(31)))
        workers = min(available_workers(), tries // PARALLEL_MIN_TRIES_PER_WORKER) if self._mostly_failing else 1
        mod = self._context().mod
        assert mod is not None
        outcomes = survivors(mod, self.design_spaces, self._postprocs(), plan, workers) if workers >= 2 else None
        if outcomes is None:
            found = (self._replay_fresh(mod, index, seed, self.failures) for index, seed in plan)
            return [sch for sch in found if sch is not None]
        out = []
        for (index, seed), dropped in zip(plan, outcomes):
            if dropped is not None:
                self.failures[dropped] += 1
                continue
            sch = self._replay_fresh(mod, index, seed, self.failures)
            if sch is not None:
                out.append(sch)
        return out

    def _replay_fresh(self, mod: Any, index: int, seed: int, failures: ReplayFailures) -> Schedule | None:
        """Design space `index` replayed with every decision drawn from `seed`, remembered
        under the decisions it drew."""
        sch = apply_trace(mod, Trace(self.design_spaces[index].insts), self._postprocs(), seed, failures,
                          prefixes=self._prefixes)
        if sch is not None:
            self._remember(sch.trace.decided_json(), sch)
        return sch

    def _scores(self, population: list[Schedule], keys: list[str], cache: dict[str, float]) -> np.ndarray:
        """The cost model's scores (higher is better), clamped at 0, for each member; a module
        scored before in this round keeps its score (the model does not change within a round,
        and unmutated parents recur). Uniform random without a model (TVM's behaviour before
        the model has data)."""
        from msdb.tuner.candidate import MeasureCandidate

        fresh = [i for i, key in enumerate(keys) if key not in cache]
        fresh_unique = list({keys[i]: i for i in fresh}.values())
        if fresh_unique:
            if self.cost_model is None:
                values = np.array([self.rng.random() for _ in fresh_unique])
            else:
                with Profiler.timeit("cost model"):
                    values = np.asarray(self.cost_model.predict(
                        self._context(), [MeasureCandidate.of(population[i]) for i in fresh_unique]),
                        dtype=np.float64)
                values = np.maximum(np.nan_to_num(values, nan=0.0), 0.0)
            for i, value in zip(fresh_unique, values):
                cache[keys[i]] = float(value)
        return np.array([cache[key] for key in keys], dtype=np.float64)

    def _evolve_with_cost_model(self, population: list[Schedule], count: int) -> list[Schedule]:
        """The `count` best-scored modules seen over the generations that were not measured
        (best first)."""
        equality = self._equality()
        seen = set(self.measured)
        cache: dict[str, float] = {}
        heap: list[tuple[float, int, Schedule]] = []  # min-heap of (score, -order, schedule)
        order = 0
        mutators = self._mutators()
        for generation in range(self.genetic_num_iters + 1):
            keys = [module_key(sch.mod, equality) for sch in population]
            scores = self._scores(population, keys, cache)
            for sch, key, score in zip(population, keys, scores):
                if key in seen:
                    continue
                seen.add(key)
                order += 1
                entry = (float(score), -order, sch)
                if len(heap) < count:
                    heapq.heappush(heap, entry)
                elif entry[:2] > heap[0][:2]:
                    heapq.heapreplace(heap, entry)
            if generation == self.genetic_num_iters or not population:
                break
            population = self._next_generation(population, scores, mutators)
            if self._prefixes is not None:
                self._prefixes.keep_only(population)
        return [entry[2] for entry in sorted(heap, key=lambda e: e[:2], reverse=True)]

    def _mutators(self) -> list[tuple[Any, float]]:
        generator = self._context().space_generator
        probs: dict[Any, float] = dict(generator.mutator_probs) if generator is not None else {}
        total = sum(probs.values())
        return [(m, p / total) for m, p in probs.items()] if total > 0 else []

    def _next_generation(self, population: list[Schedule], scores: np.ndarray, mutators: list[tuple[Any, float]],
                         size: int | None = None, mutate_prob: float | None = None) -> list[Schedule]:
        """A new population of `population_size` (or `size`): each slot draws a parent by score
        and mutates it (probability `genetic_mutate_prob`, or `mutate_prob`; mutator by weight),
        retrying up to `genetic_max_fail_count` times; an unmutated parent is taken once at
        most; the last resort is the parent itself."""
        weights = scores / scores.sum() if scores.sum() > 0 else np.full(len(population), 1.0 / len(population))
        cumulative = np.cumsum(weights)
        taken: set[int] = set()
        out = []
        for _ in range(self.population_size if size is None else size):
            parent_index = 0
            child = None
            for _ in range(self.genetic_max_fail_count + 1):
                parent_index = min(int(np.searchsorted(cumulative, self.rng.random() * cumulative[-1], side="right")),
                                   len(population) - 1)
                mutator = self._draw_mutator(mutators, mutate_prob)
                if mutator is None:
                    if parent_index not in taken:
                        taken.add(parent_index)
                        child = population[parent_index]
                        break
                    continue
                parent = population[parent_index]
                if getattr(mutator, "reads_replays", False):
                    replayed = self._prefixes.states_of(parent) if self._prefixes is not None else None
                    new_trace = mutator.apply(parent.trace, self.rng, replayed=replayed)
                else:
                    new_trace = mutator.apply(parent.trace, self.rng)
                if new_trace is None:
                    continue
                child = self._apply(new_trace, parent)
                if child is not None:
                    break
            out.append(child if child is not None else population[parent_index])
        return out

    def _draw_mutator(self, mutators: list[tuple[Any, float]], mutate_prob: float | None = None) -> Any:
        """None (no mutation) with probability 1 - genetic_mutate_prob (or `mutate_prob`), else a
        mutator by weight."""
        prob = self.genetic_mutate_prob if mutate_prob is None else mutate_prob
        draw = self.rng.random()
        if draw >= prob or not mutators:
            return None
        draw /= prob
        for mutator, prob in mutators:
            draw -= prob
            if draw < 0:
                return mutator
        return mutators[-1][0]

    def _default_schedule_candidate(self) -> list[Schedule]:
        """msdb's default schedule of the workload as a candidate of the first round (see the
        module docstring): [] when disabled, not a CPU target, already measured, claimed by
        another tuner, or when the default schedule fails on this workload."""
        from msdb.errors import MsdbError
        from msdb.tuner.space.default_schedule import default_schedule

        context = self._context()
        if not self.measure_default_schedule or context.target is None or context.target.kind != "llvm":
            return []
        try:
            sch = default_schedule(context.mod, context.target)  # type: ignore[arg-type]
        except MsdbError as exc:
            logger.info("task %r: no default schedule to measure (%s)", context.task_name, exc)
            return []
        except Exception:  # a bug in the baseline must not end a tuning run that needs none
            logger.exception("task %r: the default schedule failed; tuning goes on without it", context.task_name)
            return []
        key = module_key(sch.mod, self._equality())
        if key in self.measured:
            return []
        self.measured.add(key)
        return self._claim([(key, sch)])

    def _transferred_candidates(self, limit: int) -> list[Schedule]:
        """The re-fitted best records of the workload's nearest relatives
        (docs/architecture.md, "Transfer"), as candidates of the first round when the database
        has no record of the workload on the target: a task nobody tuned starts from what its
        relatives found instead of from random samples alone. Measured like any candidate (a
        transferred record carries no latency of its own), then parents of the next rounds
        through the database; at most `limit` (the round's room). [] when disabled
        (`transfer_neighbours=0`), without a database, when the workload has records, or when no
        relative's trace fits."""
        import functools

        from msdb.database.transfer import TransferDatabase
        from msdb.tuner.space.anchor_trace import schedule_using_anchor_trace

        context = self._context()
        if (limit <= 0 or self.transfer_neighbours == 0 or self.database is None or context.target is None
                or context.mod is None):
            return []

        def postprocess(sch: Schedule) -> bool:  # the task's own post-processors, as its candidates get
            return all(postproc.apply(sch) for postproc in self._postprocs())

        view = TransferDatabase(self.database, self.transfer_neighbours, postprocess=postprocess,
                                anchor=functools.partial(schedule_using_anchor_trace, target=context.target))
        try:
            answer = view.answer(context.mod, context.target)
        except Exception:  # an extra, as the default schedule: a bug in it must not end the tuning
            logger.exception("task %r: transferring its relatives' records failed; tuning goes on without them",
                             context.task_name)
            return []
        if not answer.schedules:
            logger.debug("task %r: nothing transferred (%s)", context.task_name, answer.reason)
            return []
        equality = self._equality()
        fresh: dict[str, Schedule] = {}
        for sch in answer.schedules:
            key = module_key(sch.mod, equality)
            if key not in self.measured and len(fresh) < limit:
                fresh.setdefault(key, sch)
        self.measured.update(fresh)
        logger.info("task %r: %d transferred candidate(s) from relatives in the first round", context.task_name,
                    len(fresh))
        return self._claim(list(fresh.items()))

    def _pick_with_eps_greedy(self, unmeasured: list[Schedule], bests: list[Schedule], count: int) -> list[Schedule]:
        """`count` schedules to measure: the best-scored first, `eps_greedy` of them random
        initial samples; a module already measured, or claimed by another tuner (`_claim`, one
        claim per batch), is skipped for the next in line."""
        equality = self._equality()
        num_rands = int(count * self.eps_greedy)
        num_bests = count - num_rands
        randoms = list(unmeasured)
        self.rng.shuffle(randoms)
        picks: list[Schedule] = []
        sources = iter(bests[:num_bests] + randoms)
        while len(picks) < count:
            batch: list[tuple[str, Schedule]] = []
            for sch in sources:
                key = module_key(sch.mod, equality)
                if key in self.measured:
                    continue
                self.measured.add(key)
                batch.append((key, sch))
                if len(picks) + len(batch) >= count:
                    break
            if not batch:
                break
            picks.extend(self._claim(batch))
        return picks

