"""What every builder and runner shares (docs/architecture.md, "Measurement"): `close` and the
context manager, written once; `Builder` and `Runner` derive from `Closeable`."""

from __future__ import annotations

from typing import Any, Self

__all__ = ["Closeable"]


class Closeable:
    """`close()` releases what the object holds (worker processes, a cluster connection, staged
    artifacts); `with obj:` closes it on the way out. Closing twice is harmless."""

    def close(self) -> None:
        """Release what this object holds (nothing here)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
