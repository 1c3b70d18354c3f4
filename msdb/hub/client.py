"""Reading a hub over HTTP: datasette's JSON API with the standard library only (`msdb.hub.pull`,
`msdb.hub.remote`).

Every failure a hub can cause (down, slow, an HTML page or JSON of the wrong shape where
datasette's JSON was expected, a served file that does not match its manifest) is one
`HubError` naming the hub's URL and what to check. Rows come back as dicts; datasette's
`{"$base64": true, "encoded": ...}` spelling of BLOBs is decoded to bytes.

A hub is not trusted to end what it sends (docs/architecture.md, "Hub"): every request has a
wall-clock deadline (`timeout_s`, for the whole request: connecting, the headers and the body;
a hub trickling a byte a second is cut there, not only one that stops), a body is read in
chunks up to `MAX_RESPONSE_BYTES` (a bigger `Content-Length` is refused before reading, an
endless body is cut at the limit), and `all_rows` follows a table's pages only while its ids
advance, up to `MAX_TABLE_ROWS` rows. So what a pull holds is bounded by one response, whatever
the hub sends. A file a manifest names (a cost model) is streamed to disk by `download`,
up to the size the manifest gives and at most `MAX_MODEL_BYTES`.
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterable

from msdb.errors import MsdbError

__all__ = ["HubError", "HubClient", "TIMEOUT_S", "MAX_MODEL_BYTES", "normalize_url", "parse_time"]

#: Seconds one HTTP request to a hub may take, all of it (connect, headers, body).
TIMEOUT_S = 30.0
#: The largest response body read from a hub, in bytes: a page of 1,000 records of big traces,
#: or 200 workloads with their scripts, blobs and payloads, is a few tens of MB.
MAX_RESPONSE_BYTES = 256 << 20
#: The largest cost model file a hub may ship with a snapshot (`msdb publish --cost-model`) and a
#: pull fetches (`HubClient.download`, streamed to disk): an XGBoost model keeps the feature rows
#: of every record it learned from, about 7 KB each, so this is some 150,000 records.
MAX_MODEL_BYTES = 1 << 30
#: The most rows `HubClient.all_rows` gathers from one table (its targets, tasks, models).
MAX_TABLE_ROWS = 1_000_000
_CHUNK_BYTES = 1 << 16
#: Ask datasette not to count, facet or suggest facets: sync pages only need the rows.
_LEAN = (("_nocount", "1"), ("_nofacet", "1"), ("_nosuggest", "1"))


class HubError(MsdbError):
    """A hub could not be read: down, too slow, or not answering with msdb's datasette JSON."""


def normalize_url(url: str) -> str:
    """A hub's base URL with one trailing slash; anything but http(s) is refused."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise HubError(f"{url!r} is not a hub URL; pass the http(s) base URL a hub is served at, e.g. "
                       f"http://127.0.0.1:8001/")
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def parse_time(value: Any) -> _dt.datetime | None:
    """A DateTime column as datasette returns it (SQLite's text) -> datetime."""
    if value is None or isinstance(value, _dt.datetime):
        return value
    return _dt.datetime.fromisoformat(str(value))


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and value.get("$base64") is True and isinstance(value.get("encoded"), str):
        return base64.b64decode(value["encoded"])
    return value


class HubClient:
    """A hub at `url` (`http://host:port/`): its database, tables and metadata as JSON."""

    def __init__(self, url: str, *, timeout_s: float = TIMEOUT_S, max_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.url = normalize_url(url)
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._database: str | None = None
        #: The canned queries of `database` (read with it).
        self.queries: frozenset[str] = frozenset()

    # ---- raw requests ----
    def get_json(self, path: str, params: Iterable[tuple[str, str]] = ()) -> Any:
        """GET `path` (relative to the base URL) with query `params`; the parsed JSON body. The
        whole request ends within `timeout_s` and reads at most `max_bytes` of body (module
        docstring), or raises `HubError`."""
        query = urllib.parse.urlencode(list(params))
        address = self.url + path.lstrip("/") + (f"?{query}" if query else "")
        too_big = HubError(f"hub {self.url}: {address} answered more than {self.max_bytes:,} bytes; msdb reads at "
                           f"most that much per request (is this an msdb hub?)")
        body = bytearray()
        content_type = self._get(address, "application/json", body.extend, self.max_bytes, too_big)
        if "json" not in content_type.lower():
            kind = content_type.split(";")[0] or "no content type"
            raise HubError(f"hub {self.url}: {address} answered {kind}, not JSON; is this the base URL of a "
                           f"datasette hub (msdb serve / msdb publish)?")
        try:
            return json.loads(bytes(body))
        except ValueError as exc:
            raise HubError(f"hub {self.url}: {address} answered malformed JSON ({exc})") from None

    def download(self, path: str, sink: Callable[[bytes], object], max_bytes: int) -> int:
        """GET the file at `path` (relative to the base URL), handing its body to `sink` chunk by
        chunk (nothing is held in memory); how many bytes it had. Bounded like `get_json`, but in
        size by the caller's `max_bytes` (the size a manifest gives): a longer body is a `HubError`."""
        address = self.url + path.lstrip("/")
        too_big = HubError(f"hub {self.url}: {address} answered more than {max_bytes:,} bytes, the size its manifest "
                           f"gives; the file changed after `msdb publish`, or the hub is not to be trusted")
        received = 0

        def counted(chunk: bytes) -> None:
            nonlocal received
            received += len(chunk)
            sink(chunk)

        self._get(address, "application/octet-stream", counted, max_bytes, too_big)
        return received

    def _get(self, address: str, accept: str, sink: Callable[[bytes], object], max_bytes: int,
             too_big: HubError) -> str:
        """GET `address` under one deadline, its body handed to `sink` in chunks up to
        `max_bytes` (`too_big` past it); its Content-Type. Every failure is a `HubError`."""
        request = urllib.request.Request(address, headers={"Accept": accept})
        slow = HubError(f"hub {self.url}: no answer within {self.timeout_s:g} s ({address}); the hub is down, "
                        f"overloaded or too slow (--timeout sets the limit), try again later")
        deadline = _Deadline(self.timeout_s)
        try:
            opener = urllib.request.build_opener(_DeadlineHTTPHandler(deadline), _DeadlineHTTPSHandler(deadline))
            with opener.open(request, timeout=self.timeout_s) as response:
                content_type = str(response.headers.get("Content-Type", ""))
                self._body(response, deadline, sink, max_bytes, too_big)
        except urllib.error.HTTPError as exc:
            raise HubError(f"hub {self.url}: {address} answered HTTP {exc.code} {exc.reason}; check the URL and "
                           f"that it serves an msdb database") from None
        except (socket.timeout, TimeoutError):
            raise slow from None
        except urllib.error.URLError as exc:
            if deadline.expired or isinstance(exc.reason, (socket.timeout, TimeoutError)):
                raise slow from None
            raise HubError(f"hub {self.url} cannot be reached: {exc.reason}; check the URL and that the hub is "
                           f"running") from None
        except (ConnectionError, OSError, http.client.HTTPException) as exc:
            if deadline.expired:
                raise slow from None
            raise HubError(f"hub {self.url} cannot be reached: {exc}; check the URL and that the hub is "
                           f"running") from None
        finally:
            deadline.cancel()
        if deadline.expired:
            raise slow
        return content_type

    @staticmethod
    def _body(response: Any, deadline: _Deadline, sink: Callable[[bytes], object], max_bytes: int,
              too_big: HubError) -> None:
        """Read the body of `response` in chunks into `sink` until its end, `max_bytes` (a bigger
        Content-Length is refused before reading) or the deadline."""
        length = response.headers.get("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > max_bytes:
            raise too_big
        received = 0
        while True:
            chunk = response.read1(_CHUNK_BYTES)
            if not chunk:
                return
            received += len(chunk)
            if received > max_bytes:
                raise too_big
            sink(chunk)
            if deadline.expired:
                raise TimeoutError

    def wrong(self, what: str) -> HubError:
        """The error for JSON of an unexpected shape."""
        return HubError(f"hub {self.url}: {what}; is this an msdb hub served by a compatible datasette?")

    # ---- the database ----
    @property
    def database(self) -> str:
        """The name of the served database that holds msdb's tables (checked once)."""
        if self._database is None:
            listed = self.get_json("-/databases.json")
            if not isinstance(listed, list) or not all(isinstance(d, dict) and "name" in d for d in listed):
                raise self.wrong("/-/databases.json is not a list of databases")
            names = [str(d["name"]) for d in listed if not str(d["name"]).startswith("_")]
            for name in names:
                tables = self.get_json(f"{urllib.parse.quote(name)}.json")
                if isinstance(tables, dict) and any(isinstance(t, dict) and t.get("name") == "tuning_record"
                                                    for t in tables.get("tables", [])):
                    self._database = name
                    self.queries = frozenset(str(q.get("name")) for q in tables.get("queries") or []
                                             if isinstance(q, dict))
                    break
            else:
                raise self.wrong(f"none of its databases ({', '.join(names) or 'none'}) has a tuning_record table")
        return self._database

    def database_info(self) -> dict[str, Any]:
        """The `/-/databases.json` entry of `database` (path, hash of an immutable file, ...)."""
        for entry in self.get_json("-/databases.json"):
            if isinstance(entry, dict) and entry.get("name") == self.database:
                return entry
        raise self.wrong(f"database {self.database!r} is gone from /-/databases.json")

    def manifest(self) -> dict[str, Any] | None:
        """The publish manifest the hub serves in its metadata (`msdb.hub.publish`), or None for a
        live database."""
        metadata = self.get_json("-/metadata.json")
        if not isinstance(metadata, dict):
            raise self.wrong("/-/metadata.json is not an object")
        manifest = metadata.get("msdb_manifest")
        if manifest is None:
            return None
        if not isinstance(manifest, dict):
            raise self.wrong("its metadata's msdb_manifest is not an object")
        return manifest

    def check_manifest(self) -> dict[str, Any] | None:
        """Compare the served file's sha256 with the manifest's: a snapshot replaced or damaged
        after publishing (or a manifest of another one) is refused."""
        manifest = self.manifest()
        if manifest is None:
            return None
        served = self.database_info().get("hash")
        expected = manifest.get("sha256")
        if served is not None and served != expected:
            raise HubError(f"hub {self.url}: the served snapshot's sha256 {served} does not match its manifest's "
                           f"{expected}; the snapshot changed after `msdb publish`: publish it again")
        return manifest

    def rows(self, table: str, params: Iterable[tuple[str, str]] = ()) -> tuple[list[dict[str, Any]], Any]:
        """One page of `table` as dicts (BLOBs decoded) and datasette's `next` token."""
        data = self.get_json(f"{urllib.parse.quote(self.database)}/{table}.json",
                             [("_shape", "objects"), *_LEAN, *params])
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise self.wrong(f"its {table} table JSON has no list of rows")
        rows = data["rows"]
        for row in rows:
            if not isinstance(row, dict):
                raise self.wrong(f"its {table} table JSON rows are not objects")
            for key, value in row.items():
                if isinstance(value, dict):
                    row[key] = _decode(value)
        return rows, data.get("next")

    def all_rows(self, table: str, params: Iterable[tuple[str, str]] = ()) -> list[dict[str, Any]]:
        """Every row of `table` matching `params`, following keyset pages by id. A page whose ids
        do not all come after the previous page's (a hub ignoring `id__gt`), or a table past
        `MAX_TABLE_ROWS` rows, is a `HubError`: the pages must end."""
        params = list(params)
        out: list[dict[str, Any]] = []
        after = 0
        while True:
            page, more = self.rows(table, [*params, ("id__gt", str(after)), ("_sort", "id"), ("_size", "max")])
            self.check_ids(table, page, after)
            out.extend(page)
            if not page or more is None:
                return out
            if len(out) > MAX_TABLE_ROWS:
                raise HubError(f"hub {self.url}: its {table} table goes on past {MAX_TABLE_ROWS:,} rows; msdb reads "
                               f"at most that many (is this an msdb hub?)")
            after = int(page[-1]["id"])

    def check_ids(self, table: str, rows: list[dict[str, Any]], after: int) -> None:
        """Refuse a page of `table` read after id `after` whose ids are not integers increasing
        from past `after`: a keyset cursor that does not advance would read forever."""
        previous = after
        for row in rows:
            value = row.get("id")
            if type(value) is not int:
                raise self.wrong(f"its {table} rows lack an integer id")
            if value <= previous:
                raise HubError(f"hub {self.url}: its {table} page after id {after} holds id {value} after {previous}; "
                               f"its pages do not advance (it ignores the cursor), so msdb stops here")
            previous = value


class _Deadline:
    """The wall-clock end of one request: at `seconds` it shuts the request's socket down (a
    socket timeout alone bounds each read, not a hub that sends a byte just before each one
    would time out), and `expired` tells the reader why its socket ended."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._end = time.monotonic() + seconds
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.expired:
                _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            if self._sock is not None:
                _shutdown(self._sock)

    def cancel(self) -> None:
        self._timer.cancel()
        if time.monotonic() >= self._end:
            self.expired = True


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _WatchedByDeadline:
    """What both connection kinds add: their socket is handed to a `_Deadline` once connected."""

    def __init__(self, host: str, *, deadline: _Deadline, **options: Any) -> None:
        super().__init__(host, **options)  # type: ignore[call-arg]
        self.deadline = deadline

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self.deadline.watch(self.sock)  # type: ignore[attr-defined]


class _DeadlineHTTPConnection(_WatchedByDeadline, http.client.HTTPConnection):
    """An HTTP connection under a `_Deadline`."""


class _DeadlineHTTPSConnection(_WatchedByDeadline, http.client.HTTPSConnection):
    """The same for HTTPS."""


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    """urllib's HTTP handler, making `_DeadlineHTTPConnection`s (proxies and redirects stay
    urllib's)."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(functools.partial(_DeadlineHTTPConnection, deadline=self.deadline), req)


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    """The same for HTTPS."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(functools.partial(_DeadlineHTTPSConnection, deadline=self.deadline), req)
