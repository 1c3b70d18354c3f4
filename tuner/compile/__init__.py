"""Compiling models with a (layered) database: applying records, anchor-block traces and
default schedules to every function of a model (docs/architecture.md, "Tuner" and "Compile").

    compiled = msdb.tuner.compile(model, database=[local, "shared.sqlite"])
    outputs = compiled.run({"input": x})
    print(compiled.report_table())

Modules: `compiler` (the compile loop), `lookup` (layered queries and miss reasons),
`compiled_model` (`CompiledModel`: buffers, run, benchmark), `report` (the hit/miss report),
`anchor_trace` (TVM's ScheduleUsingAnchorTrace), `default_schedule` (no-search schedules).

Why this package can be called: TVM users write `compile(...)`, and msdb exports it as
`msdb.tuner.compile`, which is also this package's name. Importing any of its modules makes the
package the attribute `msdb.tuner.compile`, whatever was imported before; so the package itself
is callable (its module class gets a `__call__` that is `compile_model`), and
`msdb.tuner.compile(model, ...)` means the same thing in every import order.
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
    "schedule_using_anchor_trace": ("msdb.tuner.compile.anchor_trace", "schedule_using_anchor_trace"),
    "AnchorTraceError": ("msdb.tuner.compile.anchor_trace", "AnchorTraceError"),
    "default_schedule": ("msdb.tuner.compile.default_schedule", "default_schedule"),
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from msdb.tuner.compile.anchor_trace import AnchorTraceError, schedule_using_anchor_trace
    from msdb.tuner.compile.compiled_model import CompiledModel, ModelInputError
    from msdb.tuner.compile.compiler import compile_model
    from msdb.tuner.compile.compiler import compile_model as compile  # noqa: A004 - TVM's name
    from msdb.tuner.compile.default_schedule import default_schedule
    from msdb.tuner.compile.lookup import open_layer
    from msdb.tuner.compile.report import FunctionReport, MissReason


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


class _CallablePackage(types.ModuleType):
    """This package, callable as `compile_model` (see the module docstring)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from msdb.tuner.compile.compiler import compile_model

        return compile_model(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
