"""Shared helpers for the model tests: run a lowered `Model` call by call through msdb's
interpreter, run the same ONNX model through onnxruntime for reference, and list a function's
block names."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest


def run_model(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Execute `model` op by op with `msdb.ir.interpreter` (each call's PrimFunc on its argument
    arrays, outputs written in place), returning the model outputs."""
    from msdb.ir.interpreter import compile_func

    env: dict[str, np.ndarray] = {name: np.require(v, requirements="C") for name, v in feeds.items()}
    env.update({name: np.require(v, requirements="C") for name, v in model.params.items()})
    compiled: dict[str, Any] = {}
    for call in model.calls:
        if call.function not in compiled:
            compiled[call.function] = compile_func(model.functions[call.function])
        outs = [np.zeros(model.values[o].shape, model.values[o].dtype) for o in call.outputs]
        compiled[call.function](*[env[a] for a in call.args], *outs)
        env.update(zip(call.outputs, outs))
    return [env[o] for o in model.outputs]


def ort_run(proto: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs for `proto` (one thread, CPU)."""
    from msdb.tuner.compile.reference import onnxruntime_session

    return list(onnxruntime_session(proto).run(None, feeds))


def random_feeds(proto: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded float32 inputs for every graph input that is not an initializer."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in proto.graph.initializer}
    feeds = {}
    for info in proto.graph.input:
        if info.name in inits:
            continue
        shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
        feeds[info.name] = rng.standard_normal(shape).astype("float32")
    return feeds


@pytest.fixture
def check_against_ort() -> Callable[..., Any]:
    """`check(proto, fuse="tvm")`: lower the ONNX model, run it, compare with onnxruntime at
    rtol 1e-4; returns the lowered model."""
    from msdb.model.lower import lower
    from msdb.model.onnx_frontend import from_onnx

    def check(proto: Any, fuse: str = "tvm", seed: int = 0) -> Any:
        feeds = random_feeds(proto, seed)
        model = lower(from_onnx(proto), fuse)
        ours = run_model(model, feeds)
        theirs = ort_run(proto, feeds)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        return model

    return check


def block_names(func: Any) -> list[str]:
    """A PrimFunc's block names in program order, the root block left out."""
    from msdb.ir import stmt as S

    found: list[str] = []

    def walk(stmt: S.Stmt) -> None:
        if isinstance(stmt, S.SeqStmt):
            for item in stmt.seq:
                walk(item)
        elif isinstance(stmt, S.For):
            walk(stmt.body)
        elif isinstance(stmt, S.BlockRealize):
            found.append(stmt.block.name_hint)
            walk(stmt.block.body)

    walk(func.body)
    return found[1:]


def tvm_legalized_script(builder: Any) -> str:
    """The one PrimFunc real TVM 0.27 legalizes a Relax block builder's function into (with
    its op pattern annotated), as TVMScript: what msdb's legalization is compared with."""
    import tvm
    from tvm import relax

    mod = relax.transform.AnnotateTIROpPattern()(relax.transform.LegalizeOps()(builder.get()))
    funcs = [f for f in mod.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    assert len(funcs) == 1, [gv.name_hint for gv in mod.functions]
    return funcs[0].script()


def int64_shape(shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A shape as int64 constants, as TVM's Relax shapes are."""
    from msdb.ir import expr as E

    return tuple(E.make_const(d, "int64") for d in shape)
