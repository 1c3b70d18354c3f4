"""The pinned hashes in tests/data/golden_hashes.json: how they are computed and regenerated.

Stored workloads are keyed by these hashes, so they must never drift by accident. Regenerate
(`python tests/hashing/golden.py`) only together with a schema migration that rehashes stored
workloads, or when a zoo workload was deliberately corrected.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
GOLDEN_PATH = HERE.parent / "data" / "golden_hashes.json"
ZOO_NAMES = ("GMM", "C2D", "SFM", "linear0")
SAMPLE_NAMES = ("matmul", "matmul_bias_relu", "conv2d_nhwc", "relu", "softmax", "two_reductions")


def load_samples() -> ModuleType:
    """tests/hashing/ir_samples.py loaded by path (works from pytest, a script or a subprocess)."""
    spec = importlib.util.spec_from_file_location("msdb_hashing_ir_samples", HERE / "ir_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def zoo_available() -> bool:
    try:
        from msdb.ir import zoo
    except ImportError:
        return False
    return all(name in zoo.names() for name in ZOO_NAMES)


def current_hashes() -> dict[str, dict[str, str]]:
    """{"sample:<name>" or "zoo:<name>": {mode: hash}} as the code computes them now."""
    from msdb.hashing import MODES, structural_hash

    samples = load_samples()
    modules = {f"sample:{name}": samples.SAMPLES[name]() for name in SAMPLE_NAMES}
    if zoo_available():
        from msdb.ir import zoo

        modules.update({f"zoo:{name}": zoo.workload(name) for name in ZOO_NAMES})
    return {key: {mode: structural_hash(mod, mode) for mode in MODES} for key, mod in modules.items()}


def write_golden() -> None:
    document = {
        "about": "Pinned msdb structural hashes. A change means the canonical walk changed: that is a "
        "schema migration that rehashes stored workloads. Regenerate with python tests/hashing/golden.py.",
        "hashes": current_hashes(),
    }
    GOLDEN_PATH.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    write_golden()
