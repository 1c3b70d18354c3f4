"""Integer arithmetic on IR expressions: the one implementation every part of msdb uses
(docs/architecture.md, "Integer arithmetic").

- `canonical`: the canonical form (TVM's) and the simplifier that produces it;
- `analyzer`: the entry points `simplify`, `const_int_bound` and `Analyzer` (ranges, proofs);
- `interval`: integer intervals and the bounds of expressions (`ExprBounds`, `numeric_range`);
- `affine`: affine forms of index expressions (`Affine`, `affine_form`, `as_affine`, `stride_of`,
  `split_linear`);
- `limits`: the value range of each dtype, wrap-around, largest floats;
- `keys`: structural equality and keys of expressions within one function (`expr_equal`,
  `expr_key`);
- `fold`: constant folding with TVM's semantics (`fold_binary`, `fold_cast`).

`msdb.ir.arith` depends on nothing above `msdb.ir`; `msdb.hashing` may use it, never the reverse.
The names below load their module on first use, so a caller that needs only intervals or keys
(the hash, the FLOP estimator) does not import the simplifier.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from msdb.ir.arith.affine import Affine, Atom, affine_form, as_affine, split_linear, stride_of
    from msdb.ir.arith.analyzer import Analyzer, RangeLike, const_int_bound, simplify
    from msdb.ir.arith.fold import fold_binary, fold_cast
    from msdb.ir.arith.interval import Bound, ExprBounds, numeric_range
    from msdb.ir.arith.keys import expr_equal, expr_key
    from msdb.ir.arith.limits import int_range, value_limit, wrap

_HOME = {
    "Affine": "affine", "Atom": "affine", "affine_form": "affine", "as_affine": "affine",
    "split_linear": "affine", "stride_of": "affine",
    "Analyzer": "analyzer", "RangeLike": "analyzer", "const_int_bound": "analyzer", "simplify": "analyzer",
    "fold_binary": "fold", "fold_cast": "fold",
    "Bound": "interval", "ExprBounds": "interval", "numeric_range": "interval",
    "expr_equal": "keys", "expr_key": "keys",
    "int_range": "limits", "value_limit": "limits", "wrap": "limits",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    try:
        module = _HOME[name]
    except KeyError:
        raise AttributeError(f"module 'msdb.ir.arith' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"msdb.ir.arith.{module}"), name)
    globals()[name] = value
    return value
