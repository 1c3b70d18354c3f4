"""Relax-style TVMScript models (msdb.model.relax_script): the example MLP and the MLC course's
older spelling read to the same model, with the zoo's workloads as functions; every kind of bad
input is one error naming the file and line (or the .npz and the array)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from msdb.errors import MsdbError, ScriptError
from msdb.hashing import structural_hash
from msdb.ir import zoo
from msdb.model import ModelError, load_relax_script, parse_relax_script
from msdb.model.relax_script import is_relax_script
from tests.model.relax_scripts import MLC_OLD_STYLE, MLP, mixed_script


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w0": rng.standard_normal((128, 784)).astype("float32"), "b0": rng.standard_normal(128).astype("float32"),
            "w1": rng.standard_normal((10, 128)).astype("float32"), "b1": rng.standard_normal(10).astype("float32")}


@pytest.fixture
def mlp_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    """The example MLP with its weights beside it, as a user lays it out."""
    (tmp_path / "mlp.py").write_text(MLP.read_text())
    np.savez(tmp_path / "mlp.npz", **_weights())
    return tmp_path


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_the_example_mlp_reads_with_its_weights_from_the_npz_beside_it(mlp_dir: pathlib.Path) -> None:
    model = load_relax_script(mlp_dir / "mlp.py")
    assert model.name == "mlp" and model.source == str(mlp_dir / "mlp.py")
    assert [(t.name, t.shape, t.dtype) for t in model.inputs] == [("x", (1, 784), "float32")]
    assert sorted(model.params) == ["b0", "b1", "w0", "w1"]
    np.testing.assert_array_equal(model.params["w1"], _weights()["w1"])
    assert [(c.function, c.args, c.outputs) for c in model.calls] == [
        ("linear0", ("x", "w0", "b0"), ("lv0",)), ("relu0", ("lv0",), ("lv1",)), ("linear1", ("lv1", "w1", "b1"), ("out",))]
    assert model.outputs == ("out",)
    assert model.values["lv1"].shape == (1, 128)
    text = MLP.read_text()
    assert model.calls[1].node == f"{mlp_dir / 'mlp.py'}:{_line_of(text, 'cls.relu0')}"
    # the layers are the zoo's MLC workloads, so records tuned on `--zoo linear0` apply
    for name, func in model.functions.items():
        assert structural_hash(func) == structural_hash(zoo.workload(name, 0)), name


def test_without_an_npz_the_weights_become_inputs_and_a_warning_says_so(tmp_path: pathlib.Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Not an error (a model may have no weights; tuning needs none), but the user who forgot
    the .npz is told, once, naming the file it looked for."""
    (tmp_path / "mlp.py").write_text(MLP.read_text())
    with caplog.at_level("WARNING", logger="msdb.model.relax_script"):
        model = load_relax_script(tmp_path / "mlp.py")
    assert [t.name for t in model.inputs] == ["x", "w0", "b0", "w1", "b1"] and model.params == {}
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path / 'mlp.py'}: no mlp.npz beside it; every parameter of main is an input (its weights too)"]


def test_the_mlc_course_spelling_gives_the_same_model() -> None:
    old = parse_relax_script(MLC_OLD_STYLE, "old.py")
    new = parse_relax_script(MLP.read_text(), "mlp.py")
    assert [c.function for c in old.calls] == [c.function for c in new.calls]
    for name in new.functions:
        assert structural_hash(old.functions[name]) == structural_hash(new.functions[name]), name
    assert old.name == "old" and [t.name for t in old.inputs] == ["x", "w0", "b0", "w1", "b1"]  # no weights given


def test_params_as_a_dict_and_num_input() -> None:
    text = MLP.read_text().replace("        cls = MLP\n", '        R.func_attr({"num_input": 1})\n        cls = MLP\n')
    model = parse_relax_script(text, "mlp.py", params=_weights())
    assert [t.name for t in model.inputs] == ["x"] and sorted(model.params) == ["b0", "b1", "w0", "w1"]


@pytest.mark.parametrize("out_form", [
    'out_sinfo=R.Tensor((1, 128), dtype="float32")',
    'out_ty=R.Tensor((1, 128), "float32")',
    '(1, 128), dtype="float32"',
    'R.Tensor([1, 128], dtype=T.float32)',
])
def test_every_call_tir_spelling_reads(out_form: str) -> None:
    text = MLP.read_text().replace('R.call_tir(cls.relu0, (lv0,), R.Tensor((1, 128), dtype="float32"))',
                                   f"R.call_tir(cls.relu0, (lv0,), {out_form})")
    assert out_form in text
    model = parse_relax_script(text, "mlp.py")
    assert model.values["lv1"].shape == (1, 128) and model.values["lv1"].dtype == "float32"


def test_bindings_outside_dataflow_aliases_annotations_and_tuple_returns() -> None:
    text = mixed_script()
    # main's body replaced: no dataflow block, an annotated binding, an alias and a tuple return
    body = '''        cls = Mixed
        lv0: R.Tensor((1, 128), "float32") = R.call_tir(cls.dense, (x, w0), R.Tensor((1, 128), dtype="float32"))
        gv = lv0
        lv1 = R.call_tir(cls.relu0, (gv,), R.Tensor((1, 128), dtype="float32"))
        return (gv, lv1)
'''
    head = text[:text.index("        cls = Mixed")].replace(' -> R.Tensor((1, 128), "float32"):', ":")
    model = parse_relax_script(head + body, "m.py")
    assert [c.function for c in model.calls] == ["dense", "relu0"]
    assert model.outputs == ("lv0", "lv1") and model.calls[1].args == ("lv0",)


def test_a_multi_output_call_is_indexed() -> None:
    text = '''from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class Split:
    @T.prim_func
    def twice(X: T.Buffer((4,), "float32"), A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.sblock("A"):
                v = T.axis.spatial(4, i)
                A[v] = X[v]
        for i in range(4):
            with T.sblock("B"):
                v = T.axis.spatial(4, i)
                B[v] = X[v] * T.float32(2)

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = Split
        with R.dataflow():
            lv = R.call_tir(cls.twice, (x,), [R.Tensor((4,), "float32"), R.Tensor((4,), "float32")])
            b = lv[1]
            R.output(b)
        return b
'''
    model = parse_relax_script(text, "split.py")
    assert model.calls[0].outputs == ("lv[0]", "lv[1]") and model.outputs == ("lv[1]",)


def test_is_relax_script_tells_a_model_from_a_workload() -> None:
    assert is_relax_script(MLP.read_text()) and is_relax_script(MLC_OLD_STYLE)
    from msdb.ir.script import to_script

    assert not is_relax_script(to_script(zoo.workload("GMM", 0)))


# ---------------------------------------------------------------- bad input


def _replace(old: str, new: str, text: str | None = None) -> tuple[str, int]:
    """The MLP script with `old` replaced by `new`, and the line of the change."""
    text = MLP.read_text() if text is None else text
    assert old in text, old
    changed = text.replace(old, new, 1)
    return changed, _line_of(changed, new.strip().splitlines()[0])


@pytest.mark.parametrize("old,new,message", [
    ("R.call_tir(cls.relu0,", "R.call_tir(cls.relu9,", "R.call_tir calls unknown function 'relu9' (the module's PrimFuncs: "
                                                        "linear0, linear1, relu0)"),
    ('out = R.call_tir(cls.linear1, (lv1, w1, b1), R.Tensor((1, 10), dtype="float32"))',
     'out = R.call_tir(cls.linear1, (lv1, w1, b1), R.Tensor((1, 11), dtype="float32"))',
     "the output type float32[1, 11] does not match linear1's output buffer Z, float32[1, 10]"),
    ('lv1 = R.call_tir(cls.relu0, (lv0,), R.Tensor((1, 128), dtype="float32"))',
     'lv1 = R.call_tir(cls.relu0, (lv0,), R.Tensor((1, 128), dtype="float16"))',
     "the output type float16[1, 128] does not match relu0's output buffer Y, float32[1, 128]"),
    ("R.call_tir(cls.relu0, (lv0,),", "R.call_tir(cls.relu0, (x,),",
     "argument 'x' is float32[1, 784], but relu0's buffer X is float32[1, 128]"),
    ("R.call_tir(cls.relu0, (lv0,),", "R.call_tir(cls.relu0, (lv0, lv0),",
     "passes 2 argument(s) and 1 output(s), but relu0 takes 2 buffers"),
    ('lv1 = R.call_tir(cls.relu0, (lv0,), R.Tensor((1, 128), dtype="float32"))', "lv1 = R.nn.relu(lv0)",
     "R.nn.relu is not supported: msdb does not legalize high-level Relax ops"),
    ('lv1 = R.call_tir(cls.relu0, (lv0,), R.Tensor((1, 128), dtype="float32"))',
     'lv1 = R.call_dps_packed("env.relu", (lv0,), R.Tensor((1, 128), dtype="float32"))',
     "R.call_dps_packed is not supported: a packed function"),
    ("x: R.Tensor((1, 784), \"float32\")", "x: R.Tensor((\"n\", 784), \"float32\")",
     "parameter 'x': dynamic dimension 'n'; msdb models have static shapes"),
    ("R.call_tir(cls.relu0, (lv0,),", "R.call_tir(cls.relu0, (lv7,),", "lv7 is not defined before this use"),
    ('lv1 = R.call_tir(cls.relu0, (lv0,), R.Tensor((1, 128), dtype="float32"))',
     'lv1 = R.call_tir(cls.relu0, (lv0,), R.Tensor((1, 128), dtype="float32"), tir_vars=R.shape([1]))',
     "R.call_tir(tir_vars=...) is not supported"),
    ("-> R.Tensor((1, 10), \"float32\"):", "-> R.Tensor((1, 12), \"float32\"):",
     "main is declared to return float32[1, 12] but returns float32[1, 10]"),
])
def test_bad_relax_is_one_error_at_its_line(old: str, new: str, message: str) -> None:
    text, line = _replace(old, new)
    with pytest.raises(ScriptError) as info:
        parse_relax_script(text, "mlp.py")
    assert message in str(info.value)
    assert info.value.line == line and info.value.source_name == "mlp.py"
    assert str(info.value).startswith(f"mlp.py:{line}:")


def test_an_error_inside_a_prim_func_points_into_the_users_file() -> None:
    text, line = _replace("Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))",
                          "Y[v_i, v_j] = T.max(Q[v_i, v_j], T.float32(0.0))")
    with pytest.raises(ScriptError) as info:
        parse_relax_script(text, "mlp.py")
    assert info.value.line == line and "Q" in str(info.value)


@pytest.mark.parametrize("text,message", [
    ("import tvm\nx = 1\n", "msdb does not run other top-level code"),
    (MLP.read_text().replace("@R.function", "@R.function\n    def helper(x: R.Tensor((1,), \"float32\")):\n"
                             "        return x\n\n    @R.function", 1), "@R.function helper: msdb reads one Relax function"),
    ("from tvm.script import ir as I\n\n@I.ir_module\nclass M:\n    pass\n", "module M has no @R.function main"),
    ("def main(:\n", "invalid Python syntax"),
])
def test_bad_module_layouts(text: str, message: str) -> None:
    with pytest.raises(ScriptError) as info:
        parse_relax_script(text, "m.py")
    assert message in str(info.value) and str(info.value).startswith("m.py:")


def test_npz_of_the_wrong_shape_or_dtype_names_the_array(mlp_dir: pathlib.Path) -> None:
    good = _weights()
    for bad, shown in ((good["w0"].T.copy(), "float32[784, 128]"), (good["w0"].astype("float64"), "float64[128, 784]")):
        np.savez(mlp_dir / "mlp.npz", **{**good, "w0": bad})
        with pytest.raises(ModelError) as info:
            load_relax_script(mlp_dir / "mlp.py")
        text = str(info.value)
        assert text.startswith(f"{mlp_dir / 'mlp.npz'}: array 'w0' is {shown}, but main declares it float32[128, 784]")
        assert f"mlp.py:{_line_of(MLP.read_text(), 'w0: R.Tensor')}" in text


def test_npz_with_an_array_main_does_not_take(mlp_dir: pathlib.Path) -> None:
    np.savez(mlp_dir / "mlp.npz", **_weights(), w9=np.zeros(3, "float32"))
    with pytest.raises(ModelError, match=r"mlp.npz: array 'w9' is not a parameter of main .*parameters: x, w0, b0, w1, b1"):
        load_relax_script(mlp_dir / "mlp.py")


def test_a_missing_weight_after_num_input(mlp_dir: pathlib.Path) -> None:
    text = MLP.read_text().replace("        cls = MLP\n", '        R.func_attr({"num_input": 1})\n        cls = MLP\n')
    (mlp_dir / "mlp.py").write_text(text)
    weights = _weights()
    del weights["b1"]
    np.savez(mlp_dir / "mlp.npz", **weights)
    with pytest.raises(ModelError) as info:
        load_relax_script(mlp_dir / "mlp.py")
    assert f"mlp.py:{_line_of(text, 'b1: R.Tensor')}: weight 'b1' (after num_input=1) has no array in " in str(info.value)


def test_unreadable_files_are_model_errors(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ModelError, match="cannot read the model script"):
        load_relax_script(tmp_path / "nope.py")
    (tmp_path / "m.py").write_text(MLP.read_text())
    (tmp_path / "m.npz").write_bytes(b"not a zip file")
    with pytest.raises(ModelError, match=r"m.npz: cannot read the weights of .*m.py"):
        load_relax_script(tmp_path / "m.py")
    assert issubclass(ModelError, MsdbError) and issubclass(ScriptError, MsdbError)
