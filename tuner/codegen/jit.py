"""LLVM side of code generation: host target machine, the O3 pipeline, object code, and loading
object code into an execution engine of this process.

Facts followed here (checked against llvmlite 0.45): llvmlite >= 0.45 has only the new pass
manager and `llvm.initialize()` raises; O3 comes from `create_pipeline_tuning_options` +
`create_pass_builder`; object code from `TargetMachine.emit_object` loads with
`ExecutionEngine.add_object_file`; an MCJIT engine owns the target machine it is given, so
every engine gets a fresh one. libgomp is loaded into the process before any object that calls
`GOMP_parallel` is finalized, its workers spinning only briefly between parallel regions
(`WORKER_SPIN_COUNT`) unless the user set `OMP_WAIT_POLICY` or `GOMP_SPINCOUNT`: libgomp's
default spin held the second core of the 2-core machines this was measured on and doubled run
times, and never spinning made every region wait for a sleeping worker to wake. libgomp reads
them when it is first loaded: a libgomp another library loaded into the process earlier (the
copy PyTorch bundles, which the optional MLP cost model imports) keeps its own settings.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm

from msdb.tuner.codegen.errors import CodegenError

__all__ = [
    "TargetSpec", "host_spec", "vector_register_bits", "target_machine", "optimize", "compile_ir", "LoadedObject",
    "load_object", "ensure_runtime", "set_num_threads",
]

logger = logging.getLogger(__name__)

_lock = threading.Lock()


@dataclass(frozen=True)
class TargetSpec:
    """What LLVM compiles for: triple, CPU name and feature string."""

    triple: str
    cpu: str
    features: str

    def as_json(self) -> dict[str, str]:
        return {"triple": self.triple, "cpu": self.cpu, "features": self.features}


@functools.lru_cache(maxsize=1)
def _initialize() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


@functools.lru_cache(maxsize=1)
def host_spec() -> TargetSpec:
    """This machine (LLVM's process triple, host CPU name and features)."""
    _initialize()
    return TargetSpec(llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())


def spec_for(target: Any = None) -> TargetSpec:
    """The TargetSpec of an msdb `Target` (or config dict / string / None = host). `mcpu` and
    `mattr` override the host's; `mtriple` is kept only for its architecture (code runs in this
    process, so the vendor/OS parts are always the host's)."""
    host = host_spec()
    if target is None:
        return host
    from msdb.records.target import Target

    t = Target.coerce(target)
    assert t is not None
    if t.kind not in ("llvm", "c"):
        raise CodegenError(f"the CPU code generator builds for kind 'llvm', not {t.kind!r}")
    cpu = str(t.get("mcpu", host.cpu) or host.cpu)
    mattr = t.get("mattr")
    if isinstance(mattr, (list, tuple)):
        features = ",".join(str(m) for m in mattr)
    elif isinstance(mattr, str) and mattr:
        features = mattr
    else:
        features = host.features if cpu == host.cpu else ""
    triple = t.get("mtriple")
    if isinstance(triple, str) and triple and triple.split("-")[0] != host.triple.split("-")[0]:
        raise CodegenError(f"target triple {triple!r} is not this machine's architecture ({host.triple})")
    if cpu != host.cpu and not _cpu_known(host.triple, cpu):
        raise CodegenError(f"target {t}: -mcpu={cpu} is not a processor LLVM knows for {host.triple.split('-')[0]}")
    return TargetSpec(host.triple, cpu, features)


_PROBE_CPU = """
import sys
import llvmlite.binding as llvm
llvm.initialize_native_target()
llvm.initialize_native_asmprinter()
machine = llvm.Target.from_triple(sys.argv[1]).create_target_machine(cpu=sys.argv[2])
machine.emit_object(llvm.parse_assembly("define void @probe() { ret void }"))
"""


@functools.lru_cache(maxsize=64)
def _cpu_known(triple: str, cpu: str) -> bool:
    """Whether LLVM knows `cpu` for `triple`. Asked in a child process, once per name: LLVM only
    prints a warning for an unknown name and may then abort the whole process ("64-bit code
    requested on a subtarget that doesn't support it"), which no exception reports."""
    import subprocess
    import sys

    probe = subprocess.run([sys.executable, "-c", _PROBE_CPU, triple, cpu], capture_output=True, text=True,
                           timeout=120)
    return probe.returncode == 0 and "not a recognized processor" not in probe.stderr


def _codegen_features(spec: TargetSpec) -> str:
    """The feature string given to LLVM: the target's, plus `prefer-no-gather` on x86. The
    emitter writes strided and irregular vector loads as `llvm.masked.gather` (one instruction
    instead of a load + insertelement per lane, which made LLVM's O3 take minutes on unrolled
    kernels); with this tuning flag the backend turns them into scalar loads, which beat the
    hardware gather on the CPUs measured here (microcode-mitigated vgather, "Downfall")."""
    features = spec.features
    if spec.triple.startswith(("x86_64", "i686", "i386")):
        features = f"{features},+prefer-no-gather" if features else "+prefer-no-gather"
    return features


_REGISTER_PROBE = """
define void @probe(ptr noalias %a, ptr noalias %b) {
  %x = load <64 x i8>, ptr %a, align 64
  %y = add <64 x i8> %x, %x
  store <64 x i8> %y, ptr %b, align 64
  ret void
}
"""


@functools.lru_cache(maxsize=32)
def vector_register_bits(spec: TargetSpec | None = None) -> int:
    """Width in bits of the vector registers LLVM uses for `spec` (512 with AVX-512, 256 with
    AVX2, 128 with SSE or NEON). Asked of LLVM itself, from the assembly of a 64-byte vector
    add, so that a CPU named by `-mcpu` without `-mattr` (whose features only LLVM knows) gets
    its own width, and a host's `-avx512f` is honoured."""
    spec = spec or host_spec()
    _initialize()
    with _lock:
        module = llvm.parse_assembly(_REGISTER_PROBE)
        module.triple = spec.triple
        assembly = _shared_tm(spec).emit_assembly(module)
    if "zmm" in assembly:
        return 512
    if "ymm" in assembly:
        return 256
    return 128


def target_machine(spec: TargetSpec | None = None, *, opt: int = 3) -> llvm.TargetMachine:
    """A new target machine (MCJIT engines take ownership of theirs, so never share one)."""
    _initialize()
    spec = spec or host_spec()
    target = llvm.Target.from_triple(spec.triple)
    return target.create_target_machine(cpu=spec.cpu, features=_codegen_features(spec), opt=opt, reloc="pic",
                                        codemodel="jitdefault")


@functools.lru_cache(maxsize=8)
def _shared_tm(spec: TargetSpec) -> llvm.TargetMachine:
    return target_machine(spec)


def optimize(module: llvm.ModuleRef, spec: TargetSpec) -> None:
    """Run LLVM's O3 pipeline (loop and SLP vectorizers, unrolling) on `module` in place."""
    tm = _shared_tm(spec)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(module, pb)


def compile_ir(llvm_ir: str, spec: TargetSpec | None = None) -> tuple[llvm.ModuleRef, bytes]:
    """Parse, verify, optimize and compile textual LLVM IR; returns the optimized module and
    its object code."""
    spec = spec or host_spec()
    _initialize()
    with _lock:  # llvmlite's global context is not thread-safe
        module = llvm.parse_assembly(llvm_ir)
        module.triple = spec.triple
        module.verify()
        optimize(module, spec)
        obj = _shared_tm(spec).emit_object(module)
    return module, obj


def emit_assembly(module: llvm.ModuleRef, spec: TargetSpec | None = None) -> str:
    """Assembly text of an (optimized) module, for inspection."""
    with _lock:
        return _shared_tm(spec or host_spec()).emit_assembly(module)


#: How long (libgomp's GOMP_SPINCOUNT, iterations of a pause loop) a worker thread waits for the
#: next parallel region before it sleeps: long enough to cover the gap between two kernels of a
#: model run (asleep, each of MobileNetV2's 55 regions waited ~0.1 ms for the worker to wake:
#: 8.85 ms on two threads, 9.11 on one; spinning 3,000: 5.0 ms), short enough not to hold a core
#: after the run (median 0.07 ms of CPU after a run; 10,000: 1.3 ms; libgomp's default 300,000).
WORKER_SPIN_COUNT = 3000


@functools.lru_cache(maxsize=1)
def ensure_runtime() -> ctypes.CDLL | None:
    """Load libgomp (and make its symbols visible to JIT-ed code) once per process."""
    _initialize()
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", str(WORKER_SPIN_COUNT))
    name = ctypes.util.find_library("gomp")
    if name is None:
        logger.warning("libgomp not found: parallel loops will fail to link")
        return None
    llvm.load_library_permanently(name)
    return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)


def set_num_threads(n: int | None) -> None:
    """Threads for the next parallel regions launched from this thread (libgomp's ICV);
    None or 0 keeps the default (OMP_NUM_THREADS, else one per core)."""
    lib = ensure_runtime()
    if lib is None:
        return
    if not n:
        n = int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or (os.cpu_count() or 1)
    lib.omp_set_num_threads(ctypes.c_int(int(n)))


class LoadedObject:
    """Object code loaded into this process (an MCJIT engine holding it)."""

    def __init__(self, obj: bytes, spec: TargetSpec | None = None) -> None:
        ensure_runtime()
        spec = spec or host_spec()
        with _lock:
            tm = target_machine(spec)
            self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self._engine.finalize_object()

    def address(self, symbol: str) -> int:
        addr = self._engine.get_function_address(symbol)
        if not addr:
            raise CodegenError(f"symbol {symbol!r} is not in the loaded object")
        return addr

    def close(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None:
            self._engine = None
            engine.close()


def load_object(obj: bytes, spec: TargetSpec | None = None) -> LoadedObject:
    return LoadedObject(obj, spec)
