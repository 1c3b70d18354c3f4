"""Index maps: the `lambda i, j: (...)` that TransformLayout applies to a buffer's indices and
TransformBlockLayout to a block's iter vars (docs/architecture.md, "Schedules and traces").

A trace records a map as TVM's object graph in JSON (`{"root_index": ..., "nodes": [...]}`).
Variables of the map other than its parameters name sampled variables of the trace (TVM's
tensor-core rule writes `i0 // 16 // (v27 * v28)`); replay binds them to their values.

`IndexMap.shape` follows TVM's `IndexMap::MapShape` for maps whose outputs start at 0 (every map
a schedule rule writes): each output's extent is its largest value plus one.
`IndexMap.inverse` covers the bijective affine maps TransformBlockLayout receives (parameters
fused in mixed radix, `n * 3136 + h * 56 + w`): each parameter becomes `(y // stride) % extent`,
the outermost without the `% extent`, and a unit-extent parameter 0 (its own output `y` when it
is one: a 1x1 conv's `lambda co, rh, rw, rc: (rh, rw, co, rc)`).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from msdb.errors import ScheduleError
from msdb.ir import expr as E
from msdb.ir.arith import const_int_bound, simplify, split_linear
from msdb.ir.functor import free_vars, substitute
from msdb.schedule.index_map_json import decode_index_map, encode_index_map

__all__ = ["IndexMap", "rename_free_vars"]


@dataclass(frozen=True, eq=False)
class IndexMap:
    """`lambda *initial: final`."""

    initial: tuple[E.Var, ...]
    final: tuple[E.PrimExpr, ...]

    @staticmethod
    def from_json(text: str) -> IndexMap:
        """The map TVM serialized as `text` (ScheduleError naming what is wrong)."""
        initial, final = decode_index_map(text)
        return IndexMap(tuple(initial), tuple(final))

    @staticmethod
    def from_function(fn: Callable[..., Any], op: str = "index map") -> IndexMap:
        """The map `fn` computes (`lambda i, j: (i // 16, j // 16, i % 16, j % 16)`), its
        parameters named as `fn` names them."""
        try:
            names = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            raise ScheduleError(f"{op}: the index map must be a function of the indices, an IndexMap or the JSON "
                                f"a trace records, got {fn!r}") from None
        params = tuple(E.Var(name, "int32") for name in names)
        try:
            out = fn(*params)
            outputs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            return IndexMap(params, tuple(E.convert(o, "int32") for o in outputs))
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise ScheduleError(f"{op}: the index map must compute integer expressions of its parameters and "
                                f"constants (a sampled variable goes in through the JSON a trace records): {exc}") from None

    def to_json(self, *, pretty: bool = False) -> str:
        """The map as a trace records it (TVM's object graph; `pretty` as TransformBlockLayout
        records it); ScheduleError for an output that is not integer arithmetic."""
        return encode_index_map(self.initial, self.final, sampled=self.free_vars(), pretty=pretty)

    def free_vars(self) -> list[E.Var]:
        """Variables of the outputs that are not parameters (sampled variables in a trace), in
        first-use order; a map may hold several Vars of one name."""
        params = set(self.initial)
        found: dict[E.Var, None] = {}
        for expr in self.final:
            found.update((v, None) for v in free_vars(expr) if v not in params)
        return list(found)

    def bind(self, values: Mapping[str, int]) -> IndexMap:
        """The map with each free variable replaced by the value `values` gives its name; a free
        variable without one is an error."""
        vmap: dict[E.Var, E.PrimExpr] = {}
        for var in self.free_vars():
            if var.name not in values:
                raise ScheduleError(f"index map: variable {var.name!r} is neither a parameter nor a sampled "
                                    "variable of the trace")
            vmap[var] = E.IntImm(var.dtype, int(values[var.name]))
        if not vmap:
            return self
        return IndexMap(self.initial, tuple(substitute(e, vmap) for e in self.final))

    def apply(self, indices: Sequence[E.PrimExpr]) -> list[E.PrimExpr]:
        """The outputs for these inputs, simplified without knowing the inputs' ranges (TVM's
        `MapIndices`)."""
        if len(indices) != len(self.initial):
            raise ScheduleError(f"index map takes {len(self.initial)} indices, got {len(indices)}")
        vmap = dict(zip(self.initial, indices))
        return [simplify(substitute(e, vmap)) for e in self.final]

    def shape(self, extents: Sequence[E.PrimExpr | int]) -> list[E.PrimExpr]:
        """The extents of the outputs as each input runs over [0, extent)."""
        if len(extents) != len(self.initial):
            raise ScheduleError(f"index map takes {len(self.initial)} indices, the shape has {len(extents)} dimensions")
        ranges: dict[E.Var, E.Range] = {}
        for var, extent in zip(self.initial, extents):
            ranges[var] = E.Range(E.IntImm(var.dtype, 0), E.convert(extent, var.dtype))
        out: list[E.PrimExpr] = []
        for expr in self.final:
            lo, hi = const_int_bound(expr, ranges)
            if lo != 0:
                raise ScheduleError(f"index map: output {expr} starts at {lo}, not 0; msdb maps only onto "
                                    "indices that start at 0")
            dtype = expr.dtype if expr.dtype.startswith("int") else "int32"
            out.append(E.IntImm(dtype, hi + 1))
        return out

    def inverse(self, extents: Sequence[int]) -> IndexMap:
        """The inverse over inputs in [0, extents), for a bijective affine map (see the module
        docstring); ScheduleError for any other map."""
        ext = dict(zip(self.initial, extents))
        new_vars = tuple(E.Var(f"y{i}", e.dtype if e.dtype.startswith("int") else "int32")
                         for i, e in enumerate(self.final))
        ranges = {v: E.Range(E.IntImm(v.dtype, 0), E.IntImm(v.dtype, n)) for v, n in ext.items()}
        inverse: dict[E.Var, E.PrimExpr] = {v: E.IntImm(v.dtype, 0) for v, n in ext.items() if n == 1}
        for y, expr in zip(new_vars, self.final):
            if isinstance(expr, E.Var) and expr in ext and ext[expr] == 1:
                inverse[expr] = y  # an output of its own keeps even a one-value parameter
                continue
            split = split_linear(expr, ranges)
            if split is None or (split[1] is not None and E.const_int(simplify(split[1])) not in (0, None)):
                raise ScheduleError(f"index map output {expr} is not a sum of the parameters times constants; "
                                    "msdb inverts only such maps")
            terms = sorted(((c, v) for v, c in split[0].items() if c != 0 and ext[v] > 1),
                           key=lambda t: -t[0])
            stride = 1
            for coef, var in reversed(terms):
                if coef != stride:
                    raise ScheduleError(f"index map output {expr} does not fuse its parameters without gaps or overlaps "
                                        "(not bijective)")
                stride *= ext[var]
            for k, (coef, var) in enumerate(terms):
                if var in inverse:
                    raise ScheduleError(f"index map uses parameter {var.name!r} in more than one output (not bijective)")
                part: E.PrimExpr = y if coef == 1 else E.FloorDiv(y, E.IntImm(y.dtype, coef), y.dtype)
                if k > 0:
                    part = E.FloorMod(part, E.IntImm(y.dtype, ext[var]), y.dtype)
                inverse[var] = part
        missing = [v.name for v in self.initial if v not in inverse]
        if missing:
            raise ScheduleError(f"index map drops parameter(s) {missing} (not bijective)")
        return IndexMap(new_vars, tuple(inverse[v] for v in self.initial))

    def as_lambda(self) -> str:
        """TVM's print: `lambda v_i, v_k: (v_i, v_k,)`."""
        from msdb.ir.script.printer import expr_text

        params = ", ".join(v.name for v in self.initial)
        outputs = "".join(expr_text(e) + ", " for e in self.final).rstrip(" ")
        return f"lambda {params}: ({outputs})"


def rename_free_vars(text: str, names: Mapping[str, str]) -> str:
    """The serialized map `text` with each variable named by a key of `names` renamed to its
    value (a trace renames its sampled variables when written); every other byte of TVM's
    compact JSON is kept."""
    if not names:
        return text
    graph = json.loads(text)
    nodes = graph["nodes"]
    root = nodes[graph["root_index"]]
    params = set(nodes[root["data"]["initial_indices"]]["data"]) if root.get("type") == "tirx.IndexMap" else set()
    for index, node in enumerate(nodes):
        if index in params:
            continue  # a parameter that happens to share a sampled variable's name
        if node.get("type") in ("ir.Var", "tirx.Var") and isinstance(node.get("data"), dict):
            name_node = nodes[node["data"]["name"]]
            if name_node.get("data") in names:
                nodes[node["data"]["name"]] = {"type": "ffi.String", "data": names[name_node["data"]]}
    return json.dumps(graph, separators=(",", ":"))
