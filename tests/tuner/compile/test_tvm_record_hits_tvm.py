"""Real TVM 0.27 applies the shipped record (tests/data/tvm_resnet_conv_workdir) to its own
compile of the model it was tuned on, and the generator that made it still works
(tests/tuner/compile/make_tvm_conv_record.py).

The TVM side of tests/tuner/compile/test_tvm_record_hits.py: TVM's "zero" pipeline applies a database
when one is current (MetaScheduleApplyDatabase), so the user's way is checked: the conv2d
function of the tuned shape, and only it, comes out marked `tirx.is_scheduled`; by anchor block
the same record schedules the fused conv+bias(+add)+relu functions of the batch-norm-folded
export (the functions msdb's `fuse="fold"` makes, tests/model/test_onnx_tvm.py); both built
models match onnxruntime.

`MSDB_REGENERATE_TVM_RECORD=1` makes the generator test rewrite the shipped work_dir with the
full budget (run pinned to one core: `taskset -c 1 .tvm-venv/bin/python -m pytest -m tvm ...`);
without it the generator runs with a tiny budget into a temporary folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from msdb.tuner.compile.reference import onnxruntime_session
from tests.tuner.compile.make_tvm_conv_record import (
    DEFAULT_TRIALS, IMAGE, NUM_CLASSES, SEED, SHIPPED, TVM_TARGET, WIDTH, make_work_dir, resnet18, tvm_zero_module,
)

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

REGENERATE = os.environ.get("MSDB_REGENERATE_TVM_RECORD") == "1"


def _folded_resnet18() -> Any:
    """The same network exported with its batch-norms folded: biased convs, no BatchNormalization."""
    from msdb.model.zoo import resnet

    return resnet(18, image=IMAGE, width=WIDTH, num_classes=NUM_CLASSES, seed=SEED, batch_norm=False)


def _tvm_compile_with(proto: Any, work_dir: Path, module_equality: str) -> tuple[Any, set[str]]:
    """TVM's zero pipeline on `proto` with the work_dir's JSONDatabase current: (the module,
    the names of the PrimFuncs MetaScheduleApplyDatabase scheduled)."""
    import tvm
    from tvm import tirx
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False, module_equality=module_equality)
    with tvm.target.Target(TVM_TARGET), db:
        mod = tvm_zero_module(proto)
    scheduled = {gv.name_hint for gv, func in mod.functions.items()
                 if isinstance(func, tirx.PrimFunc) and bool(func.attrs.get("tirx.is_scheduled", False))}
    return mod, scheduled


def _check_against_onnxruntime(mod: Any, proto: Any) -> None:
    """Build TVM's module (lowering only: the functions keep their schedules), run it in the
    Relax VM and compare with onnxruntime."""
    import tvm
    from tvm import relax

    executable = tvm.compile(mod, tvm.target.Target(TVM_TARGET), relax_pipeline=relax.pipeline.default_build_pipeline())
    vm = relax.VirtualMachine(executable, tvm.cpu())
    x = np.random.default_rng(0).standard_normal((1, 3, IMAGE, IMAGE)).astype("float32")
    actual = vm["main"](tvm.runtime.tensor(x)).numpy()
    (expected,) = onnxruntime_session(proto).run(None, {"data": x})
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5 * float(np.max(np.abs(expected))))


@pytest.fixture
def shipped_copy(tmp_path: Path) -> Path:
    """The shipped work_dir copied, so that TVM's JSONDatabase never touches the shipped files."""
    return Path(shutil.copytree(SHIPPED, tmp_path / "work_dir"))


def test_tvm_applies_the_shipped_record_to_the_bare_conv(shipped_copy: Path) -> None:
    proto = resnet18()
    mod, scheduled = _tvm_compile_with(proto, shipped_copy, "structural")
    assert scheduled == {"conv2d1"}
    _check_against_onnxruntime(mod, proto)


def test_tvm_applies_the_shipped_record_by_anchor_block_to_the_fused_convs(shipped_copy: Path) -> None:
    proto = _folded_resnet18()
    mod, scheduled = _tvm_compile_with(proto, shipped_copy, "anchor-block")
    assert scheduled == {"fused_conv2d1_add1_relu1", "fused_conv2d1_add1_add2_relu1"}
    _check_against_onnxruntime(mod, proto)


def test_the_generator_makes_a_work_dir_tvm_applies(tmp_path: Path) -> None:
    """The generator end to end; with MSDB_REGENERATE_TVM_RECORD=1 it rewrites the shipped
    work_dir (then review the diff and the README's figures), else a tiny budget into tmp_path."""
    out = SHIPPED if REGENERATE else tmp_path / "work_dir"
    made = make_work_dir(out, DEFAULT_TRIALS if REGENERATE else 4)
    assert (made["task"], made["weight"]) == ("conv2d1", 4)
    assert 1 <= made["records"] <= made["trials"]
    _, scheduled = _tvm_compile_with(resnet18(), out, "structural")
    assert scheduled == {"conv2d1"}
