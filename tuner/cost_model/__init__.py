"""Cost models (docs/architecture.md, "Features and cost model"): how the search scores
candidates before measuring them.

- `base`: `CostModel` (subclass it to plug in one's own) and `create(kind)`: "xgb", "mlp",
  "random", "none";
- `xgb_model`: `XGBModel`, TVM's default, gradient-boosted trees over per-store features;
- `mlp_model`: `MLPModel`, a neural model ranked within workloads (PyTorch, the `mlp` extra);
- `random_model`: `RandomModel`, seeded uniform scores (TVM's baseline);
- `learning`, `training_data`: what learning models share, and records turned into training data;
- `training`, `metrics`: `train_cost_model` (`msdb train-cost-model`) and TenSet's metrics;
- `saved`: `load_cost_model`, a model file checked against the tuner that uses it (the format:
  `msdb.model_file`).

xgboost and torch are imported only when a model trains or loads.
"""

from __future__ import annotations

from msdb.model_file import CostModelFileError
from msdb.tuner.cost_model.base import CostModel, UnknownCostModel, create
from msdb.tuner.cost_model.mlp_model import MLPModel
from msdb.tuner.cost_model.random_model import RandomModel
from msdb.tuner.cost_model.saved import load_cost_model
from msdb.tuner.cost_model.training import train_cost_model
from msdb.tuner.cost_model.xgb_model import XGBConfig, XGBModel

__all__ = ["CostModel", "CostModelFileError", "UnknownCostModel", "create", "load_cost_model", "train_cost_model",
           "MLPModel", "RandomModel", "XGBModel", "XGBConfig"]
