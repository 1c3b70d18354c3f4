"""Whole ONNX models from msdb.model.zoo, lowered in both fusion modes and run call by call
through msdb's interpreter, compute what onnxruntime computes; `msdb.model.loader.load`
dispatches by suffix."""

from __future__ import annotations

import onnx
import pytest

from msdb.model import zoo
from msdb.model.graph import ModelError
from msdb.model.loader import load

MODELS = {
    "resnet18": lambda: zoo.resnet(18, image=16, width=4, num_classes=10, softmax=True),
    "resnet34": lambda: zoo.resnet(34, batch=2, image=16, width=2, num_classes=5),
    "resnet50": lambda: zoo.resnet(50, image=16, width=2, num_classes=5),
    "mobilenet_like": lambda: zoo.mobilenet_like(image=16, width=4, num_classes=10),
    "mobilenet_v2": lambda: zoo.mobilenet_v2(image=16, width=0.25, stages=4, num_classes=10),
    "mlp": lambda: zoo.mlp(batch=3, features=32, hidden=(16, 8, 8), num_classes=5),
}


@pytest.mark.slow
@pytest.mark.parametrize("fuse", ["tvm", "fold"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_matches_onnxruntime(name, fuse, check_against_ort):
    model = check_against_ort(MODELS[name](), fuse)
    assert model.calls and set(model.params) <= set(model.values)


def test_zoo_weights_are_seeded():
    a, b, c = zoo.mlp(seed=1), zoo.mlp(seed=1), zoo.mlp(seed=2)
    assert a.SerializeToString() == b.SerializeToString() != c.SerializeToString()
    onnx.checker.check_model(zoo.resnet(34, image=32, width=4))
    onnx.checker.check_model(zoo.mobilenet_like(image=32))
    onnx.checker.check_model(zoo.mobilenet_v2(image=32))


def test_mobilenet_convs_fuse_with_their_clip():
    from msdb.model.lower import lower
    from msdb.model.onnx_frontend import from_onnx

    model = lower(from_onnx(zoo.mobilenet_like(image=32, width=8, num_classes=10)))
    assert "fused_conv2d_add_maximum_minimum" in model.functions
    assert "fused_conv2d10_add4_add5_relu" in model.functions
    # the flatten is `reshape3`: the three bias reshapes before it took reshape..reshape2
    assert "reshape3" in model.functions and "fused_matmul_add6" in model.functions


def test_load_dispatches_onnx_by_suffix(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(zoo.mlp(features=8, hidden=(4,), num_classes=3), path)
    model = load(path)
    assert model.name == "mlp" and model.source == str(path)
    assert list(model.functions) == ["fused_matmul_add_relu", "fused_matmul1_add1", "softmax"]
    assert load(path, fuse="fold").call_counts() == model.call_counts()


def test_load_refuses_unknown_formats_and_modes(tmp_path):
    with pytest.raises(ModelError, match="unknown model format '.pb'"):
        load(tmp_path / "m.pb")
    with pytest.raises(ModelError, match="fuse='fast' is not a fusion mode"):
        load(tmp_path / "m.onnx", fuse="fast")
    script = tmp_path / "m.py"
    script.write_text("")
    with pytest.raises(ModelError, match="already fused"):
        load(script, fuse="fold")


def test_load_reads_a_relax_script(tmp_path):
    from tests.model.relax_scripts import MLC_OLD_STYLE

    path = tmp_path / "mlc.py"
    path.write_text(MLC_OLD_STYLE)
    model = load(path)
    assert {c.function for c in model.calls} >= {"linear0", "relu0", "linear1"}


def test_resnet50_has_bottleneck_blocks_and_an_unknown_depth_is_one_clear_error():
    model = zoo.resnet(50, image=32, width=4)
    onnx.checker.check_model(model)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == 1 + 16 * 3 + 4  # stem, 16 bottlenecks of three convs, 4 downsamples
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [1, 1000]
    with pytest.raises(ModelError, match="depth 101 is not 18, 34 or 50"):
        zoo.resnet(101)

