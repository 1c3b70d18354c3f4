"""msdb: a SQLite-backed, TVM-compatible tuning database and record-sharing hub.

Importing this package stays cheap (DESIGN.md section 11: < 300 ms): subpackages load on first
use, and llvmlite, xgboost, pycuda and datasette only inside the modules that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
