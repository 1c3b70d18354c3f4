"""The hub (docs/architecture.md, "Hub"): a team's database as a website other machines browse
and pull from, on datasette.

- `serve`: `msdb serve` (datasette with msdb's metadata, canned queries and plugin);
- `metadata`, `canned`, `plugin`: what datasette shows and how;
- `publish`: a read-only, provenance-free snapshot with a manifest (and pretrained cost models);
- `pull`: incremental, resumable sync from a hub's JSON API into a local database (and its models);
- `remote`: `RemoteDatabase`, a read-only `Database` view of a hub.

Names load on first use (`import msdb.hub` does not import datasette). The commands' functions
are imported from their modules (`from msdb.hub.publish import publish`): a package attribute of
the same name as a submodule would be replaced by the module once it is imported.
"""

from __future__ import annotations

from msdb.lazy import lazy_getattr

from typing import Any

#: name -> (module, attribute), imported on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "build_datasette": ("msdb.hub.serve", "build_datasette"),
    "build_metadata": ("msdb.hub.metadata", "build_metadata"),
    "RemoteDatabase": ("msdb.hub.remote", "RemoteDatabase"),
    "HubClient": ("msdb.hub.client", "HubClient"),
    "HubError": ("msdb.hub.client", "HubError"),
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
