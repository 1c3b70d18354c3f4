"""Write `mlp.npz` beside `mlp.py`: seeded random weights for the 784-128-10 MLP (docs/architecture.md,
"Models"). The weights are 400 kB, so they are made rather than shipped; any `.npz` whose arrays
are named after main's parameters (w0, b0, w1, b1) with the declared shapes and dtypes will do.

    python examples/models/make_mlp_weights.py [--seed 0] [--out examples/models/mlp.npz]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def make_weights(seed: int = 0, hidden: int = 128) -> dict[str, np.ndarray]:
    """He-initialised weights in the MLC course's layout: W is (out, in), Z = X W^T + B."""
    rng = np.random.default_rng(seed)
    return {
        "w0": (rng.standard_normal((hidden, 784)) * np.sqrt(2 / 784)).astype("float32"),
        "b0": np.zeros(hidden, dtype="float32"),
        "w1": (rng.standard_normal((10, hidden)) * np.sqrt(2 / hidden)).astype("float32"),
        "b1": np.zeros(10, dtype="float32"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("mlp.npz"))
    args = parser.parse_args()
    np.savez(args.out, **make_weights(args.seed))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
