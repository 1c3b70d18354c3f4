"""TVMScript for msdb IR: `from_script` reads the subset TVM's printers and tutorials write,
`to_script` prints TVM 0.27-style text that reads back to a structurally equal module."""

from __future__ import annotations

from msdb.errors import ScriptError
from msdb.ir.script.parser import from_script
from msdb.ir.script.printer import to_script

__all__ = ["from_script", "to_script", "ScriptError"]
