"""A tour of msdb's workload layer: build every zoo workload, print it as TVMScript, parse the
print back, and show its three structural hashes and FLOPs.

Run: python examples/zoo_tour.py [NAME ...]
"""

from __future__ import annotations

import sys
import time

from msdb.hashing import structural_equal, structural_hash
from msdb.ir import estimate_flops, from_script, to_script, zoo

MODES = ("structural", "ignore-tensor", "anchor-block")


def tour(names: list[str]) -> int:
    failures = 0
    print(f"{'workload':<18} {'MFLOP':>10} {'structural':>17} {'ignore-tensor':>17} {'anchor-block':>17}  round-trip")
    for name in names:
        mod = zoo.workload(name)
        started = time.perf_counter()
        text = to_script(mod)
        again = from_script(text)
        same = structural_equal(mod, again)
        elapsed_ms = (time.perf_counter() - started) * 1e3
        hashes = [structural_hash(mod, mode) for mode in MODES]
        failures += not same
        verdict = f"ok ({elapsed_ms:.1f} ms)" if same else "MISMATCH"
        print(f"{name:<18} {estimate_flops(mod) / 1e6:>10.2f} {hashes[0]:>17} {hashes[1]:>17} {hashes[2]:>17}  {verdict}")
    print()
    print(f"TVMScript of GMM as msdb prints it:\n\n{to_script(zoo.workload('GMM'))}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(tour(sys.argv[1:] or zoo.names()))
