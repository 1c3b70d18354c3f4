"""Small model files for the CLI tests of `msdb compile` and `msdb tune DB MODEL`, good and bad,
and a snapshot of a folder's files to show that a failed command wrote nothing."""

from __future__ import annotations

import pathlib

import numpy as np

BAD_MODELS = ("truncated onnx", "unsupported op", "dynamic shape")


def tiny_onnx(path: pathlib.Path, *, activation: str = "Relu", batch: int | str = 1) -> pathlib.Path:
    """Gemm(transB) + `activation` on a (batch, 32) input, seeded weights: one fused task. A
    string `batch` is a symbolic (dynamic) dimension."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((16, 32)).astype("float32"), "w"),
               numpy_helper.from_array(np.zeros(16, "float32"), "b")]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1, name="fc"),
             helper.make_node(activation, ["y"], ["z"], name="act")]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 32])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 16])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def bad_model(path: pathlib.Path, case: str) -> tuple[pathlib.Path, str]:
    """A model file with the problem `case` (one of BAD_MODELS) and what its error line says."""
    if case == "truncated onnx":
        tiny_onnx(path)
        path.write_bytes(path.read_bytes()[:100])
        return path, f"{path.name}: not a readable ONNX model, the file is truncated or corrupt"
    if case == "unsupported op":
        return tiny_onnx(path, activation="HardSwish"), f"{path.name}: node 'act' (HardSwish): unsupported operator"
    if case == "dynamic shape":
        return tiny_onnx(path, batch="N"), f"{path.name}: graph input 'x' dimension 0 is dynamic (symbolic 'N')"
    raise ValueError(f"unknown bad model case {case!r}")


def files_in(folder: pathlib.Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
