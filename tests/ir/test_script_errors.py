"""Malformed TVMScript raises ScriptError naming the source, line and column of the offending
text (1-based), never a bare Python exception."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from msdb.errors import MsdbError, ScriptError
from msdb.ir import from_script
from msdb.ir import ScriptError as ExportedScriptError

DATA = Path(__file__).resolve().parent.parent / "data" / "tvmscript"

HEAD = '''@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
'''


def in_block(*lines: str) -> str:
    """HEAD + a loop over i with block "B" binding vi; `lines` go in the block (line 6 on)."""
    body = "".join(f"            {ln}\n" for ln in lines)
    return HEAD + "    for i in range(128):\n        with T.block(\"B\"):\n            vi = T.axis.spatial(128, i)\n" + body


CASES = [
    # (id, source, line, column, message fragment)
    ("python-syntax", HEAD + "    for i in range(128)\n        pass\n", 3, 24, "invalid Python syntax"),
    ("unknown-T-call", in_block("B[vi] = T.frobnicate(A[vi, 0])"), 6, 21, "unknown TVMScript function T.frobnicate"),
    ("unknown-T-call-statement", in_block("T.prefetch(A[vi, 0])"), 6, 13, "unknown TVMScript function T.prefetch"),
    ("remap-arity", HEAD + "    for i, j in T.grid(128, 128):\n        with T.block(\"B\"):\n            vi, vj = T.axis.remap(\"SSR\", [i, j])\n            B[vi] = A[vi, vj]\n",
     5, 22, 'kinds "SSR" has 3 letters but 2 loop variables'),
    ("remap-names", HEAD + "    for i, j in T.grid(128, 128):\n        with T.block(\"B\"):\n            vi = T.axis.remap(\"SS\", [i, j])\n            B[vi] = A[vi, 0]\n",
     5, 13, "defines 2 variables but 1 names"),
    ("remap-kind", HEAD + "    for i in range(128):\n        with T.block(\"B\"):\n            vi = T.axis.remap(\"X\", [i])\n",
     5, 31, "unknown axis kind 'X'"),
    ("remap-not-a-loop-var", in_block("vj = T.axis.remap(\"S\", [vi])"), 6, 37, "loop variables of enclosing loops"),
    ("undefined-variable", in_block("B[vi] = A[vi, k]"), 6, 27, "undefined variable 'k'"),
    ("undefined-buffer-store", in_block("C[vi] = A[vi, 0]"), 6, 13, "undefined buffer 'C'"),
    ("undefined-buffer-region", in_block("T.reads(D[vi])", "B[vi] = A[vi, 0]"), 6, 21, "undefined buffer 'D'"),
    ("store-outside-block", HEAD + "    for i in range(128):\n        B[i] = A[i, 0]\n    for i in range(128):\n        with T.block(\"B\"):\n            vi = T.axis.spatial(128, i)\n            B[vi] = A[vi, 0]\n",
     4, 9, "store to B outside a block"),
    ("store-in-root-with-blocks", HEAD + "    with T.block(\"root\"):\n        B[0] = A[0, 0]\n        for i in range(128):\n            with T.block(\"B\"):\n                vi = T.axis.spatial(128, i)\n                B[vi] = A[vi, 0]\n",
     4, 9, "store to B outside a block"),
    ("bad-dtype-param", '@T.prim_func\ndef main(A: T.Buffer((128,), "floa32")):\n    T.evaluate(0)\n', 2, 30, "unknown dtype 'floa32'"),
    ("bad-dtype-alloc", HEAD + '    C = T.alloc_buffer((4,), dtype="f32")\n', 3, 36, "unknown dtype 'f32'"),
    ("bad-dtype-cast", in_block('B[vi] = T.Cast("float33", A[vi, 0])'), 6, 28, "unknown dtype 'float33'"),
    ("non-constant-shape", in_block("C = T.alloc_buffer((vi, 4))", "B[vi] = A[vi, 0]"), 6, 33, "'vi' is neither"),
    ("float-shape", HEAD + "    C = T.alloc_buffer((4.5,))\n", 3, 25, "buffer shape must be integers"),
    ("integer-true-division", in_block("B[vi] = A[vi / 2, 0]"), 6, 23, "integer division with / is ambiguous"),
    ("wrong-index-count", in_block("B[vi] = A[vi]"), 6, 21, "has 2 dimension(s) but is indexed with 1"),
    ("store-dtype-mismatch", in_block("B[vi] = vi"), 6, 21, "stores a value of dtype int32 into float32 buffer B"),
    ("float-into-int-buffer", '@T.prim_func\ndef main(A: T.Buffer((4,), "int32")):\n    A[0] = 1.5\n', 3, 12, "cannot store the float 1.5"),
    ("param-without-annotation", "@T.prim_func\ndef main(A):\n    T.evaluate(0)\n", 2, 10, "needs an annotation"),
    ("param-bad-annotation", "@T.prim_func\ndef main(A: int):\n    T.evaluate(0)\n", 2, 13, "unsupported annotation"),
    ("init-outside-block", HEAD + "    for i in range(128):\n        with T.init():\n            B[i] = 0.0\n", 4, 9, "T.init() must be directly inside a block"),
    ("two-inits", in_block("with T.init():", "    B[vi] = 0.0", "with T.init():", "    B[vi] = 0.0"), 8, 13, "two T.init() sections"),
    ("reads-in-loop", HEAD + "    with T.block(\"B\"):\n        for i in range(128):\n            T.reads(A[i, 0])\n", 5, 13, "T.reads must be directly inside a block"),
    ("where-not-bool", in_block("T.where(vi)", "B[vi] = A[vi, 0]"), 6, 21, "T.where needs a boolean condition"),
    ("while-loop", HEAD + "    while True:\n        pass\n", 3, 5, "'while' statements are not supported"),
    ("no-function", "x = 1\n", 1, 1, "expected a @T.prim_func function"),
    ("two-functions", HEAD + "    T.evaluate(0)\n" + HEAD + "    T.evaluate(0)\n", 5, 1, "expected exactly one"),
    ("missing-decorator", "def main(A: T.Buffer((4,), \"float32\")):\n    T.evaluate(0)\n", 1, 1, "needs the @T.prim_func decorator"),
    ("bad-decorator-option", "@T.prim_func(fast=True)\ndef main(A: T.Buffer((4,), \"float32\")):\n    T.evaluate(0)\n", 1, 14, "unknown @T.prim_func option 'fast'"),
    ("class-without-ir-module", "class Mod:\n    @T.prim_func\n    def main(A: T.Buffer((4,), \"float32\")):\n        T.evaluate(0)\n", 1, 1, "needs the @I.ir_module decorator"),
    ("private-with-global-symbol", '@T.prim_func(private=True)\ndef main(A: T.Buffer((4,), "float32")):\n    T.func_attr({"global_symbol": "x"})\n    T.evaluate(0)\n', 2, 1, "must not set a global_symbol"),
    ("max-arity", in_block("B[vi] = T.max(A[vi, 0])"), 6, 21, "T.max takes 2 argument(s), got 1"),
    ("grid-arity", HEAD + "    for i, j in T.grid(128):\n        T.evaluate(0)\n", 3, 17, "T.grid has 1 extents but the loop names 2"),
    ("loop-over-list", HEAD + "    for i in [1, 2]:\n        T.evaluate(0)\n", 3, 14, "loops must iterate over"),
    ("range-step", HEAD + "    for i in range(0, 8, 2):\n        T.evaluate(0)\n", 3, 14, "steps are not supported"),
    ("pow-operator", in_block("B[vi] = A[vi, 0] ** 2"), 6, 21, "use T.pow"),
    ("compare-mixed-dtypes", in_block("B[vi] = T.if_then_else(vi < A[vi, 0], A[vi, 0], 0.0)"), 6, 36, "cannot compare int32 with float32"),
    ("and-on-ints", in_block("T.where(vi and 1)", "B[vi] = A[vi, 0]"), 6, 21, "'and' needs boolean operands"),
    ("slice-in-load", in_block("B[vi] = A[vi, 0:4]"), 6, 27, "slices are only allowed in"),
    ("axis-outside-block", HEAD + "    for i in range(128):\n        vi = T.axis.spatial(128, i)\n", 4, 14, "T.axis.spatial must be directly inside a block"),
    ("axis-arity", in_block("vj = T.axis.spatial(128)"), 6, 18, "takes a domain and a binding value"),
    ("statement-as-expression", in_block("B[vi] = T.reads(A[vi, 0])"), 6, 21, "T.reads is a statement, not an expression"),
    ("python-builtin-call", in_block("B[vi] = max(A[vi, 0], 0.0)"), 6, 21, "unknown function max"),
    ("match-buffer-non-handle", HEAD + "    C = T.match_buffer(B, (128,))\n", 3, 24, "binds a T.handle parameter"),
    ("block-name-not-string", HEAD + "    with T.block(3):\n        T.evaluate(0)\n", 3, 18, "block name must be a string"),
    ("no-realize-block", HEAD + "    with T.block(\"x\", no_realize=True):\n        T.evaluate(0)\n", 3, 34, "no_realize=True"),
    ("thread-binding-without-thread", HEAD + "    for i in T.thread_binding(4):\n        T.evaluate(0)\n", 3, 14, "needs thread="),
    ("func-attr-not-dict", HEAD + "    T.func_attr(1)\n", 3, 17, "expected a dict literal"),
    ("attr-bad-value", HEAD + "    T.func_attr({\"k\": A})\n", 3, 17, "unsupported value for attribute 'k'"),
    ("old-block-syntax", HEAD + "    with T.block([128], \"B\") as [vi]:\n        T.evaluate(0)\n", 3, 33, "pre-0.9 block syntax"),
    ("root-with-axis-via-header-misuse", HEAD + "    T.reads(A[0, 0])\n", 3, 5, "T.reads must be directly inside a block"),
    ("indented-text-columns", "    @T.prim_func\n    def main(A: T.Buffer((128,), 'float32')):\n        A[0] = x\n", 3, 16, "undefined variable 'x'"),
]


@pytest.mark.parametrize("case_id, source, line, column, fragment", CASES, ids=[c[0] for c in CASES])
def test_malformed_script_reports_where(case_id: str, source: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(ScriptError) as info:
        from_script(source, f"{case_id}.py")
    err = info.value
    assert fragment in err.reason
    assert (err.line, err.column) == (line, column), str(err)
    assert err.source_name == f"{case_id}.py"
    assert str(err).startswith(f"{case_id}.py:{line}:{column}: ")


def test_script_error_is_an_msdb_error() -> None:
    assert ExportedScriptError is ScriptError and issubclass(ScriptError, MsdbError)
    with pytest.raises(MsdbError):
        from_script("")


def test_non_text_input() -> None:
    with pytest.raises(ScriptError, match="expected TVMScript text"):
        from_script(b"@T.prim_func")  # type: ignore[arg-type]


def test_default_source_name() -> None:
    with pytest.raises(ScriptError) as info:
        from_script("x = (")
    assert str(info.value).startswith("<script>:1:")


_TOKENS = ["T.", "(", ")", "[", "]", ",", ":", "0", "1.5", "-", "i", "vi", "A", '"x"', "T.int64(", "and",
           "not", "==", "//", "%", "T.axis.remap(", "True", "None", "*", "lambda x: x", "...", "**", "[]",
           "{}", "T.Buffer", "T.grid(", "x.y", "A[:]", "A[::2]", "\n", "    ", "@", "yield", "*a"]


@pytest.mark.slow
def test_mutated_scripts_fail_only_with_script_errors() -> None:
    """Seeded random edits of real scripts: each either parses (and then round-trips) or raises
    ScriptError; nothing else escapes."""
    from msdb.ir import to_script

    texts = [p.read_text() for p in sorted(DATA.glob("*/*.py"))]
    rng = random.Random(20240611)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(400):
        lines = rng.choice(texts).split("\n")
        k = rng.randrange(len(lines))
        line = lines[k]
        a = rng.randrange(len(line) + 1)
        b = min(len(line), a + rng.randrange(0, 8))
        lines[k] = line[:a] + (rng.choice(_TOKENS) if rng.random() < 0.7 else "") + line[b:]
        source = "\n".join(lines)
        try:
            mod = from_script(source, "mutant.py")
        except ScriptError as err:
            assert str(err).startswith("mutant.py")
            outcomes["error"] += 1
            continue
        text = to_script(mod)
        assert to_script(from_script(text)) == text
        outcomes["ok"] += 1
    assert outcomes["ok"] > 20 and outcomes["error"] > 200
