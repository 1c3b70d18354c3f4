"""Compiling models with a (layered) database: applying records, anchor-block traces and
default schedules to every function of a model.

    compiled = msdb.tuner.compile(model, database=[local, "shared.sqlite"])
    outputs = compiled.run({"input": x})
    print(compiled.report_table())

The package is callable (`compile_model`), so `msdb.tuner.compile(...)` works in every import
order. Its modules and why it is callable: see docs/architecture.md, "Compile".
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from msdb.lazy import lazy_getattr

#: name -> (module, attribute), imported on first use (llvmlite and the model frontends load late).
_LAZY: dict[str, tuple[str, str]] = {
    "compile": ("msdb.tuner.compile.compiler", "compile_model"),
    "compile_model": ("msdb.tuner.compile.compiler", "compile_model"),
    "CompiledModel": ("msdb.tuner.compile.compiled_model", "CompiledModel"),
    "ModelInputError": ("msdb.tuner.compile.compiled_model", "ModelInputError"),
    "FunctionReport": ("msdb.tuner.compile.report", "FunctionReport"),
    "MissReason": ("msdb.tuner.compile.report", "MissReason"),
    "open_layer": ("msdb.tuner.compile.lookup", "open_layer"),
    # the schedules compile applies to a record's near misses and to misses live with the design
    # space, where the search uses them too (docs/architecture.md, "Tuner")
    "schedule_using_anchor_trace": ("msdb.tuner.space.anchor_trace", "schedule_using_anchor_trace"),
    "AnchorTraceError": ("msdb.tuner.space.anchor_trace", "AnchorTraceError"),
    "default_schedule": ("msdb.tuner.space.default_schedule", "default_schedule"),
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from msdb.tuner.compile.compiled_model import CompiledModel, ModelInputError
    from msdb.tuner.compile.compiler import compile_model
    from msdb.tuner.compile.compiler import compile_model as compile  # noqa: A004 - TVM's name
    from msdb.tuner.compile.lookup import open_layer
    from msdb.tuner.compile.report import FunctionReport, MissReason
    from msdb.tuner.space.anchor_trace import AnchorTraceError, schedule_using_anchor_trace
    from msdb.tuner.space.default_schedule import default_schedule


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


class _CallablePackage(types.ModuleType):
    """This package, callable as `compile_model` (see the module docstring)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from msdb.tuner.compile.compiler import compile_model

        return compile_model(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
