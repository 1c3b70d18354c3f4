"""Checking a compiled model's numbers against a reference (`msdb compile --run`;
docs/architecture.md, "Compile").

Why these references: msdb's own interpreter would be exact but takes minutes on a ResNet, so
an ONNX model is compared with onnxruntime (the optional extra `msdb[onnx]`), or, without it,
with ONNX's own NumPy evaluator (`onnx.reference`); a Relax-style script has no independent
runtime, so its tuned build is compared with its default-schedule build (and the check is
skipped, saying so, when no record was applied: the two builds would be the same).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    import numpy as np

    from msdb.model.graph import Model
    from msdb.tuner.compile.compiled_model import CompiledModel

__all__ = ["Comparison", "random_inputs", "compare_with_reference", "errors", "onnxruntime_session"]


@dataclass(frozen=True)
class Comparison:
    """What the outputs were compared with and how far apart they are: `max_abs` the largest
    absolute difference, `max_rel` that divided by the largest reference magnitude (per output,
    the worst output reported). `skipped` says why there was no comparison."""

    reference: str | None
    max_abs: float | None = None
    max_rel: float | None = None
    skipped: str | None = None

    def line(self) -> str:
        if self.skipped is not None:
            return f"outputs not compared: {self.skipped}"
        return f"outputs vs {self.reference}: max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g}"


def random_inputs(model: CompiledModel | Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded standard-normal inputs (integers: 0 or 1, which every integer input of the zoo's
    models reads as meant: token ids, an attention mask, indices) for every input of a compiled
    or a loaded model. A mask of 2 or 3 made BERT's additive mask +inf and its outputs NaN."""
    import numpy as np

    from msdb.model.graph import Model

    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    loaded = model if isinstance(model, Model) else model.model
    for info in loaded.inputs:
        if np.dtype(info.dtype).kind in "iu":
            out[info.name] = rng.integers(0, 2, size=info.shape).astype(info.dtype)
        else:
            out[info.name] = rng.standard_normal(info.shape).astype(info.dtype)
    return out


def errors(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> tuple[float, float]:
    """(max abs difference, that over the largest reference magnitude), worst over the outputs.
    A NaN where the reference has none (or a number where it has NaN) is an infinite difference;
    NaN on both sides, or the same infinity, agrees (before, NaN made every comparison, and so the error, vanish)."""
    import numpy as np

    if len(actual) != len(expected):
        raise ValueError(f"{len(actual)} outputs against {len(expected)} reference outputs")
    worst_abs = worst_rel = 0.0
    for got, want in zip(actual, expected):
        got64 = np.asarray(got, dtype=np.float64)
        want64 = np.asarray(want, dtype=np.float64).reshape(got64.shape)
        with np.errstate(invalid="ignore"):
            gaps = np.abs(got64 - want64)
        gaps[(got64 == want64) | (np.isnan(got64) & np.isnan(want64))] = 0.0  # equal infinities too
        gaps[np.isnan(gaps)] = np.inf
        diff = float(np.max(gaps)) if got64.size else 0.0
        finite = want64[np.isfinite(want64)]
        scale = float(np.max(np.abs(finite))) if finite.size else 0.0
        worst_abs = max(worst_abs, diff)
        worst_rel = max(worst_rel, diff / scale if scale > 0 else diff)
    return worst_abs, worst_rel


def onnxruntime_session(model: Any, threads: int = 1) -> Any:
    """An onnxruntime CPU session of `model` (a path, serialized bytes or an `onnx.ModelProto`) on
    one intra-op (or `threads`) and one inter-op thread: the reference every comparison and the
    model latency budgets use (docs/architecture.md, "Compile"), on the thread count msdb's model
    runs use. ImportError when onnxruntime is not installed.

    Its thread pool does not spin after a run: spinning, it kept the second core busy for
    milliseconds after each call, and an msdb run alternating with it on two threads took 88
    instead of 56 ms (ResNet-18); onnxruntime alone runs as fast either way (48 ms)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def _onnx_outputs(path: str, inputs: Mapping[str, Any]) -> tuple[str, list[Any]]:
    try:
        import onnxruntime
    except ImportError:
        onnxruntime = None
    if onnxruntime is not None:
        session = onnxruntime_session(path)
        return f"onnxruntime {onnxruntime.__version__}", list(session.run(None, dict(inputs)))
    from onnx.reference import ReferenceEvaluator

    return "onnx.reference (NumPy; onnxruntime is not installed)", list(ReferenceEvaluator(path).run(None, dict(inputs)))


def compare_with_reference(compiled: CompiledModel, source: str | os.PathLike[str] | None,
                           inputs: Mapping[str, Any] | None = None) -> Comparison:
    """Run `compiled` on `inputs` (seeded random when None) and compare with the reference for
    its source (see the module docstring)."""
    inputs = dict(inputs) if inputs is not None else random_inputs(compiled)
    actual = compiled.run(inputs)
    path = os.fspath(source) if source is not None else None
    if path is not None and path.endswith(".onnx"):
        try:
            reference, expected = _onnx_outputs(path, inputs)
        except ImportError:
            return Comparison(None, skipped="neither onnxruntime nor onnx is installed (pip install 'msdb[onnx]')")
        max_abs, max_rel = errors(actual, expected)
        return Comparison(reference, max_abs, max_rel)
    if not compiled.hits:
        return Comparison(None, skipped="no record was applied, so the default-schedule build is this build "
                                        "(a Relax script has no independent runtime to compare with)")
    from msdb.tuner.compile.compiler import compile_model

    baseline = compile_model(compiled.model, None, compiled.target, num_threads=compiled.num_threads)
    try:
        expected = baseline.run(inputs)
    finally:
        baseline.close()
    max_abs, max_rel = errors(actual, expected)
    return Comparison("the default-schedule build", max_abs, max_rel)
