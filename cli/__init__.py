"""The `msdb` command line (click). Thin: parse options, call one library function, print
(docs/architecture.md, "Command line"). The console script is `msdb.cli.main:cli`."""

from __future__ import annotations

__all__: list[str] = []
