"""Relax-style TVMScript models: an `@I.ir_module` class of `@T.prim_func`s and a Relax `main`
that calls them with `R.call_tir`, as TVM's tutorials and the MLC course write them.

Accepted `call_tir` forms: `R.call_tir(cls.f, (x, w), R.Tensor((1, 128), dtype="float32"))`
(0.27 prints `out_ty=`, 0.14-0.21 wrote `out_sinfo=`; a list of `R.Tensor` for several outputs),
and the MLC course's `R.call_tir(f, (x, w), (1, 128), dtype="float32")`; the callee as `cls.f`,
`ModuleName.f`, a bare `f` or the string `"f"`. Weights come from the `.npz` beside the script
(or `params=`). See docs/architecture.md, "Models".
"""

from __future__ import annotations

import ast
import logging
import os
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, NoReturn

from msdb.errors import ScriptError
from msdb.ir.function import PrimFunc
from msdb.model.graph import Call, Model, ModelError, TensorInfo, oversized

__all__ = ["load_relax_script", "parse_relax_script", "is_relax_script"]

logger = logging.getLogger(__name__)

#: Relax calls msdb cannot read, with the reason (any other `R.x` is named as a high-level op).
_UNSUPPORTED_CALLS = {
    "call_dps_packed": "a packed function is not TensorIR msdb can tune or run",
    "call_packed": "a packed function is not TensorIR msdb can tune or run",
    "call_tir_inplace": "in-place calls are not supported",
    "call_tir_with_grad": "calls with gradients are not supported",
}


def is_relax_script(text: str) -> bool:
    """Whether a `.py` file is a Relax-style model (it has an `@R.function` / `@relax.function`)
    rather than a single workload in TVMScript: a cheap look at the text, never executed."""
    return "@R.function" in text or "@relax.function" in text or "R.call_tir" in text


def load_relax_script(path: str | os.PathLike[str], params: str | os.PathLike[str] | Mapping[str, Any] | None = None,
                      *, name: str | None = None) -> Model:
    """The model in the Relax-style TVMScript file `path`, its weights from `params` (a `.npz`
    path or a dict of arrays; default: the `.npz` beside the file, when there is one)."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: cannot read the model script: {exc}") from None
    beside = path.with_suffix(".npz")
    no_weights = params is None and not beside.exists()
    if params is None and not no_weights:
        params = beside
    model = parse_relax_script(text, str(path), params=params, name=name or path.stem)
    if no_weights:
        # not an error: a model may have no weights, and tuning needs none; but a user who
        # forgot the .npz should see that the weights became inputs
        logger.warning("%s: no %s beside it; every parameter of main is an input (its weights too)",
                       path, beside.name)
    return model


def parse_relax_script(text: str, source_name: str = "<script>",
                       params: str | os.PathLike[str] | Mapping[str, Any] | None = None,
                       *, name: str | None = None) -> Model:
    """The model in the Relax-style TVMScript `text` (see the module docstring); `params` as in
    `load_relax_script` (nothing: every parameter of `main` is an input)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=source_name)
    except SyntaxError as exc:
        raise ScriptError(f"invalid Python syntax: {exc.msg}", exc.lineno, exc.offset, source_name) from None
    except (ValueError, RecursionError) as exc:
        raise ScriptError(f"cannot read the script: {exc}", None, None, source_name) from None
    reader = _RelaxReader(text, tree, source_name)
    arrays, npz_name = _arrays(params, source_name)
    return reader.model(arrays, npz_name, name or Path(source_name).stem)


# ---------------------------------------------------------------- reading the file


def _arrays(params: str | os.PathLike[str] | Mapping[str, Any] | None, source_name: str) -> tuple[dict[str, Any], str]:
    """(name -> NumPy array, where they came from) for the weights."""
    import numpy as np

    if params is None:
        return {}, ""
    if isinstance(params, Mapping):
        return {str(k): np.asarray(v) for k, v in params.items()}, "params"
    where = str(params)
    try:
        loaded = np.load(where, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("it holds one array, not named arrays (np.savez writes a .npz)")
        with loaded as npz:
            for key in npz.files:
                problem = oversized(_npy_shape(npz.zip, key) if npz.zip is not None else ())
                if problem is not None:  # checked on the header, before NumPy allocates the array
                    raise ModelError(f"{where}: array {key!r} of the weights of {source_name}: {problem}")
            return {k: npz[k] for k in npz.files}, where
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ModelError(f"{where}: cannot read the weights of {source_name} (a .npz of arrays): {exc}") from None


def _npy_shape(archive: zipfile.ZipFile, key: str) -> tuple[int, ...]:
    """The shape in the header of array `key` of a .npz, read without reading the array (a
    member that is not a .npy file has none: NumPy hands its bytes over as they are)."""
    from numpy.lib import format as npy

    if f"{key}.npy" not in archive.namelist():
        return ()
    with archive.open(f"{key}.npy") as handle:
        version = npy.read_magic(handle)
        # formats 2.0 and 3.0 share a header layout (3.0 allows UTF-8 field names)
        read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
        shape, _fortran, _dtype = read(handle)
    return tuple(int(d) for d in shape)


@dataclass
class _Value:
    """A Relax variable: the model tensor(s) it names (several for a multi-output call)."""

    tensors: tuple[str, ...]
    is_tuple: bool = False


@dataclass
class _Main:
    """What `main` declares: parameters in order with their types, and the attrs it sets."""

    node: ast.FunctionDef
    params: list[TensorInfo] = field(default_factory=list)
    param_nodes: dict[str, ast.arg] = field(default_factory=dict)
    num_input: int | None = None


class _RelaxReader:
    def __init__(self, text: str, tree: ast.Module, source_name: str) -> None:
        self.text = text
        self.tree = tree
        self.source_name = source_name
        self.r_names = {"R"}
        self.t_names = {"T"}
        self.cls: ast.ClassDef | None = None
        self.class_aliases: set[str] = set()

    def err(self, node: ast.AST | None, message: str) -> NoReturn:
        line = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", None)
        raise ScriptError(message, line, None if col is None else col + 1, self.source_name)

    # ---- the module ----
    def model(self, arrays: dict[str, Any], npz_name: str, name: str) -> Model:
        self.cls = self._module_class()
        self.class_aliases = {self.cls.name}
        mains = [s for s in self.cls.body if isinstance(s, ast.FunctionDef) and self._is_relax_function(s)]
        if not mains:
            self.err(self.cls, f"module {self.cls.name} has no @R.function main")
        for extra in mains:
            if extra.name != "main":
                self.err(extra, f"@R.function {extra.name}: msdb reads one Relax function, main "
                                "(call the PrimFuncs from main)")
        functions = self._prim_funcs()
        main = self._main_signature(mains[0])
        return self._body(main, functions, arrays, npz_name, name)

    def _module_class(self) -> ast.ClassDef:
        classes: list[ast.ClassDef] = []
        for stmt in self.tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._note_import(stmt)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue
            elif isinstance(stmt, ast.ClassDef):
                classes.append(stmt)
            elif _is_main_guard(stmt):
                continue  # `if __name__ == "__main__":` runs only when executed, which msdb never does
            else:
                self.err(stmt, "a Relax model script holds imports and one @I.ir_module class; msdb does not run "
                               "other top-level code")
        if len(classes) != 1:
            self.err(classes[1] if len(classes) > 1 else None,
                     f"expected exactly one @I.ir_module class with an @R.function main, found {len(classes)} classes")
        return classes[0]

    def _note_import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        if isinstance(stmt, ast.ImportFrom) and stmt.module in ("tvm.script", "tvm.script.parser"):
            for alias in stmt.names:
                if alias.name == "relax":
                    self.r_names.add(alias.asname or alias.name)
                elif alias.name in ("tir", "tirx"):
                    self.t_names.add(alias.asname or alias.name)

    def _r_attr(self, node: ast.expr) -> str | None:
        """`R.a.b` -> "a.b" when the head is the Relax namespace, else None."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.r_names and rest:
            return rest
        if dotted.startswith("tvm.script.relax."):
            return dotted[len("tvm.script.relax."):]
        return None

    def _is_relax_function(self, node: ast.FunctionDef) -> bool:
        return any(self._r_attr(d.func if isinstance(d, ast.Call) else d) == "function" for d in node.decorator_list)

    def _prim_funcs(self) -> dict[str, PrimFunc]:
        """The module's PrimFuncs, parsed by msdb's TVMScript parser from the file with the Relax
        functions and every other non-TensorIR line blanked (positions stay the user's)."""
        from msdb.ir.script.parser import from_script

        assert self.cls is not None
        lines = self.text.splitlines()
        keep = [False] * len(lines)

        def mark(node: ast.stmt, value: bool) -> None:
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            for i in range(first - 1, (node.end_lineno or node.lineno)):
                keep[i] = value

        for stmt in self.tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) or stmt is self.cls:
                mark(stmt, True)
        for stmt in self.cls.body:
            if isinstance(stmt, ast.FunctionDef) and self._is_relax_function(stmt):
                mark(stmt, False)
        if not any(isinstance(s, ast.FunctionDef) and not self._is_relax_function(s) for s in self.cls.body):
            self.err(self.cls, f"module {self.cls.name} defines no @T.prim_func for main to call")
        tir_text = "\n".join(line if keep[i] else "" for i, line in enumerate(lines))
        return dict(from_script(tir_text, self.source_name).functions)

    # ---- main's signature ----
    def _main_signature(self, node: ast.FunctionDef) -> _Main:
        main = _Main(node)
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            self.err(node, "main's parameters must be plain names annotated with R.Tensor(shape, dtype)")
        for arg in args.args:
            if arg.annotation is None:
                self.err(arg, f"parameter {arg.arg!r} of main needs an annotation R.Tensor(shape, dtype)")
            if arg.arg in main.param_nodes:
                self.err(arg, f"parameter {arg.arg!r} of main is declared twice")
            shape, dtype = self._tensor_type(arg.annotation, f"parameter {arg.arg!r}")
            main.params.append(TensorInfo(arg.arg, shape, dtype))
            main.param_nodes[arg.arg] = arg
        return main

    def _tensor_type(self, node: ast.expr, what: str) -> tuple[tuple[int, ...], str]:
        """(shape, dtype) of `R.Tensor((d0, d1), "float32")` / `R.Tensor((..), dtype="float32")`."""
        if not (isinstance(node, ast.Call) and self._r_attr(node.func) == "Tensor"):
            kind = self._r_attr(node.func if isinstance(node, ast.Call) else node)
            if kind is not None:
                self.err(node, f"{what}: R.{kind} is not supported; msdb models pass tensors (R.Tensor(shape, dtype))")
            self.err(node, f"{what}: expected R.Tensor(shape, dtype)")
        shape_node: ast.expr | None = node.args[0] if node.args else None
        dtype_node: ast.expr | None = node.args[1] if len(node.args) > 1 else None
        if len(node.args) > 2:
            self.err(node.args[2], f"{what}: R.Tensor takes a shape and a dtype")
        for kw in node.keywords:
            if kw.arg == "shape":
                shape_node = kw.value
            elif kw.arg == "dtype":
                dtype_node = kw.value
            elif kw.arg in ("vdevice", "ndim"):
                self.err(kw.value, f"{what}: R.Tensor({kw.arg}=...) is not supported; give the shape and dtype")
            else:
                self.err(kw.value, f"{what}: unknown R.Tensor argument {kw.arg!r}")
        if shape_node is None:
            self.err(node, f"{what}: R.Tensor needs a static shape; msdb models have static shapes")
        shape = self._shape(shape_node, what)
        problem = oversized(shape)
        if problem is not None:
            self.err(shape_node, f"{what}: {problem}")
        if dtype_node is None:
            self.err(node, f"{what}: R.Tensor needs a dtype, e.g. R.Tensor({list(shape)}, \"float32\")")
        return shape, self._dtype(dtype_node, what)

    def _shape(self, node: ast.expr, what: str) -> tuple[int, ...]:
        if not isinstance(node, (ast.Tuple, ast.List)):
            self.err(node, f"{what}: the shape must be a tuple of whole numbers")
        dims: list[int] = []
        for dim in node.elts:
            if isinstance(dim, ast.Constant) and isinstance(dim.value, int) and not isinstance(dim.value, bool):
                if dim.value < 0:
                    self.err(dim, f"{what}: negative dimension {dim.value}")
                dims.append(dim.value)
                continue
            if isinstance(dim, ast.Call) and self._t_int(dim.func) and len(dim.args) == 1 \
                    and isinstance(dim.args[0], ast.Constant) and isinstance(dim.args[0].value, int):
                dims.append(dim.args[0].value)  # T.int64(128)
                continue
            shown = ast.unparse(dim)
            self.err(dim, f"{what}: dynamic dimension {shown}; msdb models have static shapes (bind {shown} to a "
                          "number first)")
        return tuple(dims)

    def _t_int(self, node: ast.expr) -> bool:
        dotted = _dotted(node)
        if dotted is None:
            return False
        head, _, attr = dotted.rpartition(".")
        return head in self.t_names and attr in ("int64", "int32")

    def _dtype(self, node: ast.expr, what: str) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
            return node.value
        dotted = _dotted(node)
        if dotted is not None:
            head, _, attr = dotted.rpartition(".")
            if head in self.t_names and attr:
                return attr  # T.float32
        self.err(node, f"{what}: the dtype must be a string such as \"float32\"")

    # ---- main's body ----
    def _body(self, main: _Main, functions: dict[str, PrimFunc], arrays: dict[str, Any], npz_name: str,
              name: str) -> Model:
        env: dict[str, _Value] = {p.name: _Value((p.name,)) for p in main.params}
        values: dict[str, TensorInfo] = {p.name: p for p in main.params}
        calls: list[Call] = []
        outputs: tuple[str, ...] | None = None
        stmts = [s for s in main.node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.Return):
                if i != len(stmts) - 1:
                    self.err(stmts[i + 1], "code after main's return")
                if stmt.value is None:
                    self.err(stmt, "main must return its output tensor(s)")
                outputs = self._returned(stmt.value, env)
                break
            self._statement(stmt, main, env, values, calls, functions, in_dataflow=False)
        if outputs is None:
            self.err(main.node, "main has no return statement")
        self._check_return_type(main.node, outputs, values)
        inputs, params = self._bind_params(main, arrays, npz_name)
        model = Model(name=name, inputs=inputs, outputs=outputs, functions=functions, calls=calls, values=values,
                      params=params, source=self.source_name)
        model.check()
        return model

    def _statement(self, stmt: ast.stmt, main: _Main, env: dict[str, _Value], values: dict[str, TensorInfo],
                   calls: list[Call], functions: dict[str, PrimFunc], *, in_dataflow: bool) -> None:
        if isinstance(stmt, ast.With):
            if in_dataflow:
                self.err(stmt, "R.dataflow() blocks do not nest")
            if len(stmt.items) != 1 or not isinstance(stmt.items[0].context_expr, ast.Call) \
                    or self._r_attr(stmt.items[0].context_expr.func) != "dataflow" or stmt.items[0].optional_vars:
                self.err(stmt, "main may hold only `with R.dataflow():` blocks")
            for inner in stmt.body:
                self._statement(inner, main, env, values, calls, functions, in_dataflow=True)
            return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            kind = self._r_attr(stmt.value.func)
            if kind == "output":
                if not in_dataflow:
                    self.err(stmt, "R.output(...) belongs inside `with R.dataflow():`")
                for arg in stmt.value.args:
                    self._lookup(arg, env)
                return
            if kind == "func_attr":
                self._func_attr(stmt.value, main)
                return
            self.err(stmt, f"{ast.unparse(stmt.value.func)}(...) as a statement is not supported in main")
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
            if isinstance(stmt, ast.Assign) and len(stmt.targets) != 1 or not isinstance(target, ast.Name):
                self.err(stmt, "main binds one variable per statement (`lv = R.call_tir(...)`)")
            value = stmt.value
            if value is None:
                self.err(stmt, f"{target.id} is declared without a value")
            if isinstance(value, ast.Name) and value.id in self.class_aliases:
                self.class_aliases.add(target.id)  # cls = Module
                return
            if isinstance(value, ast.Call) and self._t_int(value.func) and not value.args:
                self.err(stmt, f"symbolic shape variable {target.id}: msdb models have static shapes")
            if target.id in env:
                self.err(target, f"{target.id} is bound twice (Relax variables are bound once)")
            bound = self._value(value, target.id, stmt, env, values, calls, functions)
            if isinstance(stmt, ast.AnnAssign):
                self._check_annotation(stmt.annotation, target.id, bound, values)
            env[target.id] = bound
            return
        self.err(stmt, f"unsupported statement in main ({type(stmt).__name__}); msdb reads R.call_tir bindings, "
                       "R.output and return")

    def _func_attr(self, call: ast.Call, main: _Main) -> None:
        if len(call.args) != 1 or not isinstance(call.args[0], ast.Dict):
            self.err(call, "R.func_attr takes one dict literal")
        for key, value in zip(call.args[0].keys, call.args[0].values):
            if isinstance(key, ast.Constant) and key.value == "num_input":
                if not (isinstance(value, ast.Constant) and isinstance(value.value, int)) \
                        or not 0 <= value.value <= len(main.params):
                    self.err(value, f"num_input must be a whole number from 0 to {len(main.params)}")
                main.num_input = value.value

    def _value(self, node: ast.expr, var: str, stmt: ast.stmt, env: dict[str, _Value], values: dict[str, TensorInfo],
               calls: list[Call], functions: dict[str, PrimFunc]) -> _Value:
        if isinstance(node, ast.Name):
            return self._lookup(node, env)  # an alias: gv = lv
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            tup = self._lookup(node.value, env)
            index = node.slice
            if not tup.is_tuple or not (isinstance(index, ast.Constant) and isinstance(index.value, int)) \
                    or not 0 <= index.value < len(tup.tensors):
                self.err(node, f"{ast.unparse(node)}: index a multi-output call's result with 0..{len(tup.tensors) - 1}")
            return _Value((tup.tensors[index.value],))
        if not isinstance(node, ast.Call):
            self.err(node, f"unsupported value {ast.unparse(node)!r}; msdb reads R.call_tir(...) bindings")
        kind = self._r_attr(node.func)
        if kind == "output":
            if len(node.args) != 1:
                self.err(node, "`v = R.output(x)` takes one variable")
            return self._lookup(node.args[0], env)
        if kind == "call_tir":
            return self._call_tir(node, var, stmt, env, values, calls, functions)
        if kind is None:
            self.err(node, f"{ast.unparse(node.func)}(...) is not a Relax call msdb reads; main calls PrimFuncs "
                           "with R.call_tir")
        reason = _UNSUPPORTED_CALLS.get(kind, "msdb does not legalize high-level Relax ops; run TVM's LegalizeOps, "
                                              "FuseOps and FuseTIR and print the module, or write R.call_tir")
        self.err(node, f"R.{kind} is not supported: {reason}")

    def _call_tir(self, node: ast.Call, var: str, stmt: ast.stmt, env: dict[str, _Value], values: dict[str, TensorInfo],
                  calls: list[Call], functions: dict[str, PrimFunc]) -> _Value:
        if not node.args:
            self.err(node, "R.call_tir needs the PrimFunc, its arguments and the output type")
        fname = self._callee(node.args[0], functions)
        if len(node.args) < 2:
            self.err(node, "R.call_tir needs the arguments as a tuple, e.g. (x, w0)")
        arg_node = node.args[1]
        arg_elts = arg_node.elts if isinstance(arg_node, (ast.Tuple, ast.List)) else [arg_node]
        args: list[str] = []
        for a in arg_elts:
            v = self._lookup(a, env)
            if v.is_tuple:
                self.err(a, f"{ast.unparse(a)} is a multi-output result; pass one of its tensors ({ast.unparse(a)}[0])")
            args.append(v.tensors[0])
        out_types = self._out_types(node, fname)
        func = functions[fname]
        buffers = func.buffers
        where = f"R.call_tir({fname}, ...)"
        if len(buffers) != len(args) + len(out_types):
            self.err(node, f"{where} passes {len(args)} argument(s) and {len(out_types)} output(s), but {fname} takes "
                           f"{len(buffers)} buffers")
        for k, (buf, arg) in enumerate(zip(buffers, args)):
            info = values[arg]
            shape, dtype = _buffer_type(buf)
            if shape != info.shape or dtype != info.dtype:
                self.err(arg_elts[k], f"{where}: argument {arg!r} is {_show(info.shape, info.dtype)}, but {fname}'s "
                                      f"buffer {buf.name} is {_show(shape, dtype)}")
        tensors: list[str] = []
        many = len(out_types) > 1 or isinstance(self._out_node(node), ast.List)
        for k, ((shape, dtype, type_node), buf) in enumerate(zip(out_types, buffers[len(args):])):
            bshape, bdtype = _buffer_type(buf)
            if (shape, dtype) != (bshape, bdtype):
                self.err(type_node, f"{where}: the output type {_show(shape, dtype)} does not match {fname}'s output "
                                    f"buffer {buf.name}, {_show(bshape, bdtype)}")
            tensor = f"{var}[{k}]" if many else var
            values[tensor] = TensorInfo(tensor, shape, dtype)
            tensors.append(tensor)
        calls.append(Call(fname, tuple(args), tuple(tensors), node=f"{self.source_name}:{stmt.lineno}"))
        return _Value(tuple(tensors), is_tuple=many)

    def _callee(self, node: ast.expr, functions: dict[str, PrimFunc]) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            fname = node.value
        elif isinstance(node, ast.Name):
            fname = node.id
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.class_aliases:
            fname = node.attr
        else:
            self.err(node, f"R.call_tir's first argument must name a PrimFunc of the module (cls.f), "
                           f"not {ast.unparse(node)}")
        if fname not in functions:
            known = ", ".join(sorted(functions)) or "none"
            self.err(node, f"R.call_tir calls unknown function {fname!r} (the module's PrimFuncs: {known})")
        return fname

    def _out_node(self, node: ast.Call) -> ast.expr | None:
        if len(node.args) > 2:
            return node.args[2]
        for kw in node.keywords:
            if kw.arg in ("out_ty", "out_sinfo", "out_shape"):
                return kw.value
        return None

    def _out_types(self, node: ast.Call, fname: str) -> list[tuple[tuple[int, ...], str, ast.expr]]:
        """[(shape, dtype, node)] of the outputs, in any of the accepted call_tir forms."""
        if len(node.args) > 3:
            self.err(node.args[3], "R.call_tir takes the PrimFunc, the arguments and the output type")
        dtype_node: ast.expr | None = None
        for kw in node.keywords:
            if kw.arg == "dtype":
                dtype_node = kw.value
            elif kw.arg in ("out_ty", "out_sinfo", "out_shape"):
                if len(node.args) > 2:
                    self.err(kw.value, f"R.call_tir: the output type is given twice ({kw.arg}= and positionally)")
            elif kw.arg == "tir_vars":
                self.err(kw.value, "R.call_tir(tir_vars=...) is not supported: msdb models have static shapes")
            else:
                self.err(kw.value, f"R.call_tir: unknown argument {kw.arg!r}")
        out = self._out_node(node)
        what = f"R.call_tir({fname}, ...) output"
        if out is None:
            self.err(node, f"R.call_tir({fname}, ...) needs the output type, e.g. R.Tensor((1, 128), dtype=\"float32\")")
        if dtype_node is not None:  # the MLC course's R.call_tir(f, args, (1, 128), dtype="float32")
            return [(self._shape(out, what), self._dtype(dtype_node, what), out)]
        items = out.elts if isinstance(out, ast.List) else [out]
        if isinstance(out, ast.Tuple) and not (out.elts and isinstance(out.elts[0], ast.Call)):
            self.err(out, f"{what}: a shape needs dtype=..., or give R.Tensor(shape, dtype)")
        if isinstance(out, ast.Tuple):
            items = list(out.elts)
        if not items:
            self.err(out, f"{what}: no output type")
        result = []
        for item in items:
            shape, dtype = self._tensor_type(item, what)
            result.append((shape, dtype, item))
        return result

    def _lookup(self, node: ast.expr, env: dict[str, _Value]) -> _Value:
        if not isinstance(node, ast.Name):
            self.err(node, f"expected a variable, got {ast.unparse(node)!r}")
        value = env.get(node.id)
        if value is None:
            self.err(node, f"{node.id} is not defined before this use")
        return value

    def _returned(self, node: ast.expr, env: dict[str, _Value]) -> tuple[str, ...]:
        if isinstance(node, ast.Call) and self._r_attr(node.func) == "tuple":
            items = list(node.args)
        elif isinstance(node, ast.Tuple):
            items = list(node.elts)
        else:
            return self._lookup(node, env).tensors
        out: list[str] = []
        for item in items:
            out.extend(self._lookup(item, env).tensors)
        return tuple(out)

    def _check_annotation(self, ann: ast.expr, var: str, bound: _Value, values: dict[str, TensorInfo]) -> None:
        if bound.is_tuple:
            return
        shape, dtype = self._tensor_type(ann, f"variable {var!r}")
        info = values[bound.tensors[0]]
        if (shape, dtype) != (info.shape, info.dtype):
            self.err(ann, f"{var} is annotated {_show(shape, dtype)} but its value is {_show(info.shape, info.dtype)}")

    def _check_return_type(self, node: ast.FunctionDef, outputs: tuple[str, ...], values: dict[str, TensorInfo]) -> None:
        ret = node.returns
        if ret is None or not (isinstance(ret, ast.Call) and self._r_attr(ret.func) == "Tensor"):
            return
        shape, dtype = self._tensor_type(ret, "main's return type")
        if len(outputs) != 1 or (values[outputs[0]].shape, values[outputs[0]].dtype) != (shape, dtype):
            got = ", ".join(_show(values[o].shape, values[o].dtype) for o in outputs)
            self.err(ret, f"main is declared to return {_show(shape, dtype)} but returns {got}")

    # ---- weights ----
    def _bind_params(self, main: _Main, arrays: dict[str, Any], npz_name: str) -> tuple[tuple[TensorInfo, ...], dict[str, Any]]:
        import numpy as np

        names = [p.name for p in main.params]
        for key in arrays:
            if key not in main.param_nodes:
                raise ModelError(f"{npz_name}: array {key!r} is not a parameter of main in {self.source_name} "
                                 f"(parameters: {', '.join(names)})")
        inputs: list[TensorInfo] = []
        params: dict[str, Any] = {}
        for k, info in enumerate(main.params):
            arg = main.param_nodes[info.name]
            must_be_weight = main.num_input is not None and k >= main.num_input
            array = arrays.get(info.name)
            if array is None:
                if must_be_weight:
                    where = npz_name or f"the .npz beside {self.source_name}"
                    raise ModelError(f"{self.source_name}:{arg.lineno}: weight {info.name!r} (after num_input="
                                     f"{main.num_input}) has no array in {where}")
                inputs.append(info)
                continue
            if main.num_input is not None and k < main.num_input:
                raise ModelError(f"{self.source_name}:{arg.lineno}: {info.name!r} is one of main's num_input="
                                 f"{main.num_input} inputs, but {npz_name} gives it an array")
            if tuple(array.shape) != info.shape or str(array.dtype) != info.dtype:
                raise ModelError(f"{npz_name}: array {info.name!r} is {_show(tuple(array.shape), str(array.dtype))}, "
                                 f"but main declares it {_show(info.shape, info.dtype)} at "
                                 f"{self.source_name}:{arg.lineno}")
            params[info.name] = np.ascontiguousarray(array)
        return tuple(inputs), params


# ---------------------------------------------------------------- small helpers


def _buffer_type(buf: Any) -> tuple[tuple[int, ...], str]:
    return tuple(int(getattr(d, "value", d)) for d in buf.shape), str(buf.dtype)


def _show(shape: tuple[int, ...], dtype: str) -> str:
    return f"{dtype}{list(shape)}"


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":`"""
    test = stmt.test if isinstance(stmt, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")
