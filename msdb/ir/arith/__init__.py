"""Integer arithmetic on IR expressions: the one implementation every part of msdb uses.

Modules `canonical`, `analyzer`, `interval`, `affine`, `limits`, `keys`, `fold`, one job each;
the names load their module on first use, so a caller that needs only intervals or keys does not
import the simplifier. `msdb.ir.arith` depends on nothing above `msdb.ir`; `msdb.hashing` may use
it, never the reverse. See docs/architecture.md, "Integer arithmetic".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msdb.lazy import lazy_getattr

if TYPE_CHECKING:
    from msdb.ir.arith.affine import Affine, Atom, affine_form, as_affine, split_linear, stride_of
    from msdb.ir.arith.analyzer import Analyzer, RangeLike, const_int_bound, simplify
    from msdb.ir.arith.fold import fold_binary, fold_cast
    from msdb.ir.arith.interval import Bound, ExprBounds, numeric_range
    from msdb.ir.arith.keys import expr_equal, expr_key
    from msdb.ir.arith.limits import int_range, value_limit, wrap

#: Public name -> the module that defines it, imported on first use.
_LAZY: dict[str, str] = {
    "Affine": "msdb.ir.arith.affine", "Atom": "msdb.ir.arith.affine", "affine_form": "msdb.ir.arith.affine",
    "as_affine": "msdb.ir.arith.affine", "split_linear": "msdb.ir.arith.affine", "stride_of": "msdb.ir.arith.affine",
    "Analyzer": "msdb.ir.arith.analyzer", "RangeLike": "msdb.ir.arith.analyzer",
    "const_int_bound": "msdb.ir.arith.analyzer", "simplify": "msdb.ir.arith.analyzer",
    "fold_binary": "msdb.ir.arith.fold", "fold_cast": "msdb.ir.arith.fold",
    "Bound": "msdb.ir.arith.interval", "ExprBounds": "msdb.ir.arith.interval",
    "numeric_range": "msdb.ir.arith.interval",
    "expr_equal": "msdb.ir.arith.keys", "expr_key": "msdb.ir.arith.keys",
    "int_range": "msdb.ir.arith.limits", "value_limit": "msdb.ir.arith.limits", "wrap": "msdb.ir.arith.limits",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
