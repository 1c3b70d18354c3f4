"""Which operators become one PrimFunc: TVM 0.27's FoldConstant + FuseOps (`fold_constants`,
`partition`), and msdb's `fold` and `packed` modes (`pack_convs`).

The partitioner is TVM's to the letter (post-dominator tree, three phases, TVM's patterns), so a
record tuned by TVM applies to msdb's compile of the same model. See docs/architecture.md,
"Models".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

import numpy as np

from msdb.model.graph import ModelError
from msdb.model.ops import OpGraph, OpNode, OpPattern

__all__ = ["Partition", "fuse_tvm", "fuse_fold", "fold_constants", "fold_batch_norm", "pack_convs", "conv_winograd_tile",
           "partition"]

#: TVM's relax.FuseOps.max_depth default (kMaxFusedOps)
MAX_FUSED_OPS = 256


@dataclass
class Partition:
    """The result of fusion.

    - `source`: the graph as imported, every op in binding order (legalization names functions
      over all of them, the folded ones included, as TVM's LegalizeOps runs before FoldConstant);
    - `graph`: the graph the groups refer to: constant-only ops evaluated into `constants`
      (and, in fold mode, batch-norms folded into the convs);
    - `folded`: the ops constant folding evaluated;
    - `groups`: the ops of each function, in binding order, the groups in call order;
    - `fused`: per group, whether TVM makes it a `fused_...` function (more than one graph node,
      a TupleGetItem included) rather than calling the op's own function.
    """

    source: OpGraph
    graph: OpGraph
    folded: list[OpNode]
    groups: list[list[OpNode]] = field(default_factory=list)
    fused: list[bool] = field(default_factory=list)


PatternOf = Callable[[OpNode], OpPattern]


def fuse_tvm(graph: OpGraph, pattern_of: PatternOf | None = None) -> Partition:
    """Group `graph`'s ops as TVM 0.27's `relax.get_pipeline("zero")` does (LegalizeOps,
    AnnotateTIROpPattern, FoldConstant, FuseOps). `pattern_of` gives an op's fusion class
    (default: `msdb.model.legalize.op_pattern`; `lower` passes TVM's analysis of the op's
    legalized PrimFunc)."""
    folded_graph, folded = fold_constants(graph)
    groups, fused = partition(folded_graph, pattern_of)
    return Partition(graph, folded_graph, folded, groups, fused)


def fuse_fold(graph: OpGraph, pattern_of: PatternOf | None = None) -> Partition:
    """Fold batch-norms into the convs before them, then group as `fuse_tvm` does: each conv is
    the anchor of one function with its bias, residual add and relu/clip epilogue."""
    return fuse_tvm(fold_batch_norm(graph), pattern_of)


def pack_convs(graph: OpGraph, winograd: bool = False) -> OpGraph:
    """msdb's `packed` mode (after `fold_batch_norm`): each conv2d with constant weights, NCHW
    layouts, groups=1 and output channels in whole blocks of `PACK_BLOCK` becomes an
    `nn.conv2d_packed` of the same data and its weights packed once, here, in NumPy
    (`pack_weight`: [F/16, C, KH, KW, 16]), so that no run pays for the layout change (TVM's
    layout-free weights, done ahead of time). The conv keeps its output tensor (NCHW), so the
    rest of the graph and the fusion are unchanged. Grouped and depthwise convs stay.

    `winograd` (`fuse="winograd"`): a packable 3x3 conv with strides and dilation 1 whose
    output splits into whole Winograd tiles (`winograd_tile`) becomes an `nn.conv2d_winograd`
    instead, its weights transformed here (`winograd_weight`)."""
    from msdb.model.legalize.conv import CONV_LAYOUTS, PACK_BLOCK, pack_weight
    from msdb.model.legalize.winograd import winograd_weight

    constants = dict(graph.constants)
    shapes = dict(graph.shapes)
    dtypes = dict(graph.dtypes)
    nodes: list[OpNode] = []
    for node in graph.nodes:
        constant = constants.get(node.inputs[1]) if node.op == "nn.conv2d" and len(node.inputs) == 2 else None
        weight = np.asarray(constant) if constant is not None else None
        packable = (weight is not None and weight.ndim == 4 and int(node.attrs.get("groups", 1)) == 1
                    and weight.shape[0] % PACK_BLOCK == 0
                    and all(node.attrs.get(key, want) == want for key, want in CONV_LAYOUTS.items()))
        if weight is None or not packable:
            nodes.append(node)
            continue
        tile = conv_winograd_tile(node, shapes, weight.shape, dtypes.get(node.inputs[0])) if winograd else None
        packed = pack_weight(weight) if tile is None else winograd_weight(weight, tile)
        name = fresh_name(constants, f"{node.inputs[1]}.{'packed' if tile is None else 'winograd'}")
        constants[name] = packed
        shapes[name], dtypes[name] = tuple(packed.shape), str(packed.dtype)
        op = "nn.conv2d_packed" if tile is None else "nn.conv2d_winograd"
        nodes.append(OpNode(op, (node.inputs[0], name), node.outputs, dict(node.attrs), node.node))
    return _rebuilt(graph, nodes, shapes, dtypes, constants)


def conv_winograd_tile(node: OpNode, shapes: dict[str, tuple[int, ...]], weight_shape: tuple[int, ...],
                       dtype: str | None, partial: bool = False) -> int | None:
    """The Winograd tile size for a conv2d node of groups 1 (`pack_convs`, and `nchwc`'s
    `msdb.model.nchwc.block_channels`), or None when it stays direct:
    not 3x3, a stride or dilation other than 1, an output that does not split into tiles (with
    `partial`, `winograd_tile`'s partial F(2, 3) tiles too), or not float32 (in float16 F(4, 3)
    measured 2.4% relative error against 0.27% direct)."""
    from msdb.model.legalize.conv import conv_padding
    from msdb.model.legalize.winograd import not_unit_step, winograd_output, winograd_tile

    if tuple(weight_shape[2:]) != (3, 3) or dtype != "float32" or not_unit_step(node.attrs) is not None:
        return None
    data = shapes.get(node.inputs[0])
    if data is None or len(data) != 4:
        return None
    before, after = conv_padding(node.attrs, node.op)
    return winograd_tile(*winograd_output(data[2], data[3], before, after), partial=partial)


# =============================================================================================
# Constant folding (TVM's FoldConstant after LegalizeOps)
# =============================================================================================


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]:
    def run(args: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        out = np.asarray(fn(args[0], args[1]))
        return [out.astype(np.result_type(args[0].dtype, args[1].dtype))]
    return run


_EVALUATE: dict[str, Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]] = {
    "add": _binary(np.add), "subtract": _binary(np.subtract), "multiply": _binary(np.multiply),
    "divide": _binary(np.divide), "maximum": _binary(np.maximum), "minimum": _binary(np.minimum),
    "reshape": lambda a, at: [a[0].reshape(tuple(at["shape"]))],
    "permute_dims": lambda a, at: [np.transpose(a[0], at.get("axes"))],
    "isnan": lambda a, at: [np.isnan(a[0])],
    "where": lambda a, at: [np.where(a[0], a[1], a[2]).astype(np.result_type(a[1].dtype, a[2].dtype))],
    "nn.relu": lambda a, at: [np.maximum(a[0], np.zeros((), a[0].dtype))],
    "concat": lambda a, at: [np.concatenate(a, axis=int(at.get("axis", 0)))],
    "matmul": lambda a, at: [np.matmul(a[0], a[1])],
    "power": _binary(np.power), "less": lambda a, at: [np.less(a[0], a[1])],
    "shape_to_tensor": lambda a, at: [np.array(at["shape"], dtype="int64")],
    "take": lambda a, at: [_take(a[0], a[1], at)],
    "broadcast_to": lambda a, at: [np.broadcast_to(a[0], tuple(at["shape"])).copy()],
    "strided_slice": lambda a, at: [_strided_slice(a[0], at)],
    "expand_dims": lambda a, at: [np.expand_dims(a[0], tuple(at["axis"]))],
    "squeeze": lambda a, at: [np.squeeze(a[0], None if at.get("axis") is None else tuple(at["axis"]))],
    "astype": lambda a, at: [a[0].astype(at["dtype"])],
    "sqrt": lambda a, at: [np.sqrt(a[0])], "tanh": lambda a, at: [np.tanh(a[0])],
    "erf": lambda a, at: [np.vectorize(math.erf, otypes=[a[0].dtype])(a[0])],
    "mean": lambda a, at: [np.mean(a[0], axis=None if at.get("axis") is None else tuple(at["axis"]),
                                   keepdims=bool(at.get("keepdims", False))).astype(a[0].dtype)],
    "split": lambda a, at: _split(a[0], at),
}


def _take(data: np.ndarray, indices: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    axis = int(attrs.get("axis", 0))
    modes: dict[str, Literal["raise", "wrap", "clip"]] = {"fast": "raise", "wrap": "wrap", "clip": "clip"}
    return np.take(data, indices, axis=axis, mode=modes[str(attrs.get("mode", "fast"))])


def _strided_slice(data: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    index = [slice(None)] * data.ndim
    for axis, begin, end, step in zip(attrs["axes"], attrs["begin"], attrs["end"], attrs["strides"]):
        index[int(axis)] = slice(int(begin), int(end), int(step))
    return data[tuple(index)].copy()


def _split(data: np.ndarray, attrs: dict[str, Any]) -> list[np.ndarray]:
    sections = attrs["indices_or_sections"]
    points = sections if isinstance(sections, int) else [int(p) for p in sections]
    return [part.copy() for part in np.split(data, points, axis=int(attrs.get("axis", 0)))]


def fold_constants(graph: OpGraph) -> tuple[OpGraph, list[OpNode]]:
    """Evaluate every op whose inputs are all constants (TVM's FoldConstant, which runs after
    legalization): its outputs join `constants` and the op leaves the graph. Returns the new
    graph and the evaluated ops."""
    constants = dict(graph.constants)
    kept: list[OpNode] = []
    folded: list[OpNode] = []
    for node in graph.nodes:
        if all(i in constants for i in node.inputs):  # shape_to_tensor reads nothing
            evaluate = _EVALUATE.get(node.op)
            if evaluate is None:
                raise ModelError(f"{graph.source or graph.name}: {node.node or node.op}: {node.op} of constants "
                                 "cannot be folded by msdb")
            values = evaluate([np.asarray(constants[i]) for i in node.inputs], dict(node.attrs))
            for name, value in zip(node.outputs, values):
                constants[name] = np.asarray(value).reshape(graph.shapes[name])
            folded.append(node)
        else:
            kept.append(node)
    return dataclasses.replace(graph, nodes=kept, constants=constants), folded


# =============================================================================================
# Batch-norm folding (fold mode)
# =============================================================================================


def fold_batch_norm(graph: OpGraph) -> OpGraph:
    """Fold each inference batch-norm that follows a conv2d (optionally through the conv's own
    bias add) into that conv: W' = W * s, b' = (b - mean) * s + beta with s = gamma/sqrt(var+eps),
    computed in float64 and stored in the weights' dtype. The result is what TVM imports from a
    conv with bias: conv2d(x, W'), reshape(b', [1, C, 1, 1]), add. A batch-norm whose conv output
    is read elsewhere, or whose parameters are not constants, stays."""
    producers = {out: node for node in graph.nodes for out in node.outputs}
    readers: dict[str, int] = {}
    for node in graph.nodes:
        for i in node.inputs:
            readers[i] = readers.get(i, 0) + 1
    for out in graph.outputs:
        readers[out] = readers.get(out, 0) + 1
    constants = dict(graph.constants)
    shapes = dict(graph.shapes)
    dtypes = dict(graph.dtypes)
    replace: dict[int, list[OpNode]] = {}  # id(bn node) -> new nodes
    drop: set[int] = set()
    for bn in graph.nodes:
        if bn.op != "nn.batch_norm" or int(bn.attrs.get("axis", 1)) != 1 or bn.attrs.get("training"):
            continue
        if any(readers.get(o, 0) for o in bn.outputs[1:]):
            continue
        data = bn.inputs[0]
        params = bn.inputs[1:]
        if not all(p in constants for p in params) or readers.get(data, 0) != 1:
            continue
        chain = _conv_chain(producers, readers, constants, data)
        if chain is None:
            continue
        conv, bias_nodes, bias = chain
        weight = np.asarray(constants[conv.inputs[1]])
        gamma, beta, mean, var = (np.asarray(constants[p], dtype=np.float64) for p in params)
        scale = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        new_weight = (weight.astype(np.float64) * scale[:, None, None, None]).astype(weight.dtype)
        old_bias = np.zeros(weight.shape[0]) if bias is None else np.asarray(bias, dtype=np.float64)
        new_bias = ((old_bias - mean) * scale + beta).astype(weight.dtype)
        w_name = fresh_name(constants, f"{conv.inputs[1]}.bn_folded")
        b_name = fresh_name(constants, f"{bn.inputs[2]}.bn_folded")
        constants[w_name], constants[b_name] = new_weight, new_bias
        shapes[w_name], dtypes[w_name] = tuple(new_weight.shape), str(new_weight.dtype)
        shapes[b_name], dtypes[b_name] = tuple(new_bias.shape), str(new_bias.dtype)
        conv_out = conv.outputs[0]
        reshaped = f"{b_name}.reshape"
        channels = new_weight.shape[0]
        shapes[reshaped], dtypes[reshaped] = (1, channels, 1, 1), dtypes[b_name]
        where = conv.node
        new_nodes = [
            OpNode("nn.conv2d", (conv.inputs[0], w_name), (conv_out,), dict(conv.attrs), where),
            OpNode("reshape", (b_name,), (reshaped,), {"shape": (1, channels, 1, 1)}, where),
            OpNode("add", (conv_out, reshaped), (bn.outputs[0],), {}, f"{where} + {bn.node}"),
        ]
        for node in (conv, *bias_nodes):
            drop.add(id(node))
        replace[id(bn)] = new_nodes
    if not replace:
        return graph
    nodes: list[OpNode] = []
    for node in graph.nodes:
        if id(node) in drop:
            continue
        nodes.extend(replace.get(id(node), [node]))
    return _rebuilt(graph, nodes, shapes, dtypes, constants)


def _rebuilt(graph: OpGraph, nodes: list[OpNode], shapes: dict[str, tuple[int, ...]],
             dtypes: dict[str, str], constants: dict[str, Any]) -> OpGraph:
    """`graph` with its ops replaced by `nodes`, keeping only the constants they (or the
    outputs) still read."""
    used = {i for n in nodes for i in n.inputs} | set(graph.outputs)
    return dataclasses.replace(graph, nodes=nodes, shapes=shapes, dtypes=dtypes,
                               constants={k: v for k, v in constants.items() if k in used})


def _conv_chain(producers: dict[str, OpNode], readers: dict[str, int], constants: dict[str, Any],
                data: str) -> tuple[OpNode, list[OpNode], np.ndarray | None] | None:
    """The conv2d feeding `data`, directly or through its bias add (add(conv, reshape(b))),
    with the ops to drop and the 1-D bias; None if the pattern does not hold."""
    node = producers.get(data)
    if node is None:
        return None
    if node.op == "nn.conv2d":
        return (node, [], None) if node.inputs[1] in constants else None
    if node.op != "add":
        return None
    conv = producers.get(node.inputs[0])
    reshape = producers.get(node.inputs[1])
    if (conv is None or conv.op != "nn.conv2d" or reshape is None or reshape.op != "reshape"
            or readers.get(conv.outputs[0], 0) != 1 or readers.get(reshape.outputs[0], 0) != 1
            or conv.inputs[1] not in constants or reshape.inputs[0] not in constants):
        return None
    bias = np.asarray(constants[reshape.inputs[0]]).reshape(-1)
    return conv, [node, reshape], bias


def fresh_name(taken: Mapping[str, Any], hint: str) -> str:
    """`hint`, or `hint_1`, `hint_2`, ... : the first name `taken` does not have."""
    name, i = hint, 0
    while name in taken:
        i += 1
        name = f"{hint}_{i}"
    return name


# =============================================================================================
# TVM's GraphPartitioner
# =============================================================================================


@dataclass(eq=False)
class _GNode:
    """A node of TVM's IndexedForwardGraph: an op, or the TupleGetItem after a multi-output op."""

    index: int
    op: OpNode | None
    pattern: OpPattern
    extern_ref: bool = False
    outputs: list[tuple["_GNode", OpPattern]] = field(default_factory=list)


@dataclass(eq=False)
class _DomNode:
    gnode: _GNode
    parent: "_DomNode | None"
    depth: int
    pattern: OpPattern


@dataclass(eq=False)
class _Group:
    pattern: OpPattern
    num_nodes: int = 1
    anchor: bool = False
    parent: "_Group | None" = None

    def root(self) -> "_Group":
        node = self
        while node.parent is not None:
            node = node.parent
        walk = self
        while walk.parent is not None and walk.parent is not node:
            nxt = walk.parent
            walk.parent = node
            walk = nxt
        return node


def _combine(a: OpPattern, b: OpPattern) -> OpPattern:
    if a > OpPattern.BROADCAST and b > OpPattern.BROADCAST:
        raise ModelError("fusion: cannot merge two complex groups (TVM's CombinePattern)")
    return max(a, b)


def _legalizer_pattern(node: OpNode) -> OpPattern:
    from msdb.model.legalize import op_pattern

    return op_pattern(node.op, node.attrs)


def _build_graph(graph: OpGraph, pattern_of: Callable[[OpNode], OpPattern]) -> tuple[list[_GNode], dict[int, int]]:
    """The forward graph in binding order; returns the nodes and op-node id -> node index."""
    nodes: list[_GNode] = []
    producer: dict[str, _GNode] = {}
    index_of: dict[int, int] = {}
    used = {i for n in graph.nodes for i in n.inputs} | set(graph.outputs)
    outputs = set(graph.outputs)
    for op in graph.nodes:
        pattern = pattern_of(op)
        gnode = _GNode(len(nodes), op, pattern)
        index_of[id(op)] = gnode.index
        for name in op.inputs:
            src = producer.get(name)
            if src is not None:
                src.outputs.append((gnode, pattern))
        nodes.append(gnode)
        if len(op.outputs) == 1:
            producer[op.outputs[0]] = gnode
            gnode.extern_ref = op.outputs[0] in outputs
            continue
        for out in op.outputs:  # one TupleGetItem per used output, right after the call
            if out not in used:
                continue
            tgi = _GNode(len(nodes), None, OpPattern.INJECTIVE, extern_ref=out in outputs)
            gnode.outputs.append((tgi, OpPattern.INJECTIVE))
            nodes.append(tgi)
            producer[out] = tgi
    return nodes, index_of


def _post_dominators(nodes: list[_GNode]) -> list[_DomNode]:
    tree: list[_DomNode | None] = [None] * len(nodes)

    def lca(lhs: _DomNode | None, rhs: _DomNode | None, pattern: list[OpPattern]) -> _DomNode | None:
        while lhs is not rhs:
            if lhs is None or rhs is None:
                return None
            if lhs.depth < rhs.depth:
                pattern[0] = max(pattern[0], rhs.pattern)
                rhs = rhs.parent
            elif rhs.depth < lhs.depth:
                pattern[0] = max(pattern[0], lhs.pattern)
                lhs = lhs.parent
            else:
                pattern[0] = max(pattern[0], lhs.pattern)
                pattern[0] = max(pattern[0], rhs.pattern)
                lhs, rhs = lhs.parent, rhs.parent
        return lhs

    for index in range(len(nodes) - 1, -1, -1):
        gnode = nodes[index]
        if gnode.extern_ref or not gnode.outputs:
            tree[index] = _DomNode(gnode, None, 1, OpPattern.OPAQUE)
            continue
        pattern = [OpPattern.ELEMWISE]
        first, edge = gnode.outputs[0]
        parent: _DomNode | None = tree[first.index]
        pattern[0] = max(pattern[0], edge)
        for out, edge in gnode.outputs[1:]:
            parent = lca(parent, tree[out.index], pattern)
            pattern[0] = max(pattern[0], edge)
        tree[index] = _DomNode(gnode, parent, parent.depth + 1 if parent else 1, pattern[0])
    return [t for t in tree if t is not None]


def partition(graph: OpGraph, pattern_of: PatternOf | None = None) -> tuple[list[list[OpNode]], list[bool]]:
    """TVM's GraphPartitioner (opt level 2, max depth 256, no argument limit) and OperatorFusor's
    call order over `graph`'s ops; returns the groups (ops in binding order, groups in call
    order) and whether each becomes a fused function."""
    nodes, index_of = _build_graph(graph, pattern_of or _legalizer_pattern)
    dom = _post_dominators(nodes)
    groups = [_Group(n.pattern, anchor=n.pattern == OpPattern.OUT_EWISE_FUSABLE) for n in nodes]

    def check_path(src: _GNode, sink: _GNode, cond: Callable[[OpPattern, bool], bool]) -> bool:
        visited: set[int] = set()

        def walk(node: _GNode) -> bool:
            if node.index in visited:
                return True
            visited.add(node.index)
            if not cond(groups[node.index].root().pattern, node is sink):
                return False
            if node is sink:
                return True
            return all(walk(out) for out, _ in node.outputs)

        return all(walk(out) for out, _ in src.outputs)

    def merge(child: _Group, parent: _Group) -> None:
        child, parent = child.root(), parent.root()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        if child.anchor:
            if parent.anchor:
                raise ModelError("fusion: two anchors in one group")
            parent.anchor = True
            parent.pattern = _combine(child.pattern, parent.pattern)

    def commit(src: _GNode, sink: _GNode) -> None:
        target = groups[sink.index]
        visited: set[int] = set()

        def walk(node: _GNode) -> None:
            if node is sink or node.index in visited:
                return
            visited.add(node.index)
            merge(groups[node.index], target)
            for out, _ in node.outputs:
                walk(out)

        walk(src)

    def count_upto_sink(src: _GNode, sink: _GNode, visited: set[int]) -> int:
        if src is sink or src.index in visited:
            return 0
        visited.add(src.index)
        return groups[src.index].num_nodes + sum(count_upto_sink(o, sink, visited) for o, _ in src.outputs)

    for phase in range(3):
        for gnode in nodes:
            dnode = dom[gnode.index]
            group = groups[gnode.index]
            if group.pattern == OpPattern.OPAQUE or dnode.parent is None:
                continue
            sink = dnode.parent.gnode
            if groups[sink.index].root().num_nodes + count_upto_sink(gnode, sink, set()) > MAX_FUSED_OPS:
                continue
            if phase == 2:
                continue  # phase 2 fuses injective ops into tuples; msdb's graphs have none
            if group.root() is groups[sink.index].root():
                continue
            if groups[sink.index].pattern == OpPattern.TUPLE:
                continue
            if group.pattern == OpPattern.OUT_EWISE_FUSABLE:
                if phase != 0:
                    continue
                if dnode.pattern == OpPattern.ELEMWISE and check_path(
                        gnode, sink, lambda kind, is_sink: kind <= OpPattern.BROADCAST):
                    commit(gnode, sink)
            elif group.pattern <= OpPattern.BROADCAST:
                if dnode.pattern <= OpPattern.INJECTIVE or dnode.pattern == OpPattern.COMM_REDUCE:
                    def cond(kind: OpPattern, is_sink: bool) -> bool:
                        if not is_sink:
                            return kind <= OpPattern.INJECTIVE
                        return kind <= OpPattern.INJECTIVE or kind in (OpPattern.COMM_REDUCE,
                                                                         OpPattern.OUT_EWISE_FUSABLE)
                    if check_path(gnode, sink, cond):
                        commit(gnode, sink)
            elif group.pattern in (OpPattern.INJECTIVE, OpPattern.TUPLE):
                if phase != 1:
                    continue
                if check_path(gnode, sink, lambda kind, is_sink: kind <= OpPattern.INJECTIVE):
                    commit(gnode, sink)
    return _call_order(graph, nodes, index_of, groups)


def _call_order(graph: OpGraph, nodes: list[_GNode], index_of: dict[int, int],
                groups: list[_Group]) -> tuple[list[list[OpNode]], list[bool]]:
    """OperatorFusor's order: groups in a depth-first topological order of group dependencies
    that follows the bindings (TopoSortByGroupDep); ops inside a group in binding order."""
    members: dict[int, list[OpNode]] = {}
    order: list[_Group] = []
    root_of: dict[str, _Group] = {}
    for op in graph.nodes:
        root = groups[index_of[id(op)]].root()
        if id(root) not in members:
            members[id(root)] = []
            order.append(root)
        members[id(root)].append(op)
        for out in op.outputs:
            root_of[out] = root
    deps: dict[int, list[_Group]] = {}
    for op in graph.nodes:
        root = groups[index_of[id(op)]].root()
        for name in op.inputs:
            producer = root_of.get(name)
            if producer is not None and producer is not root:
                deps.setdefault(id(root), []).append(producer)
    visited: set[int] = set()
    result: list[_Group] = []

    def visit(group: _Group) -> None:
        if id(group) in visited:
            return
        visited.add(id(group))
        for dep in deps.get(id(group), []):
            visit(dep)
        result.append(group)

    for group in order:
        visit(group)
    return [members[id(g)] for g in result], [g.num_nodes > 1 for g in result]
