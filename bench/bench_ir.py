"""Budgets of the workload layer (docs/benchmarks.md, "Workload layer"):
`import msdb` < 300 ms, structural_hash(C2D) < 2 ms, parse + print of C2D < 5 ms.

Prints a markdown table; copy it into docs/benchmarks.md.
Run: python bench/bench_ir.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from _timing import fresh_process_seconds, median_seconds, row  # noqa: E402

from msdb.hashing import structural_hash  # noqa: E402
from msdb.ir import from_script, to_script, zoo  # noqa: E402


def main() -> None:
    c2d = zoo.workload("C2D")
    text = to_script(c2d)
    rows = [
        "| measure | median | budget | verdict | note |",
        "|---|---|---|---|---|",
        row("import msdb (fresh process)", fresh_process_seconds("import msdb") * 1e3, "ms", 300),
        row("import msdb.ir + msdb.hashing", fresh_process_seconds("import msdb.ir, msdb.hashing") * 1e3, "ms", 300),
        row("structural_hash(C2D)", median_seconds(lambda: structural_hash(c2d)) * 1e3, "ms", 2),
        row("structural_hash(C2D, anchor-block)", median_seconds(lambda: structural_hash(c2d, "anchor-block")) * 1e3, "ms", 2),
        row("parse + print C2D", median_seconds(lambda: to_script(from_script(text))) * 1e3, "ms", 5),
        row("parse C2D", median_seconds(lambda: from_script(text)) * 1e3, "ms", None),
        row("print C2D", median_seconds(lambda: to_script(c2d)) * 1e3, "ms", None),
    ]
    print("\n".join(rows))


if __name__ == "__main__":
    main()
