"""`Builder`, TVM's builder interface (`build(inputs) -> results`, `Builder.create(kind)`), and
`LocalBuilder`: compile candidates to object code in isolated worker processes (TVM's
LocalBuilder: one `BuilderResult(artifact_path, error_msg)` per input, in order).

    builder = Builder.create("local", max_workers=2, timeout_sec=30)   # or LocalBuilder(...)
    results = builder.build([BuilderInput(sch.mod) for sch in candidates])

Each artifact is an object file (`<dir>/<name>-<id>.o`) with a JSON sidecar (`.o.json`: entry
symbols, argument shapes and dtypes, target), which is all `LocalRunner` needs. Modules travel
to the workers in msdb's one binary IR form (`msdb.ir.codec`, the form databases store), so a
worker never re-parses TVMScript and unpickles nothing but IR.
"""

from __future__ import annotations

import abc
import json
import logging
import os
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from msdb.ir.codec import dump_ir, load_ir
from msdb.ir.function import IRModule, PrimFunc
from msdb.kinds import load_kind
from msdb.staging import StagingDir, write_atomically
from msdb.tuner.measure.base import Closeable
from msdb.tuner.measure.worker import Worker, WorkerCrashed, WorkerFailed, WorkerTimeout

__all__ = ["Builder", "BuilderInput", "BuilderResult", "LocalBuilder", "build_artifact", "build_cuda_artifact"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuilderInput:
    """A module to build; `target` is an msdb Target, config dict, string or None (host)."""

    mod: IRModule | PrimFunc
    target: Any = None
    params: Any = None


@dataclass(frozen=True)
class BuilderResult:
    """Path of the built artifact, or why there is none (both None: built where it was measured,
    `Runner.build_and_run` on a Dask farm, so there is no artifact here)."""

    artifact_path: str | None
    error_msg: str | None

    @property
    def ok(self) -> bool:
        return self.artifact_path is not None


class Builder(Closeable, abc.ABC):
    """TVM's Builder: subclass it and implement `build` to plug a builder of one's own into
    `tune_tir` / `tune_tasks` (docs/architecture.md, "Measurement")."""

    @abc.abstractmethod
    def build(self, build_inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        """One result per input, in order; failures are results, never exceptions."""

    @staticmethod
    def create(kind: str = "local", *args: Any, **kwargs: Any) -> Builder:
        """A builder by name: "local" (`LocalBuilder`) or "dask" (`DaskBuilder`, a Dask
        cluster's workers; its first argument is the client or the scheduler's address)."""
        builder: Builder = load_kind(_KINDS, kind, "builder")(*args, **kwargs)
        return builder


_KINDS = {
    "local": ("msdb.tuner.measure.builder", "LocalBuilder"),
    "dask": ("msdb.tuner.measure.dask", "DaskBuilder"),
}


def _target_json(target: Any) -> Any:
    if target is None:
        return None
    from msdb.records.target import Target

    return Target.coerce(target).config  # type: ignore[union-attr]


def _is_cuda(target: Any) -> bool:
    config = _target_json(target)
    return isinstance(config, dict) and config.get("kind") == "cuda"


def build_cuda_artifact(mod: IRModule | PrimFunc, target: Any, artifact_dir: str) -> str:
    """Compile `mod` for a `cuda` target and write `<dir>/<name>-<id>.cubin` plus its `.json`
    sidecar (kernels with launch dimensions, arguments, workspaces, registers and shared memory
    per kernel; `msdb.tuner.codegen.cuda.CudaBuild.meta`) and the CUDA C next to it (`.cu`)."""
    from msdb.tuner.codegen.cuda import build_cuda

    built = build_cuda(mod, target)
    os.makedirs(artifact_dir, exist_ok=True)
    path = os.path.join(artifact_dir, f"{built.name}-{uuid.uuid4().hex[:12]}.cubin")
    write_atomically(path + ".cu", built.source)
    write_atomically(path + ".json", json.dumps(built.meta()))
    write_atomically(path, built.cubin)
    return path


def build_artifact(mod: IRModule | PrimFunc, target: Any, artifact_dir: str) -> str:
    """Compile `mod` and write `<dir>/<name>-<id>.o` plus its `.json` sidecar; returns the
    object file's path. Runs in a builder worker (or anywhere). A `cuda` target builds a cubin
    instead (`build_cuda_artifact`)."""
    from msdb.tuner.codegen import compile_module

    if _is_cuda(target):
        return build_cuda_artifact(mod, target, artifact_dir)

    compiled = compile_module(mod, target)
    os.makedirs(artifact_dir, exist_ok=True)
    path = os.path.join(artifact_dir, f"{compiled.name}-{uuid.uuid4().hex[:12]}.o")
    meta = compiled.meta()
    meta["timings"] = compiled.timings
    write_atomically(path + ".json", json.dumps(meta))
    write_atomically(path, compiled.object_code)
    return path


def _build_in_worker(payload: bytes, target: Any, artifact_dir: str) -> str:
    return build_artifact(load_ir(payload), target, artifact_dir)


def _preload() -> None:
    from msdb.tuner.codegen import jit

    jit.host_spec()


#: A builder's artifact folder that no process holds and nothing changed for this long (seconds)
#: is removed by the next builder.
ARTIFACTS_STALE_S = 600.0


class LocalBuilder(Builder):
    """Builds candidates in `max_workers` isolated processes, at most `timeout_sec` each."""

    def __init__(self, max_workers: int | None = None, timeout_sec: float = 30.0, artifact_dir: str | None = None) -> None:
        self.max_workers = max(1, int(max_workers or os.cpu_count() or 1))
        self.timeout_sec = float(timeout_sec)
        # without a folder given, artifacts go to a staging folder that `close` removes and
        # that a later builder removes if this process is killed (msdb.staging; untouched for
        # ARTIFACTS_STALE_S, since an older msdb's tuner may be using one without a lock)
        self._staging: StagingDir | None = None
        if artifact_dir is None:
            self._staging = StagingDir.create(Path(tempfile.gettempdir()), "msdb-build-",
                                              min_age_s=ARTIFACTS_STALE_S)
            artifact_dir = str(self._staging.path)
        self.artifact_dir = artifact_dir
        self._workers: list[Worker] = []
        self._free: list[Worker] = []
        self._lock = threading.Lock()

    def _acquire(self) -> Worker:
        with self._lock:
            if self._free:
                return self._free.pop()
            worker = Worker(preload=["msdb.tuner.measure.builder:_preload"], name="builder")
            self._workers.append(worker)
            return worker

    def _release(self, worker: Worker) -> None:
        with self._lock:
            self._free.append(worker)

    def _build_one(self, item: BuilderInput) -> BuilderResult:
        try:
            payload = dump_ir(item.mod)
            target = _target_json(item.target)
        except Exception as err:  # an input we cannot even send is this candidate's failure
            return BuilderResult(None, f"LocalBuilder: cannot serialize the module: {type(err).__name__}: {err}")
        worker = self._acquire()
        try:
            path = worker.call("msdb.tuner.measure.builder:_build_in_worker", (payload, target, self.artifact_dir),
                               self.timeout_sec)
            return BuilderResult(path, None)
        except WorkerTimeout as err:
            return BuilderResult(None, f"LocalBuilder: {err}")
        except WorkerCrashed as err:
            return BuilderResult(None, f"LocalBuilder: {err}")
        except WorkerFailed as err:
            return BuilderResult(None, f"LocalBuilder: {err}")
        except Exception as err:  # the worker could not start; report, keep going
            return BuilderResult(None, f"LocalBuilder: {type(err).__name__}: {err}")
        finally:
            self._release(worker)

    def build(self, build_inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        """One result per input, in order; failures are results, never exceptions."""
        items = list(build_inputs)
        if not items:
            return []
        if len(items) == 1 or self.max_workers == 1:
            return [self._build_one(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(items))) as pool:
            return list(pool.map(self._build_one, items))

    def close(self) -> None:
        """Stop the workers; remove the artifacts when the builder chose their folder."""
        with self._lock:
            for worker in self._workers:
                worker.close()
            self._workers.clear()
            self._free.clear()
            if self._staging is not None:
                self._staging.remove()
                self._staging = None
