"""Cost models (docs/architecture.md, "Tuner"): how the search scores candidates before
measuring them.

- `base`: `CostModel` (subclass it to plug in one's own) and `create(kind)`;
- `xgb_model`: `XGBModel`, TVM's default, gradient-boosted trees over per-store features, and
  `pretrain` from a database's records;
- `random_model`: `RandomModel`, seeded uniform scores (TVM's baseline).

xgboost itself is imported only when a model trains or loads.
"""

from __future__ import annotations

from msdb.tuner.cost_model.base import CostModel, UnknownCostModel, create
from msdb.tuner.cost_model.random_model import RandomModel
from msdb.tuner.cost_model.xgb_model import XGBConfig, XGBModel

__all__ = ["CostModel", "UnknownCostModel", "create", "RandomModel", "XGBModel", "XGBConfig"]
