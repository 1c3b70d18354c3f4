"""The x86 ISA levels the code generation tests build for, whatever CPU runs them.

Records travel between machines and CI runs on whichever CPU its submitter has (Zen 3 with
AVX2 only, Zen 4 with AVX-512), so a kernel test must not assume the host's vector width: each
one builds for an explicit `-mcpu` per level. The AVX2 level (`x86-64-v3`: AVX2, FMA)
runs on every host this project supports; the AVX-512 level (`x86-64-v4`: AVX-512 F, BW, CD,
DQ, VL) only where the host can execute it. Tests that check vector widths or instructions take
them from the level's target (`vector_lanes`), never from a constant."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from msdb.records.target import Target

__all__ = ["IsaLevel", "ISA_LEVELS", "runnable_levels", "AVX2"]


@dataclass(frozen=True)
class IsaLevel:
    """One ISA level: a pytest id, the LLVM CPU name and the host features it needs."""

    name: str
    mcpu: str
    needs: tuple[str, ...]

    def target(self, cores: int = 1) -> Target:
        return Target({"kind": "llvm", "mcpu": self.mcpu, "num-cores": cores})


AVX2 = IsaLevel("avx2", "x86-64-v3", ("avx2", "fma"))
AVX512 = IsaLevel("avx512", "x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"))
ISA_LEVELS = (AVX2, AVX512)


@functools.lru_cache(maxsize=1)
def runnable_levels() -> tuple[IsaLevel, ...]:
    """The levels this host can execute (LLVM's host features), AVX2 first; on a host that is
    not x86-64 (an Arm machine: NEON), the host's own CPU, so the kernel tests still run."""
    from msdb.tuner.codegen.jit import host_spec

    host = host_spec()
    if not host.triple.startswith("x86_64"):
        return (IsaLevel("host", host.cpu, ()),)
    features = set(host.features.split(","))
    return tuple(level for level in ISA_LEVELS if all(f"+{need}" in features for need in level.needs))
