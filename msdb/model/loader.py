"""`load(path)`: a model file into a `Model`, whatever its format (docs/architecture.md, "Models").

Why one entry point: the command line (`msdb compile MODEL`, `msdb tune DB MODEL`) and the
library take a path and should not care whether it is an ONNX file or a Relax-style script.
The suffix decides: `.onnx` goes through the ONNX frontend, legalization and fusion
(`fuse="tvm"`, TVM's "zero" pipeline, `"fold"`, `"packed"` or `"winograd"`); `.py` is a Relax-style
TVMScript model whose PrimFuncs are already fused (weights from the `.npz` beside it), so `fuse` does not apply.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from msdb.model.graph import Model, ModelError

__all__ = ["load", "SUFFIXES"]

SUFFIXES = (".onnx", ".py")


def load(path: str | os.PathLike[str], *, fuse: str = "tvm", name: str | None = None,
         input_shapes: Mapping[str, tuple[int, ...]] | None = None,
         params: str | os.PathLike[str] | Mapping[str, Any] | None = None) -> Model:
    """The model in `path`: `.onnx` (fused by `fuse`; `input_shapes` fixes symbolic input
    dimensions) or a Relax-style `.py` (weights from `params`, default the `.npz` beside it)."""
    from msdb.model.lower import FUSE_MODES

    if fuse not in FUSE_MODES:
        raise ModelError(f"fuse={fuse!r} is not a fusion mode; use one of {', '.join(FUSE_MODES)}")
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        if params is not None:
            raise ModelError(f"{path}: params= is for Relax scripts; an ONNX model holds its weights")
        from msdb.model.lower import lower
        from msdb.model.onnx_frontend import from_onnx

        return lower(from_onnx(path, name, input_shapes=input_shapes), fuse)
    if suffix == ".py":
        if fuse != "tvm":
            raise ModelError(f"{path}: a Relax script's functions are already fused; fuse={fuse!r} applies to "
                             "ONNX models only")
        if input_shapes:
            raise ModelError(f"{path}: input_shapes= is for ONNX models; a Relax script's shapes are static")
        try:
            from msdb.model.relax_script import load_relax_script
        except ImportError:  # pragma: no cover - part of msdb
            raise ModelError(f"{path}: this msdb cannot read Relax scripts") from None
        return load_relax_script(path, params, name=name)
    raise ModelError(f"{path}: unknown model format {suffix or '(no suffix)'!r}; msdb reads "
                     f"{' and '.join(SUFFIXES)} files")
