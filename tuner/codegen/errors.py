"""Errors of the CPU code generator (a user can cause them with an unsupported program)."""

from __future__ import annotations

from msdb.errors import MsdbError


class CodegenError(MsdbError):
    """A program the CPU code generator cannot compile (unsupported construct or dtype)."""
