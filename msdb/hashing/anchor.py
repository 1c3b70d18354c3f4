"""The anchor block of a module and the token stream of it in its loop context.

MetaSchedule's `anchor-block` equality lets one tuning record serve every fusion of the same
heavy operator: matmul, matmul+bias, matmul+relu and matmul+bias+relu of one shape are tuned once.
The anchor is the reduction that dominates the work (TVM's rule, docs/tvm-formats.md
section 3): in the entry function, the blocks that have an `init`; none -> no anchor (the caller
falls back to ignore-tensor on the whole module); one -> that block; several -> the one whose
top-level loop nest (the statement directly under the root block that contains it) has the most
estimated FLOPs, the first in program order winning a tie.

The anchor's stream covers what a schedule of it depends on: the loops around it (extents, kinds,
thread tags, annotations), its iter values and predicate, its iter vars, init, body, allocations
and annotations, and the declarations (shape, dtype, scope, ...) of the buffers it touches,
numbered at first use. Sibling blocks and the function signature are left out on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass

from msdb.ir import stmt as S
from msdb.ir.flops import estimate_flops
from msdb.ir.function import IRModule, PrimFunc
from msdb.hashing.walk import TokenWriter, write_block_realize, write_loop_header


@dataclass(frozen=True)
class AnchorSite:
    """An anchor candidate: its realize, the loops around it (outermost first) and the top-level
    statement under the root block that contains it."""

    realize: S.BlockRealize
    loops: tuple[S.For, ...]
    top: S.Stmt


def entry_function(mod: IRModule | PrimFunc) -> PrimFunc | None:
    """The entry function: attr `tir.is_entry_func`, else "main", else the only one."""
    if isinstance(mod, PrimFunc):
        return mod
    if not isinstance(mod, IRModule):
        raise TypeError(f"expected an IRModule or a PrimFunc, got {type(mod).__name__}")
    try:
        return mod.main
    except KeyError:
        return None


def _top_level_statements(func: PrimFunc) -> tuple[S.Stmt, ...]:
    body = func.body
    if isinstance(body, S.BlockRealize) and not body.block.iter_vars:
        body = body.block.body  # the root block: its children are the top-level nests
    if isinstance(body, S.SeqStmt):
        return body.seq
    return (body,)


def reduction_sites(func: PrimFunc) -> list[AnchorSite]:
    """Every block with an `init`, in program (pre-)order, with its loop context."""
    sites: list[AnchorSite] = []
    for top in _top_level_statements(func):
        _collect(top, (), top, sites)
    return sites


def _collect(stmt: S.Stmt | None, loops: tuple[S.For, ...], top: S.Stmt, sites: list[AnchorSite]) -> None:
    # Recursion depth is the nesting depth of the IR (tens), never its size.
    if stmt is None:
        return
    if isinstance(stmt, S.For):
        _collect(stmt.body, loops + (stmt,), top, sites)
    elif isinstance(stmt, S.SeqStmt):
        for child in stmt.seq:
            _collect(child, loops, top, sites)
    elif isinstance(stmt, S.BlockRealize):
        block = stmt.block
        if block.init is not None:
            sites.append(AnchorSite(stmt, loops, top))
        _collect(block.init, loops, top, sites)
        _collect(block.body, loops, top, sites)
    elif isinstance(stmt, S.Block):
        _collect(stmt.init, loops, top, sites)
        _collect(stmt.body, loops, top, sites)
    elif isinstance(stmt, S.IfThenElse):
        _collect(stmt.then_case, loops, top, sites)
        _collect(stmt.else_case, loops, top, sites)
    elif isinstance(stmt, S.LetStmt):
        _collect(stmt.body, loops, top, sites)


def locate_anchor(mod: IRModule | PrimFunc) -> AnchorSite | None:
    """The anchor block's site, or None when the entry function has no reduction block."""
    func = entry_function(mod)
    if func is None:
        return None
    sites = reduction_sites(func)
    if not sites:
        return None
    if len(sites) == 1:
        return sites[0]
    best: AnchorSite | None = None
    best_flops = -1
    flops_of_top: dict[int, int] = {}
    for site in sites:
        key = id(site.top)
        if key not in flops_of_top:
            flops_of_top[key] = nest_flops(site.top)
        flops = flops_of_top[key]
        if flops > best_flops:  # strict: the first of equals wins
            best, best_flops = site, flops
    return best


def find_anchor_block(mod: IRModule | PrimFunc) -> S.Block | None:
    """The anchor block of `mod` (see the module docstring), or None when it has no reduction."""
    site = locate_anchor(mod)
    return None if site is None else site.realize.block


def anchor_tokens(mod: IRModule | PrimFunc) -> list[str] | None:
    """The anchor block's token stream (tensor-ignoring), or None when there is no anchor."""
    site = locate_anchor(mod)
    if site is None:
        return None
    w = TokenWriter(ignore_tensor=True)
    w.out.append("Anchor%d" % len(site.loops))
    for loop in site.loops:
        write_loop_header(w, loop)
    write_block_realize(w, site.realize)
    return w.out


def nest_flops(top: S.Stmt) -> int:
    """Estimated FLOPs of one top-level statement (TVM's counting rules, `msdb.ir.flops`)."""
    return int(estimate_flops(top))
