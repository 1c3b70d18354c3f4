"""msdb.ir sits below msdb.hashing (docs/architecture.md, "Which way imports point"): the
expression key and equality region inference needs live in msdb.ir.arith, and msdb.hashing
re-exports them."""

from __future__ import annotations

import ast
import pathlib

import msdb.hashing
from msdb.ir import arith

IR = pathlib.Path(__file__).resolve().parents[2] / "msdb" / "ir"


def test_no_ir_module_imports_the_hashing_package() -> None:
    offenders = []
    for path in IR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("msdb.hashing")]
    assert offenders == []


def test_hashing_reexports_the_one_expression_equality() -> None:
    assert msdb.hashing.structural_equal_expr is arith.expr_equal
