"""Names for people of workloads that arrive without one.

TVM logs carry no workload names (a workload line is only `[shash, payload]`), yet `msdb ls`
should say "GMM" rather than a hash. A workload that is structurally equal to an entry of
msdb's zoo (TVM's te_workload set at index 0, plus the small MLP layers) is named after it;
any other gets the name of its anchor block (the reduction that dominates the FLOPs), else of
its last block, e.g. "conv2d_nhwc".
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from msdb.ir.function import IRModule

__all__ = ["workload_name", "zoo_names_by_hash"]

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def zoo_names_by_hash() -> dict[str, str]:
    """Structural hash -> zoo name, for index 0 of every zoo entry (built once per process,
    about a third of a second, only when a new workload needs a name)."""
    from msdb.hashing import structural_hash
    from msdb.ir import zoo

    out: dict[str, str] = {}
    for name in zoo.names():
        try:
            out.setdefault(structural_hash(zoo.workload(name)), name)
        except Exception as exc:  # noqa: BLE001 - a zoo entry that fails only loses its name
            logger.debug("zoo workload %s not hashed: %s", name, exc)
    return out


def workload_name(mod: IRModule, shash: str) -> str | None:
    """A readable name for `mod` (see the module docstring); None when it has no block."""
    name = zoo_names_by_hash().get(shash)
    if name is not None:
        return name
    from msdb.hashing import find_anchor_block

    try:
        anchor = find_anchor_block(mod)
    except Exception:  # noqa: BLE001 - naming is best effort
        anchor = None
    if anchor is not None:
        return anchor.name_hint
    return _last_block_name(mod)


def _last_block_name(mod: IRModule) -> str | None:
    from msdb.ir import stmt as S
    from msdb.ir.functor import post_order_visit

    names: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, S.Block) and node.name_hint != "root":
            names.append(node.name_hint)

    try:
        post_order_visit(mod.main.body, visit)
    except Exception:  # noqa: BLE001 - naming is best effort
        return None
    return names[-1] if names else None
