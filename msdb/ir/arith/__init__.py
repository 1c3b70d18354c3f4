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
"""

from __future__ import annotations

from msdb.ir.arith.affine import Affine, Atom, affine_form, as_affine, split_linear, stride_of
from msdb.ir.arith.analyzer import Analyzer, RangeLike, const_int_bound, simplify
from msdb.ir.arith.fold import fold_binary, fold_cast
from msdb.ir.arith.interval import Bound, ExprBounds, numeric_range
from msdb.ir.arith.keys import expr_equal, expr_key
from msdb.ir.arith.limits import int_range, value_limit, wrap

__all__ = [
    "Affine", "Analyzer", "Atom", "Bound", "ExprBounds", "RangeLike", "affine_form", "as_affine",
    "const_int_bound", "expr_equal", "expr_key", "fold_binary", "fold_cast", "int_range", "numeric_range",
    "simplify", "split_linear", "stride_of", "value_limit", "wrap",
]
