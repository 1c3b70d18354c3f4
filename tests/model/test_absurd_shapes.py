"""A model whose tensors are absurdly large is refused where it is read, in one line naming the
tensor and its shape, before anything is allocated for it (`msdb.model.graph.MAX_TENSOR_ELEMENTS`,
docs/architecture.md, "Models"). Before, `msdb compile` ended in NumPy's `_ArrayMemoryError` and
`msdb tune` "succeeded" with a task at N/A."""

from __future__ import annotations

import io
import pathlib
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner

from msdb.cli.main import cli
from msdb.errors import ScriptError
from msdb.model import load
from msdb.model.graph import MAX_TENSOR_ELEMENTS, ModelError, oversized
from tests.cli.model_files import files_in, tiny_onnx
from tests.model.relax_scripts import MLP

#: Before the bound, `msdb tune` of such a model ran on for tens of minutes.
pytestmark = pytest.mark.timeout(300)

HUGE = 2 ** 40
BOUND = "more than msdb's bound of 2^31 per tensor (msdb.model.graph.MAX_TENSOR_ELEMENTS)"


def run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


def test_the_bound_counts_elements_exactly() -> None:
    assert oversized((2 ** 16, 2 ** 15)) is None  # exactly the bound
    assert oversized((2 ** 16, 2 ** 15 + 1)) is not None
    assert oversized((HUGE, HUGE, HUGE)) == f"shape [{HUGE}, {HUGE}, {HUGE}] has {HUGE ** 3} elements, {BOUND}"
    assert MAX_TENSOR_ELEMENTS == 2 ** 31


def test_compile_and_tune_refuse_a_huge_onnx_input_in_one_line(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")
    model = tiny_onnx(tmp_path / "huge.onnx", batch=HUGE)
    expected = (f"Error: {model}: graph input 'x': shape [{HUGE}, 32] has {HUGE * 32} elements, {BOUND}")
    before = files_in(tmp_path)
    for args in (("compile", model), ("tune", tmp_path / "t.sqlite", model, "--trials", 2, "--target",
                                      "llvm -num-cores=1", "--workers", 1)):
        result = run(*args)
        assert result.exit_code == 1, result.output
        assert result.output.splitlines() == [expected], result.output
        assert files_in(tmp_path) == before  # no database created


def test_onnx_input_shapes_given_by_the_caller_are_bounded(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")
    model = tiny_onnx(tmp_path / "dyn.onnx", batch="N")
    with pytest.raises(ModelError, match=rf"graph input 'x': shape \[{HUGE}, 32\] has"):
        load(model, input_shapes={"x": (HUGE, 32)})


def test_onnx_intermediate_and_initializer_shapes_are_bounded(tmp_path: pathlib.Path) -> None:
    onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the optional extra msdb[onnx]")
    from onnx import TensorProto, helper, numpy_helper

    # small inputs, a huge product: (2^16, 1) x (1, 2^16) is 2^32 elements
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="outer")], "outer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2 ** 16, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2 ** 16, 2 ** 16])],
        [numpy_helper.from_array(np.ones((1, 2 ** 16), "float32"), "w")])
    path = tmp_path / "outer.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(ModelError, match=rf"^{path}: node 'outer' \(MatMul\): output '.*': shape \[65536, 65536\] "
                                         rf"has 4294967296 elements"):
        load(path)
    # an initializer whose dims claim 2^40 elements (a forged file: its data is 4 bytes)
    forged = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[HUGE], raw_data=b"\0\0\0\0")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "forged",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], [forged])
    path = tmp_path / "forged.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(ModelError, match=rf"^{path}: initializer 'w': shape \[{HUGE}\] has {HUGE} elements"):
        load(path)


def test_a_relax_script_tensor_is_bounded(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "mlp.py"
    text = MLP.read_text()
    declared = 'def main(x: R.Tensor((1, 784), "float32")'
    assert declared in text
    script.write_text(text.replace(declared, f'def main(x: R.Tensor(({HUGE}, 784), "float32")'))
    line = next(i for i, text_line in enumerate(script.read_text().splitlines(), 1) if str(HUGE) in text_line)
    with pytest.raises(ScriptError, match=rf"^{script}:{line}:\d+: parameter 'x': shape \[{HUGE}, 784\] has "):
        load(script)
    result = run("compile", script)
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1, result.output
    assert f"shape [{HUGE}, 784]" in result.output


def _npy_header_only(shape: tuple[int, ...]) -> bytes:
    """A .npy member whose header claims `shape` and which holds no data (a forged file)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def test_relax_weights_are_bounded_before_numpy_reads_them(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "mlp.py"
    script.write_text(MLP.read_text())
    with zipfile.ZipFile(tmp_path / "mlp.npz", "w") as archive:
        archive.writestr("w0.npy", _npy_header_only((HUGE, 784)))
    with pytest.raises(ModelError, match=rf"mlp.npz: array 'w0' of the weights of {script}: shape \[{HUGE}, 784\]"):
        load(script)
