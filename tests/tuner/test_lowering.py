"""The IR-level lowering (TVM's LowerInitBlock / ConvertBlocksToOpaque / allocation placement
and compaction rules), read through its printed form."""

from __future__ import annotations

from msdb.ir import from_script, zoo
from msdb.schedule import Schedule
from msdb.tuner.codegen.lower import format_lowered, lower_module
from tests.tuner._util import TVMSCRIPT


def test_init_runs_when_every_reduction_var_is_at_its_minimum() -> None:
    text = format_lowered(lower_module(zoo.build("GMM", 1, 4, 4, 4)))
    assert "if (k == 0):" in text
    assert "Z[0, i, j] = 0.0" in text  # the batch loop has extent 1: b became 0


def test_split_reduction_init_guard_and_unit_loops_disappear() -> None:
    sch = Schedule(zoo.build("GMM", 1, 8, 8, 8))
    b, i, j, k = sch.get_loops(sch.get_block("Z"))
    sch.split(k, [2, 4])
    text = format_lowered(lower_module(sch.mod))
    assert "for b in" not in text  # extent-1 loop: its variable became 0
    assert "k_0" in text and "k_1" in text and "==" in text


def test_predicates_become_ifs() -> None:
    mod = from_script((TVMSCRIPT / "tutorials" / "where_predicate.py").read_text())
    text = format_lowered(lower_module(mod))
    assert "if (((i_0 * 128) + i_1) < 1000):" in text


def test_intermediate_is_allocated_at_the_lca_of_its_uses_and_compacted() -> None:
    sch = Schedule(zoo.build("matmul_relu", 16, 16, 16))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    relu = sch.get_block("compute")
    sch.reverse_compute_at(relu, i0)
    text = format_lowered(lower_module(sch.mod))
    # allocated inside the i_0 loop, 4 rows instead of 16
    assert "C = alloc(float32[4, 16], global)" in text
    lines = text.splitlines()
    alloc_line = next(n for n, line in enumerate(lines) if "C = alloc" in line)
    loop_line = next(n for n, line in enumerate(lines) if line.strip().startswith("for i_0 in"))
    assert loop_line < alloc_line
