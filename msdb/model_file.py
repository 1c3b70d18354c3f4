"""Cost model files: the format, and what a trained model says about itself.

A model trained on a database (`msdb train-cost-model`) travels: published with a hub snapshot,
pulled, handed to `msdb tune --cost-model FILE`. Its numbers only mean something for the
feature layout it learned and the target kind it was measured on, so every model file carries a
`ModelStamp`, and a file whose stamp does not match the tuner that would use it is refused
(docs/architecture.md, "Features and cost model"). Files are numpy `.npz` archives without
pickles: an entry `meta` (JSON: `format`, `stamp`, the model's own fields) beside the model's
arrays. This module knows the format only (the hub checks files with it); the tuner's
`msdb.tuner.cost_model.saved.load_cost_model` makes a model of one.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from msdb.errors import MsdbError

if TYPE_CHECKING:
    from msdb.records.target import Target

__all__ = ["CostModelFileError", "ModelStamp", "read_model_file", "write_model_file", "MODEL_FORMATS"]

#: `format` of a model file -> the cost model kind that reads it.
MODEL_FORMATS = {"msdb-xgb-model-1": "xgb", "msdb-mlp-model-1": "mlp"}


class _HasLayout(Protocol):
    """A feature extractor, as far as a stamp cares."""

    def layout(self) -> str: ...


class CostModelFileError(MsdbError):
    """A cost model file that cannot be used: unreadable, not a model, or trained for another
    feature layout or target kind. The message names the file."""


@dataclass(frozen=True)
class ModelStamp:
    """What a model's numbers are about: the feature extractor's `layout()` and the target kind
    of the measurements it learned (None: it has learned nothing yet). `workloads` and
    `records` say how much it learned from."""

    features: str
    target_kind: str | None = None
    workloads: int = 0
    records: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(value: Any, path: str) -> ModelStamp:
        counts = [value.get(k) or 0 for k in ("workloads", "records")] if isinstance(value, dict) else []
        if not isinstance(value, dict) or not isinstance(value.get("features"), str) \
                or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
            raise CostModelFileError(f"{path}: the model file has no valid stamp (feature layout, target kind, "
                                     "counts)")
        kind = value.get("target_kind")
        return ModelStamp(value["features"], kind if isinstance(kind, str) else None, counts[0], counts[1])

    def check(self, path: str, extractor: _HasLayout, target: Target | None) -> None:
        """Refuse (CostModelFileError naming `path`) a model trained on other features or
        another target kind than a tuner with `extractor` and `target` would give it."""
        layout = extractor.layout()
        if layout != self.features:
            raise CostModelFileError(f"{path}: the cost model was trained on features {self.features!r}, "
                                     f"but this tuner extracts {layout!r}")
        if target is not None and self.target_kind is not None and target.kind != self.target_kind:
            raise CostModelFileError(f"{path}: the cost model was trained on {self.target_kind!r} measurements, "
                                     f"but the target is {target.kind!r} ({target})")


def write_model_file(path: str | os.PathLike[str], meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write `meta` (JSON-able, with `format` and `stamp`) and `arrays` as one .npz file,
    replacing `path` only once it is complete."""
    from msdb.staging import write_atomically

    entries: dict[str, Any] = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays}
    buffer = io.BytesIO()
    np.savez(buffer, **entries)
    write_atomically(path, buffer.getvalue())


def read_model_file(path: str | os.PathLike[str], expected_format: str | None = None, *,
                    with_arrays: bool = True) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """`(meta, arrays)` of a model file (without `with_arrays`, only `meta` is decompressed:
    what deciding which model reads the file needs); CostModelFileError naming the file when it
    is missing, not an .npz model file, or (with `expected_format`) a model of another kind."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            head = f.read(2)
    except OSError as exc:
        raise CostModelFileError(f"{name}: cannot read the cost model file ({exc.strerror or exc})") from None
    if head != b"PK":
        raise CostModelFileError(f"{name}: not a cost model file (not an .npz archive)")
    try:
        with np.load(name, allow_pickle=False) as saved:
            meta = json.loads(saved["meta"].tobytes().decode())
            arrays = {key: saved[key] for key in saved.files if key != "meta"} if with_arrays else {}
    except (ValueError, KeyError, OSError, UnicodeDecodeError, EOFError, zipfile.BadZipFile) as exc:
        raise CostModelFileError(f"{name}: not a cost model file ({type(exc).__name__}: {exc})") from None
    fmt = meta.get("format") if isinstance(meta, dict) else None
    if fmt not in MODEL_FORMATS:
        raise CostModelFileError(f"{name}: not a cost model file (format {fmt!r}; msdb writes "
                                 f"{', '.join(sorted(MODEL_FORMATS))})")
    if expected_format is not None and fmt != expected_format:
        raise CostModelFileError(f"{name}: a {MODEL_FORMATS[fmt]!r} cost model, not {MODEL_FORMATS[expected_format]!r}")
    return meta, arrays
