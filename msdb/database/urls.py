"""Database locations: what a path or SQLAlchemy URL names (its file, whether it asks for
read-only access), the URL a read-only open connects with, and a URL fit for messages. Below
both opening (`msdb.database.location`) and the SQL database class, so neither imports the
other for it (docs/architecture.md, "Databases")."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote

from sqlalchemy.engine import URL, make_url

__all__ = ["redact", "resolve_url", "read_only_url", "writable"]


def redact(location: str) -> str:
    """A URL with its password hidden (error messages end up in logs and bug reports)."""
    if "://" not in location:
        return location
    try:
        return make_url(location).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given
        return location


def resolve_url(path_or_url: str | os.PathLike[str]) -> tuple[str, Path | None, bool]:
    """(SQLAlchemy URL, file path or None, whether the URL itself asks for read-only access).
    Plain paths become sqlite URLs; an SQLite URI filename (`sqlite:///file:PATH?...&uri=true`)
    names its file too, and is read-only when it says `mode=ro` or `immutable=1`."""
    text = os.fspath(path_or_url)
    if "://" not in text:
        path = Path(text).expanduser().resolve()
        return f"sqlite:///{path}", path, False
    url = make_url(text)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return text, None, False
    if not url.database.startswith("file:"):
        return text, Path(url.database).expanduser().resolve(), False
    name, _, params = url.database[len("file:"):].partition("?")
    options = dict(parse_qsl(params))
    options.update({key: str(value) for key, value in url.query.items()})
    read_only = options.get("mode") == "ro" or options.get("immutable", "0").lower() not in ("0", "false", "no", "off")
    name = unquote(name)
    if name.startswith("//"):  # file://HOST/PATH: only an empty host or localhost is allowed
        name = "/" + name[2:].partition("/")[2]
    if not name or name == ":memory:" or options.get("mode") == "memory":
        return text, None, read_only
    return text, Path(name).expanduser().resolve(), read_only


def writable(path: Path) -> bool:
    """Whether this process may write `path` and create files beside it (what SQLite needs to
    read a WAL database without `immutable=1`)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def read_only_url(url: str, path: Path | None, immutable: bool) -> URL | str:
    """The URL a read-only open connects with: the file as an SQLite URI with `mode=ro` (and
    `immutable=1`), keeping the other query options of `url`; other URLs unchanged."""
    if path is None or make_url(url).get_backend_name() != "sqlite":
        return url
    parsed = make_url(url)
    query = {key: value for key, value in parsed.query.items() if key not in ("mode", "immutable", "uri")}
    query.update({"mode": "ro", "uri": "true"})
    if immutable:
        query["immutable"] = "1"
    return URL.create(parsed.drivername, database="file:" + quote(str(path), safe="/"), query=query)
