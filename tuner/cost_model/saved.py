"""Loading a trained cost model by its file (the format: `msdb.model_file`), checked against
the tuner that will use it (docs/architecture.md, "Features and cost model")."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from msdb.model_file import MODEL_FORMATS, CostModelFileError, ModelStamp, read_model_file, write_model_file

if TYPE_CHECKING:
    from msdb.records.target import Target
    from msdb.tuner.cost_model.base import CostModel
    from msdb.tuner.features.base import FeatureExtractor

__all__ = ["CostModelFileError", "ModelStamp", "load_cost_model", "model_file_summary", "read_model_file",
           "write_model_file", "MODEL_FORMATS"]


def load_cost_model(path: str | os.PathLike[str], *, target: Target | str | None = None, seed: int = 0,
                    num_threads: int = 1, extractor: FeatureExtractor | str = "per-store-feature") -> CostModel:
    """The model saved in `path` (its kind read from the file), checked against `extractor`'s
    layout and `target`'s kind before any of its numbers is used."""
    from msdb.records.target import Target
    from msdb.tuner.cost_model.base import create
    from msdb.tuner.features.base import FeatureExtractor

    name = os.fspath(path)
    meta, _ = read_model_file(name, with_arrays=False)  # the model's own `load` reads the arrays
    features = FeatureExtractor.create(extractor) if isinstance(extractor, str) else extractor
    ModelStamp.from_json(meta.get("stamp"), name).check(name, features, Target.coerce(target))
    model = create(MODEL_FORMATS[meta["format"]], seed=seed, num_threads=num_threads, extractor=features)
    assert model is not None  # a model file's kind is never "none"
    model.load(name)
    return model


def model_file_summary(path: str | os.PathLike[str]) -> str:
    """One line on what a saved model is and learned from (its kind and stamp), for a tuner
    to say which model it starts from."""
    name = os.fspath(path)
    meta, _ = read_model_file(name, with_arrays=False)
    stamp = ModelStamp.from_json(meta.get("stamp"), name)
    learned = f"trained on {stamp.records} record(s) of {stamp.workloads} workload(s)" if stamp.records else "untrained"
    if stamp.records and stamp.target_kind:
        learned += f" measured on {stamp.target_kind!r}"
    return f"{MODEL_FORMATS[meta['format']]} cost model {name}, {learned}"
