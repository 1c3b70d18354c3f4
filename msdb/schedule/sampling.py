"""Sampling algorithms behind `sample_perfect_tile`, `sample_categorical` and friends.

They follow TVM's distributions (src/tir/schedule/primitive/sampling.cc) but draw from a
`random.Random`, so msdb's schedules are deterministic per seed without reproducing TVM's own
random engine:
- a perfect tile of `extent` into `n` factors is uniform over the ordered factorizations whose
  innermost factor is at most `max_innermost_factor` (TVM samples each prime's exponents
  uniformly over the compositions and rejects tiles with a too-large innermost factor, which
  gives the same distribution; here it is drawn directly, so no rejection loop can spin on an
  extent with a large prime factor);
- a replayed tile decision that no longer divides the extent is repaired the way TVM repairs
  it (innermost factors first, the rest absorbed by the outermost);
- a categorical choice is weighted by the given probabilities.
"""

from __future__ import annotations

import random
from functools import lru_cache
from math import comb
from typing import Sequence

__all__ = [
    "factorize", "divisors", "count_tilings", "sample_int", "sample_perfect_tile",
    "repair_perfect_tile", "sample_categorical",
]


@lru_cache(maxsize=4096)
def factorize(n: int) -> tuple[tuple[int, int], ...]:
    """Prime factorization of n >= 1 as ((prime, exponent), ...), primes increasing."""
    if n < 1:
        raise ValueError(f"cannot factorize {n}")
    out: list[tuple[int, int]] = []
    p = 2
    while p * p <= n:
        if n % p == 0:
            e = 0
            while n % p == 0:
                n //= p
                e += 1
            out.append((p, e))
        p += 1 if p == 2 else 2
    if n > 1:
        out.append((n, 1))
    return tuple(out)


def divisors(n: int) -> list[int]:
    """All positive divisors of n, increasing."""
    result = [1]
    for p, e in factorize(n):
        result = [d * p**k for d in result for k in range(e + 1)]
    return sorted(result)


def count_tilings(extent: int, n: int) -> int:
    """Number of ordered ways to write `extent` as a product of `n` positive factors."""
    if n <= 0:
        return 1 if extent == 1 else 0
    total = 1
    for _, e in factorize(extent):
        total *= comb(e + n - 1, n - 1)
    return total


def sample_int(rng: random.Random, lo: int, hi: int) -> int:
    """Uniform integer in [lo, hi)."""
    if lo >= hi:
        raise ValueError(f"empty range [{lo}, {hi})")
    return lo if lo + 1 == hi else rng.randrange(lo, hi)


def _uniform_tiling(rng: random.Random, extent: int, n: int) -> list[int]:
    """Uniform over ordered factorizations: each prime's exponent is spread over the n slots
    uniformly among its compositions (stars and bars), independently per prime."""
    result = [1] * n
    if n == 1:
        return [extent]
    for p, e in factorize(extent):
        # choose n-1 bar positions among e + n - 1 slots
        bars = sorted(rng.sample(range(e + n - 1), n - 1))
        last = -1
        for i, pos in enumerate(bars + [e + n - 1]):
            k = pos - last - 1
            last = pos
            if k:
                result[i] *= p**k
    return result


def sample_perfect_tile(rng: random.Random, extent: int, n: int, max_innermost_factor: int = -1) -> list[int]:
    """`n` factors multiplying to `extent`, the innermost <= `max_innermost_factor` (-1: no
    limit), uniform over all such factorizations."""
    if extent < 1:
        raise ValueError(f"cannot tile a loop of extent {extent}")
    if n < 1:
        raise ValueError(f"cannot tile a loop into {n} factors")
    if n == 1:
        return [extent]
    if max_innermost_factor is None or max_innermost_factor < 0:
        return _uniform_tiling(rng, extent, n)
    candidates = [d for d in divisors(extent) if d <= max_innermost_factor]
    if not candidates:
        candidates = [1]
    weights = [count_tilings(extent // d, n - 1) for d in candidates]
    innermost = rng.choices(candidates, weights=weights)[0]
    return _uniform_tiling(rng, extent // innermost, n - 1) + [innermost]


def repair_perfect_tile(extent: int, decision: Sequence[int]) -> list[int]:
    """TVM's handling of a replayed decision: walking from the innermost factor outwards, a
    factor that does not divide what is left becomes all of it, and the outermost factor takes
    the rest, so the result always multiplies to `extent`."""
    result = [int(v) for v in decision]
    left = extent
    for i in range(len(result) - 1, 0, -1):
        if result[i] <= 0 or left % result[i] != 0:
            result[i] = left
        left //= result[i]
    result[0] = left
    return result


def sample_categorical(rng: random.Random, probs: Sequence[float]) -> int:
    """An index drawn with probability proportional to `probs`."""
    weights = [float(p) for p in probs]
    if not weights or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"probabilities must be non-negative with a positive sum, got {list(probs)}")
    return rng.choices(range(len(weights)), weights=weights)[0]
