"""`DaskBuilder` / `DaskRunner`: build and measure candidates on a Dask distributed cluster, a
farm of machines of the target's kind: a `Builder` and a `Runner` (kind "dask"), so `tune_tir`
and `tune_tasks` take them as they take the local ones.

    client = distributed.Client("tcp://farm:8786")
    builder, runner = Builder.create("dask", client), Runner.create("dask", client, number=3)
    tune_tir(mod, target, db, 64, builder=builder, runner=runner)

With a `DaskBuilder` on its own client, `DaskRunner.build_and_run` builds and measures each
candidate in one task on one worker (one round trip, no artifact shipped back and forth).

Workers are started with `dask worker tcp://farm:8786 --nthreads 1 --resources measure=1`. One
candidate per worker, what a dead or hung worker costs, and why: see docs/architecture.md,
"Team scale" ("The farm").
"""

from __future__ import annotations

import asyncio
import logging
import queue
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from msdb.errors import MsdbError
from msdb.ir.codec import dump_ir, load_ir
from msdb.records.ranking import FAILED_RUN_SECS
from msdb.staging import StagingDir, write_atomically
from msdb.tuner.measure.builder import (ARTIFACTS_STALE_S, Builder, BuilderInput, BuilderResult,
                                       _target_json)
from msdb.tuner.measure.runner import Runner, RunnerFuture, RunnerInput, RunnerResult, batch_futures

if TYPE_CHECKING:
    from distributed import Client, Future

__all__ = ["DaskBuilder", "DaskRunner", "DaskClusterError", "MEASURE_RESOURCE"]

logger = logging.getLogger(__name__)

#: The worker resource every build and run takes whole: one candidate per worker at a time.
MEASURE_RESOURCE = "measure"

#: How a fused build-and-run result says that the build failed.
_BUILD_FAILED = "build failed: "

#: How long the nanny of a hung worker may take to kill it and start a fresh one (seconds).
RESTART_TIMEOUT_S = 120.0


class DaskClusterError(MsdbError):
    """The Dask cluster cannot build or measure candidates (unreachable, no measuring worker)."""


# ---------------------------------------------------------------- on the workers


def _build_on_worker(payload: bytes, target: Any) -> tuple[bytes, dict[str, Any]]:
    """Compile a module sent in msdb's IR form; the object code and its metadata come back."""
    from msdb.tuner.codegen import compile_module

    compiled = compile_module(load_ir(payload), target)
    meta = compiled.meta()
    meta["timings"] = compiled.timings
    return compiled.object_code, meta


def _run_on_worker(obj: bytes, meta: dict[str, Any], number: int, repeat: int, min_repeat_ms: float, flush: bool,
                   num_threads: int | None, seed: int) -> tuple[list[float], float]:
    from msdb.tuner.measure.runner import time_object

    return time_object(obj, meta, number, repeat, min_repeat_ms, flush, num_threads, seed)


def _build_and_run_on_worker(payload: bytes, target: Any, number: int, repeat: int, min_repeat_ms: float,
                             flush: bool, num_threads: int | None, seed: int) -> tuple[str, Any]:
    """Both steps in one task: ("ok", seconds of each repeat) or ("build", why the build failed)."""
    try:
        obj, meta = _build_on_worker(payload, target)
    except Exception as err:
        return "build", f"{type(err).__name__}: {err}"
    secs, _ = _run_on_worker(obj, meta, number, repeat, min_repeat_ms, flush, num_threads, seed)
    return "ok", secs


# ---------------------------------------------------------------- in the tuning process


_Event = tuple[str, str, "str | None"]  # ("done" | "died" | "workers", key, why)


class _ClusterWatch:
    """One per client: forwards the scheduler's `remove-worker` events (the tasks a lost worker
    was processing) and `add-worker` events to the farms that wait on them."""

    _by_client: dict[str, _ClusterWatch] = {}
    _guard = threading.Lock()

    def __init__(self, client: Client) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, queue.Queue[_Event]] = {}
        self._listeners: list[queue.Queue[_Event]] = []
        self._client = client
        self._users = 0
        client.subscribe_topic("all", self._on_event)

    @classmethod
    def of(cls, client: Client) -> _ClusterWatch:
        with cls._guard:
            watch = cls._by_client.get(client.id)
            if watch is None:
                watch = cls._by_client[client.id] = cls(client)
            watch._users += 1
            return watch

    def release(self) -> None:
        """The last farm of the client unsubscribes, so that closing the client later does not
        make the scheduler send its own `remove-client` event down a closing connection."""
        with self._guard:
            self._users -= 1
            if self._users > 0:
                return
            self._by_client.pop(self._client.id, None)
        try:
            self._client.unsubscribe_topic("all")
        except Exception as err:  # a client already closed has nothing to unsubscribe
            logger.debug("unsubscribe: %s", err)

    def _on_event(self, event: tuple[float, Any]) -> None:
        _, msg = event
        if not isinstance(msg, dict):
            return
        action = msg.get("action")
        with self._lock:
            if action == "add-worker":
                for listener in self._listeners:
                    listener.put(("workers", "", None))
            elif action == "remove-worker" and not msg.get("expected"):
                worker = msg.get("worker", "?")
                for key in msg.get("processing-tasks", ()):
                    waiting = self._waiting.get(str(key))
                    if waiting is not None:
                        waiting.put(("died", str(key), f"worker {worker} died while processing the candidate"))

    def workers_changed(self) -> None:
        """Tell every waiting farm to look at the workers again (a restarted one is back)."""
        with self._lock:
            for listener in self._listeners:
                listener.put(("workers", "", None))

    def listen(self, into: queue.Queue[_Event]) -> None:
        with self._lock:
            self._listeners.append(into)

    def unlisten(self, into: queue.Queue[_Event]) -> None:
        with self._lock:
            self._listeners = [q for q in self._listeners if q is not into]

    def watch(self, key: str, into: queue.Queue[_Event]) -> None:
        with self._lock:
            self._waiting[key] = into

    def forget(self, key: str) -> None:
        with self._lock:
            self._waiting.pop(key, None)


class _Farm:
    """A client (given, or connected to an address and then owned) and the submission both
    `DaskBuilder` and `DaskRunner` use: each candidate goes to one free worker of its own
    (`workers=[address]`, never another), so a worker holds one candidate at a time and a worker's
    death fails exactly the candidate it was working on; the `measure` resource keeps other
    clients' candidates off a busy worker too."""

    def __init__(self, client_or_address: Client | str, who: str, connect_timeout_s: float = 30.0) -> None:
        from distributed import Client

        self.who = who
        if isinstance(client_or_address, str):
            try:
                self.client = Client(client_or_address, timeout=connect_timeout_s)
            except (OSError, TimeoutError) as err:
                raise DaskClusterError(f"{who}: cannot reach the Dask scheduler at {client_or_address}: {err}; "
                                       "start one with `dask scheduler` and pass its tcp://HOST:PORT") from None
            self._own = True
        else:
            self.client = client_or_address
            self._own = False
        self._watch: _ClusterWatch | None = _ClusterWatch.of(self.client)
        self._hung: set[str] = set()  # workers still running a candidate that timed out
        self._restarts: list[threading.Thread] = []

    def measuring_workers(self) -> list[str]:
        """Addresses of the workers that can take a candidate (they have the `measure` resource)."""
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        return sorted(addr for addr, w in workers.items()
                      if w.get("resources", {}).get(MEASURE_RESOURCE, 0) >= 1 and addr not in self._hung)

    def check_workers(self) -> int:
        n = len(self.measuring_workers())
        if n == 0:
            raise DaskClusterError(
                f"{self.who}: no worker of the Dask cluster has the {MEASURE_RESOURCE!r} resource; start workers "
                f"with `dask worker SCHEDULER --nthreads 1 --resources {MEASURE_RESOURCE}=1`")
        return n

    def map_as_completed(self, fn: Any, argses: Sequence[tuple[Any, ...]], kind: str,
                         timeout_s: float) -> Iterator[tuple[int, Any, str | None]]:
        """(index, value, None) or (index, None, why it failed) per argument tuple, as each ends.

        A candidate fails when its worker dies while it is there (the scheduler's event), when it
        raises (`KilledWorker`, `CommClosedError` and the function's own errors) or when it runs
        past `timeout_s` (that worker then gets no more candidates from this farm: its thread may
        never come back)."""
        from distributed import KilledWorker
        from distributed.comm import CommClosedError

        watch = self._watch
        if watch is None:
            raise DaskClusterError(f"{self.who} is closed")
        events: queue.Queue[_Event] = queue.Queue()
        watch.listen(events)
        todo = list(enumerate(argses))
        todo.reverse()  # popped from the end: first in, first out
        running: dict[str, tuple[int, str, Future, float]] = {}
        free = self.measuring_workers()
        waiting_since = time.monotonic()
        try:
            while todo or running:
                while todo and free:
                    i, args = todo.pop()
                    worker = free.pop(0)
                    key = f"msdb-{kind}-{uuid.uuid4().hex}"
                    watch.watch(key, events)
                    future = self.client.submit(fn, *args, key=key, pure=False, retries=0, workers=[worker],
                                                allow_other_workers=False, resources={MEASURE_RESOURCE: 1})
                    future.add_done_callback(lambda f: events.put(("done", f.key, None)))
                    running[key] = (i, worker, future, time.monotonic())
                now = time.monotonic()
                if running:
                    wait = max(0.0, min(r[3] for r in running.values()) + timeout_s - now)
                else:  # no worker at all: wait for one to join, at most timeout_s
                    wait = max(0.0, waiting_since + timeout_s - now)
                try:
                    what, key, why = events.get(timeout=wait)
                except queue.Empty:
                    now = time.monotonic()
                    if not running:
                        while todo:
                            i, _ = todo.pop()
                            yield i, None, f"{self.who}: no worker with the {MEASURE_RESOURCE!r} resource for {timeout_s:g}s"
                        continue
                    for key, (i, worker, future, started) in list(running.items()):
                        if now - started >= timeout_s:
                            del running[key]
                            watch.forget(key)
                            future.cancel()
                            self._hung.add(worker)
                            logger.warning("%s: candidate on %s timed out after %gs; restarting that worker",
                                           self.who, worker, timeout_s)
                            self._restart(worker)
                            yield i, None, f"{self.who}: timeout after {timeout_s:g}s on {worker}"
                    continue
                if what == "workers":
                    busy = {r[1] for r in running.values()}
                    free = [w for w in self.measuring_workers() if w not in busy]
                    waiting_since = time.monotonic()
                    continue
                entry = running.pop(key, None)
                if entry is None:
                    continue  # already failed (its worker died, then the cancelled future ended)
                watch.forget(key)
                i, worker, future, _ = entry
                if what == "died":
                    future.cancel()
                    yield i, None, f"{self.who}: {why}"
                    continue
                try:
                    value = future.result(timeout=timeout_s)
                except (KilledWorker, CommClosedError) as err:
                    yield i, None, f"{self.who}: {type(err).__name__}: {err}"
                    continue
                except Exception as err:  # the function's own error: the worker is fine
                    free.append(worker)
                    yield i, None, f"{self.who}: {type(err).__name__}: {err}"
                    continue
                free.append(worker)
                yield i, value, None
        finally:
            for key, (_, _, future, _) in running.items():
                watch.forget(key)
                future.cancel()
            watch.unlisten(events)

    def _restart(self, worker: str) -> None:
        """Restart a worker whose candidate hung, in a thread of its own so the round goes on
        (module docstring). Once its nanny reports the restart, the address is offered
        candidates again (a fresh worker usually comes back on a new address, announced by the
        scheduler's `add-worker` event; one on a fixed port comes back on the same)."""
        watch = self._watch

        def restart() -> None:
            try:
                status = self.client.restart_workers([worker], timeout=RESTART_TIMEOUT_S, raise_for_error=False)
            except (Exception, asyncio.CancelledError) as err:  # no nanny, or the client closed: left unused
                logger.warning("%s: cannot restart the hung worker %s (%s: %s); it gets no more candidates",
                               self.who, worker, type(err).__name__, err)
                return
            if status.get(worker) != "OK":
                logger.warning("%s: restarting the hung worker %s: %s; it gets no more candidates", self.who,
                               worker, status.get(worker))
                return
            logger.info("%s: restarted the hung worker %s", self.who, worker)
            self._hung.discard(worker)
            if watch is not None:
                watch.workers_changed()

        thread = threading.Thread(target=restart, name=f"msdb-restart-{worker}", daemon=True)
        self._restarts = [t for t in self._restarts if t.is_alive()] + [thread]
        thread.start()

    def wait_for_restarts(self, timeout_s: float = RESTART_TIMEOUT_S) -> bool:
        """Wait until the restarts of hung workers begun so far have ended; whether they all did."""
        deadline = time.monotonic() + timeout_s
        for thread in list(self._restarts):
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._restarts)

    def close(self) -> None:
        """Wait for restarts in flight (a restart cut off by closing the client can leave a
        nanny without its worker), then let go of the cluster."""
        if not self.wait_for_restarts():
            logger.warning("%s: a hung worker's restart did not end within %gs", self.who, RESTART_TIMEOUT_S)
        if self._watch is not None:
            self._watch.release()
            self._watch = None
        if self._own:
            self.client.close()


class DaskBuilder(Builder):
    """Builds candidates on the cluster's workers (see the module docstring)."""

    def __init__(self, client_or_address: Client | str, timeout_sec: float = 60.0,
                 artifact_dir: str | None = None) -> None:
        self.timeout_sec = float(timeout_sec)
        self._farm = _Farm(client_or_address, "DaskBuilder")
        self._farm.check_workers()
        self._staging: StagingDir | None = None
        if artifact_dir is None:
            self._staging = StagingDir.create(Path(tempfile.gettempdir()), "msdb-build-",
                                              min_age_s=ARTIFACTS_STALE_S)
            artifact_dir = str(self._staging.path)
        self.artifact_dir = artifact_dir

    @property
    def client(self) -> Client:
        return self._farm.client

    def build(self, build_inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        """One result per input, in order; failures are results, never exceptions."""
        import json

        items = list(build_inputs)
        results: list[BuilderResult | None] = [None] * len(items)
        argses: list[tuple[Any, ...]] = []
        sent: list[int] = []
        for i, item in enumerate(items):
            try:
                argses.append((dump_ir(item.mod), _target_json(item.target)))
                sent.append(i)
            except Exception as err:  # an input we cannot even send is this candidate's failure
                results[i] = BuilderResult(None, f"DaskBuilder: cannot serialize the module: "
                                                 f"{type(err).__name__}: {err}")
        try:
            for j, value, error in self._farm.map_as_completed(_build_on_worker, argses, "build", self.timeout_sec):
                i = sent[j]
                if error is not None:
                    results[i] = BuilderResult(None, error)
                    continue
                obj, meta = value
                path = str(Path(self.artifact_dir) / f"{meta['name']}-{uuid.uuid4().hex[:12]}.o")
                write_atomically(path + ".json", json.dumps(meta))
                write_atomically(path, obj)
                results[i] = BuilderResult(path, None)
        except Exception as err:  # the cluster went away: every candidate not yet built fails
            logger.warning("DaskBuilder: %s: %s", type(err).__name__, err)
            results = [r or BuilderResult(None, f"DaskBuilder: {type(err).__name__}: {err}") for r in results]
        return [r or BuilderResult(None, "DaskBuilder: no result") for r in results]

    def wait_for_restarts(self, timeout_sec: float = RESTART_TIMEOUT_S) -> bool:
        """Wait until the workers restarted after a hung build are back; whether every restart
        ended within `timeout_sec`."""
        return self._farm.wait_for_restarts(timeout_sec)

    def close(self) -> None:
        """Disconnect a client this builder connected; remove the artifacts when the builder
        chose their folder."""
        self._farm.close()
        if self._staging is not None:
            self._staging.remove()
            self._staging = None


class DaskRunner(Runner):
    """Measures artifacts on the cluster's workers, one candidate per worker at a time, with
    TVM's timing semantics (`msdb.tuner.measure.timing`; see the module docstring)."""

    def __init__(self, client_or_address: Client | str, timeout_sec: float = 60.0, number: int = 3, repeat: int = 1,
                 min_repeat_ms: float = 100.0, enable_cpu_cache_flush: bool = False, *,
                 num_threads: int | None = None, seed: int = 0) -> None:
        self.timeout_sec = float(timeout_sec)
        self.number = int(number)
        self.repeat = int(repeat)
        self.min_repeat_ms = float(min_repeat_ms)
        self.enable_cpu_cache_flush = bool(enable_cpu_cache_flush)
        self.num_threads = num_threads
        self.seed = int(seed)
        self._farm = _Farm(client_or_address, "DaskRunner")
        self._farm.check_workers()

    @property
    def client(self) -> Client:
        return self._farm.client

    def run(self, runner_inputs: Sequence[RunnerInput]) -> list[RunnerFuture]:
        """One future per input, in order; failures are results, never exceptions. The
        candidates go to the cluster when a result is first asked for, all at once (one per
        free worker), and `as_completed` gives each as its worker ends."""
        items = list(runner_inputs)
        return batch_futures(len(items), self.run_as_completed(items), "DaskRunner")

    def build_and_run(self, builder: Builder, build_inputs: Sequence[BuilderInput],
                      args_infos: Sequence[Any]) -> tuple[list[BuilderResult], list[RunnerFuture]]:
        """With a `DaskBuilder` on this runner's client, each candidate is built and measured by
        one task on one worker (`build_and_run_as_completed`); its builder result has no
        artifact (there is none here) and, once the candidate has ended, the build's error if it
        failed. With any other builder: build, then run (`Runner.build_and_run`)."""
        if not (isinstance(builder, DaskBuilder) and builder.client is self.client):
            return super().build_and_run(builder, build_inputs, args_infos)
        items = list(build_inputs)
        built = [BuilderResult(None, None) for _ in items]

        def fused() -> Iterator[tuple[int, RunnerResult]]:
            for i, result in self.build_and_run_as_completed(items, builder.timeout_sec + self.timeout_sec):
                if result.error_msg is not None and result.error_msg.startswith(_BUILD_FAILED):
                    built[i] = BuilderResult(None, result.error_msg[len(_BUILD_FAILED):])
                yield i, result

        return built, batch_futures(len(items), fused(), "DaskRunner")

    def run_as_completed(self, runner_inputs: Sequence[RunnerInput]) -> Iterator[tuple[int, RunnerResult]]:
        """(index, result) per input as each ends: every candidate is on the cluster at once, so
        N workers measure N at a time, and the tuner commits each as it comes."""
        import json

        items = list(runner_inputs)
        argses: list[tuple[Any, ...]] = []
        sent: list[int] = []
        for i, item in enumerate(items):
            if item.artifact_path is None:
                yield i, RunnerResult([FAILED_RUN_SECS], "DaskRunner: no artifact (the build failed)")
                continue
            try:
                with open(item.artifact_path + ".json", "rb") as f:
                    meta = json.loads(f.read())
                with open(item.artifact_path, "rb") as f:
                    obj = f.read()
            except OSError as err:
                yield i, RunnerResult([FAILED_RUN_SECS], f"DaskRunner: cannot read the artifact: {err}")
                continue
            argses.append((obj, meta, self.number, self.repeat, self.min_repeat_ms, self.enable_cpu_cache_flush,
                           self.num_threads, self.seed))
            sent.append(i)
        if not argses:
            return
        done: set[int] = set()
        try:
            for j, value, error in self._farm.map_as_completed(_run_on_worker, argses, "run", self.timeout_sec):
                done.add(j)
                if error is not None:
                    yield sent[j], RunnerResult([FAILED_RUN_SECS], error)
                    continue
                secs, _ = value
                yield sent[j], RunnerResult(list(secs), None)
        except Exception as err:  # the cluster went away: every candidate not yet measured fails
            logger.warning("DaskRunner: %s: %s", type(err).__name__, err)
            for j, i in enumerate(sent):
                if j not in done:
                    yield i, RunnerResult([FAILED_RUN_SECS], f"DaskRunner: {type(err).__name__}: {err}")

    def build_and_run_as_completed(self, build_inputs: Sequence[BuilderInput],
                                   timeout_sec: float) -> Iterator[tuple[int, RunnerResult]]:
        """(index, result) per module as each ends, each built and measured by one task on one
        worker: with a `DaskBuilder` on the same client the tuner takes this path (`build_and_run`),
        which saves a round trip to the cluster and the artifact's two transfers per candidate.
        A failed build is a result whose message starts with "build failed"."""
        items = list(build_inputs)
        argses: list[tuple[Any, ...]] = []
        sent: list[int] = []
        for i, item in enumerate(items):
            try:
                argses.append((dump_ir(item.mod), _target_json(item.target), self.number, self.repeat,
                               self.min_repeat_ms, self.enable_cpu_cache_flush, self.num_threads, self.seed))
                sent.append(i)
            except Exception as err:  # an input we cannot even send is this candidate's failure
                yield i, RunnerResult([FAILED_RUN_SECS], f"build failed: DaskBuilder: cannot serialize the module: "
                                                         f"{type(err).__name__}: {err}")
        if not argses:
            return
        done: set[int] = set()
        try:
            for j, value, error in self._farm.map_as_completed(_build_and_run_on_worker, argses, "measure",
                                                               timeout_sec):
                done.add(j)
                if error is not None:
                    yield sent[j], RunnerResult([FAILED_RUN_SECS], error)
                elif value[0] == "build":
                    yield sent[j], RunnerResult([FAILED_RUN_SECS], f"build failed: DaskBuilder: {value[1]}")
                else:
                    yield sent[j], RunnerResult(list(value[1]), None)
        except Exception as err:  # the cluster went away: every candidate not yet measured fails
            logger.warning("DaskRunner: %s: %s", type(err).__name__, err)
            for j, i in enumerate(sent):
                if j not in done:
                    yield i, RunnerResult([FAILED_RUN_SECS], f"DaskRunner: {type(err).__name__}: {err}")

    def wait_for_restarts(self, timeout_sec: float = RESTART_TIMEOUT_S) -> bool:
        """Wait until the workers restarted after a hung candidate are back (module docstring);
        whether every restart ended within `timeout_sec`."""
        return self._farm.wait_for_restarts(timeout_sec)

    def close(self) -> None:
        """Disconnect a client this runner connected (a given client stays open), after the
        restarts of hung workers it began have ended."""
        self._farm.close()
