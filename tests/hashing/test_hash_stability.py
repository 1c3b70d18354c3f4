"""Hashes are stable: across processes and PYTHONHASHSEED values, and across msdb versions
(pinned in tests/data/golden_hashes.json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from msdb.hashing import MODES, structural_hash

from . import golden

_CHILD = """
import json, sys
sys.path.insert(0, {here!r})
import golden
print(json.dumps(golden.current_hashes(), sort_keys=True))
"""


def _hashes_in_subprocess(seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    result = subprocess.run(
        [sys.executable, "-c", _CHILD.format(here=str(golden.HERE))],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )
    return json.loads(result.stdout)


def test_hashes_are_the_same_under_other_pythonhashseeds() -> None:
    here = golden.current_hashes()
    for seed in ("0", "4242"):
        assert _hashes_in_subprocess(seed) == here, f"PYTHONHASHSEED={seed}"


def test_golden_hashes_have_not_changed() -> None:
    pinned = json.loads(golden.GOLDEN_PATH.read_text())["hashes"]
    current = golden.current_hashes()
    changed = [
        f"{key} [{mode}]: pinned {pinned[key][mode]}, now {current[key][mode]}"
        for key in sorted(pinned)
        if key in current
        for mode in MODES
        if pinned[key][mode] != current[key][mode]
    ]
    if changed:
        pytest.fail(
            "structural hashes changed:\n  " + "\n  ".join(changed) + "\n"
            "A change to the canonical walk (msdb/hashing/walk.py, anchor.py) changes the key of every "
            "stored workload: it needs a schema migration that rehashes stored workloads. If that is "
            "intended (or a zoo workload was deliberately corrected), write the migration and regenerate "
            "with `python tests/hashing/golden.py`."
        )
    missing = sorted(set(current) - set(pinned))
    assert not missing, (
        f"no pinned hash for {missing}: run `python tests/hashing/golden.py` and commit "
        "tests/data/golden_hashes.json"
    )
    assert all(key in current for key in pinned if key.startswith("sample:"))


def test_golden_file_pins_the_hand_built_matmul() -> None:
    pinned = json.loads(golden.GOLDEN_PATH.read_text())["hashes"]
    matmul = golden.load_samples().matmul()
    assert pinned["sample:matmul"] == {mode: structural_hash(matmul, mode) for mode in MODES}
