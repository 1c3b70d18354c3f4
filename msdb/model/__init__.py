"""Models (docs/architecture.md, "Models"): ONNX and Relax-style TVMScript graphs of calls to
PrimFuncs, legalized and fused as TVM 0.27's Relax "zero" pipeline does.

- `graph`: `Model`, `Call`, `TensorInfo`, `ModelError`, the one model structure;
- `ops`: the Relax-level operator graph a frontend emits before legalization;
- `onnx_frontend`, `relax_script`: the two frontends; `loader.load(path)` picks one by suffix;
- `legalize`, `fuse`, `lower`: operators to TensorIR, grouped as FuseOps groups them;
- `tasks`: `extract_tasks`, TVM's ExtractedTask, and recording a model's tasks in a database;
- `zoo`: ONNX builders (ResNet, a depthwise net, an MLP, BERT and GPT-2) with seeded random weights.

Names load on first use, so `import msdb.model` imports neither onnx nor NumPy. The function
`lower` is not exported here: it would shadow its module (`from msdb.model.lower import lower`).
"""

from __future__ import annotations

from msdb.lazy import lazy_getattr
from msdb.model.graph import Call, Model, ModelError, TensorInfo

#: name -> (module, attribute), imported on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "load": ("msdb.model.loader", "load"),
    "from_onnx": ("msdb.model.onnx_frontend", "from_onnx"),
    "load_relax_script": ("msdb.model.relax_script", "load_relax_script"),
    "parse_relax_script": ("msdb.model.relax_script", "parse_relax_script"),
    "extract_tasks": ("msdb.model.tasks", "extract_tasks"),
    "ExtractedTask": ("msdb.model.tasks", "ExtractedTask"),
    "record_model_tasks": ("msdb.model.tasks", "record_model_tasks"),
    "fuse_tvm": ("msdb.model.fuse", "fuse_tvm"),
    "fuse_fold": ("msdb.model.fuse", "fuse_fold"),
    "Partition": ("msdb.model.fuse", "Partition"),
}

__all__ = sorted(["Call", "Model", "ModelError", "TensorInfo", *_LAZY])

__getattr__ = lazy_getattr(__name__, _LAZY, globals())
