"""Inline approximations of the float32 math functions that transformers spend time in, so that
the code generator emits arithmetic LLVM vectorizes instead of a libm call per lane (GELU's
`erf`, GPT-2's `tanh`, softmax's and sigmoid's `exp`; docs/architecture.md, "The CPU code
generator").

`exp` (`EXP`): x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 in two parts, so
that n ln2 is exact: Cody and Waite's reduction), e^r = 1 + r + r^2 P(r) with P of degree 5
(fitted for msdb as below, on [-ln2/2, ln2/2] relative to e^r), times 2^n built in the exponent
bits in two halves (2^floor(n/2) 2^(n - floor(n/2))), so that results near the float32 limits
round to inf and through the denormals to 0 as libm's do. x is clamped to [-104, 88.8] first
(beyond, exp is 0 or inf in float32); NaN stays NaN. Within one float32 unit in the last place of
the correctly rounded result over the normal range (checked on a 4-million-point grid).

Each function f is odd and saturates to +-1: for |x| <= `limit`, f(x) = x P(x^2) / Q(x^2);
beyond, x is clamped to the limit (where f rounds to +-1 in float32) and the result to [-1, 1].
NaN stays NaN (ordered comparisons). The coefficients were fitted for this module by linearized
least squares on Chebyshev points of [0, limit] (P(t) - f Q(t) = 0, reweighted by 1/Q) and
checked in float32 Horner evaluation against the double-precision function on a dense grid:
erf within 4.1e-7, tanh within 4.7e-7 (absolute and relative), a few float32 units in the
last place; libm's erff and tanhf are within one or two. `tests/tuner/test_codegen_expr.py`
checks the generated code against `math.erf` and `math.tanh`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OddRational", "RATIONAL", "ExpPolynomial", "EXP"]


@dataclass(frozen=True)
class OddRational:
    """f(x) = x P(x^2) / Q(x^2) on [-limit, limit], +-1 beyond; coefficients lowest power first."""

    limit: float
    p: tuple[float, ...]
    q: tuple[float, ...]


#: The float32 functions emitted inline (others are libm calls, one per vector lane).
RATIONAL: dict[str, OddRational] = {
    "erf": OddRational(
        3.92,
        (1.1283791650312507, 0.18493265974887724, 0.05207943726888004, 0.0035486811183025047,
         0.0002830541058070797, 2.130099463065749e-06),
        (1.0, 0.4972255033267547, 0.11189695521751046, 0.014528636026380451, 0.0011158549995601355,
         3.88299148511434e-05)),
    "tanh": OddRational(
        9.0,
        (0.9999999990964203, -0.15887010367182977, 0.03140899839499853, 0.007975222133808874,
         0.0002286986039367984, 1.382547294804387e-06, 9.01619889859262e-10),
        (1.0, 0.17446319905768584, -0.04376983371651276, 0.024091644720030045, 0.001641299280983863,
         2.185135168209385e-05, 5.239701911241568e-08)),
}


@dataclass(frozen=True)
class ExpPolynomial:
    """float32 exp by range reduction (module docstring): clamp bounds, ln2 split high and low,
    and P's coefficients, lowest power first."""

    low: float
    high: float
    ln2_high: float
    ln2_low: float
    p: tuple[float, ...]


EXP = ExpPolynomial(
    -104.0, 88.8, 0.693145751953125, 1.428606765330187e-06,
    (0.5000000115468736, 0.16666666183801065, 0.04166617392020466, 0.008333408248732733,
     0.0013951687742948197, 0.00019845086055152953))
