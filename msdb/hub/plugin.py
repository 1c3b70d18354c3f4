"""msdb's datasette plugin: how msdb's tables look in datasette.

Registered as an ordinary datasette plugin (entry point `datasette`, name `msdb`), so a plain
`datasette team.sqlite` renders msdb's tables as `msdb serve` does: `render_cell` (traces as
schedule code, TVMScript, run times, workload links) and `register_routes` (the workload page,
and a published snapshot's cost model files for `msdb pull`).
Only HTML changes: the JSON API returns stored values untouched, and a value a renderer cannot
read is shown raw. See docs/architecture.md, "Hub".
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from datasette import hookimpl
from markupsafe import Markup, escape

from msdb.records.ranking import is_failure

if TYPE_CHECKING:
    from msdb.database.catalog import RelativeDetails, TuningCurve, WorkloadDetails
    from msdb.database.sql import SQLiteDatabase

__all__ = ["render_cell", "register_routes", "forbidden", "asgi_wrapper", "trace_html", "script_html", "curve_svg",
           "workload_url", "WORKLOAD_ROUTE", "COST_MODEL_ROUTE"]

log = logging.getLogger(__name__)

#: Columns holding seconds (TVM's run times), shown in microseconds.
SECONDS_COLUMNS = frozenset({"mean_run_secs", "best_secs", "secs"})
#: Columns already in microseconds (the canned queries compute them).
MICROSECONDS_COLUMNS = frozenset({"latency_us", "best_us", "weighted_us"})
#: Lines of schedule code or TVMScript shown in a table cell; the workload page shows all.
MAX_CELL_LINES = 400
#: Characters of the TVM payload shown; it is base64 for machines.
PAYLOAD_CHARS = 80

WORKLOAD_ROUTE = r"^/-/msdb/(?P<database>[^/]+)/workload/(?P<hash>[0-9A-Za-z]{1,20})$"
#: A cost model file shipped with a published snapshot (`msdb publish --cost-model`).
COST_MODEL_ROUTE = r"^/-/msdb/(?P<database>[^/]+)/cost-models/(?P<name>[0-9A-Za-z_.-]{1,120})$"
#: Bytes per chunk a cost model file is sent in.
_FILE_CHUNK_BYTES = 1 << 16


def workload_url(datasette: Any, database: str, shash: str) -> str:
    """The workload page of `shash` in `database`, under datasette's base_url."""
    return datasette.urls.path(f"/-/msdb/{database}/workload/{shash}")


def _clip(lines: list[str], limit: int) -> tuple[str, int]:
    """The first `limit` lines joined, and how many were left out."""
    return "\n".join(lines[:limit]), max(0, len(lines) - limit)


def trace_html(text: str, *, max_lines: int = MAX_CELL_LINES) -> Markup | None:
    """A trace's JSON text as TVM's schedule code in a `<pre>`, or None when it is not a trace."""
    from msdb.errors import MsdbError
    from msdb.schedule import Trace

    try:
        code = Trace.from_json(text).as_apply_trace()
    except (MsdbError, ValueError, TypeError, KeyError, IndexError, RecursionError):
        return None
    shown, left = _clip(code.splitlines(), max_lines)
    more = f"\n# ... {left} more lines" if left else ""
    return Markup('<pre class="msdb-trace" style="max-height:30em;overflow:auto;margin:0">{}</pre>').format(
        shown + more)


def script_html(text: str, *, max_lines: int | None = MAX_CELL_LINES) -> Markup:
    """TVMScript highlighted by Pygments (inline styles, so no stylesheet is needed)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    lines = text.splitlines()
    left = 0
    if max_lines is not None:
        text, left = _clip(lines, max_lines)
        if left:
            text += f"\n# ... {left} more lines"
    html = highlight(text, PythonLexer(), HtmlFormatter(noclasses=True, cssclass="msdb-script"))
    return Markup(f'<div style="max-height:30em;overflow:auto">{html}</div>')


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.2f} us"


def _latency_html(seconds: float, flops: int | None) -> Markup:
    gflops = f" ({flops / seconds / 1e9:,.2f} GFLOPS)" if flops and seconds > 0 else ""
    return Markup("{}{}").format(_us(seconds), gflops)


def _row_value(row: Any, key: str) -> Any:
    try:
        return row[key]
    except (KeyError, IndexError, TypeError):
        return None


#: (datasette id, database, workload id) -> FLOPs; workload rows never change their FLOPs.
_FLOPS: dict[tuple[int, str, int], int | None] = {}


async def _workload_flops(datasette: Any, database: str, workload_id: Any) -> int | None:
    if not isinstance(workload_id, int):
        return None
    key = (id(datasette), database, workload_id)
    if key not in _FLOPS:
        result = await datasette.get_database(database).execute(
            "SELECT flops FROM workload WHERE id = ?", [workload_id])
        rows = list(result.rows)
        _FLOPS[key] = rows[0][0] if rows else None
    return _FLOPS[key]


async def _render(row: Any, value: Any, column: str, table: str | None, database: str, datasette: Any) -> Any:
    if value is None:
        return None
    if column == "trace" and isinstance(value, str) and value.lstrip().startswith("["):
        return trace_html(value)
    if column == "script" and isinstance(value, str) and table in ("workload", None):
        return script_html(value)
    if column in SECONDS_COLUMNS and isinstance(value, (int, float)):
        flops = _row_value(row, "flops")
        if flops is None and table == "tuning_record":
            flops = await _workload_flops(datasette, database, _row_value(row, "workload_id"))
        return _latency_html(float(value), flops)
    if column in MICROSECONDS_COLUMNS and isinstance(value, (int, float)):
        return f"{value:,.2f} us"
    if column == "gflops" and isinstance(value, (int, float)):
        return f"{value:,.2f} GFLOPS"
    if column == "run_secs" and isinstance(value, str):
        try:
            runs = json.loads(value)
            return ", ".join("failed" if is_failure(float(r)) else _us(float(r)) for r in runs)
        except (ValueError, TypeError):
            return None
    if column == "shash" and isinstance(value, str) and table in ("workload", None):
        return Markup('<a href="{}">{}</a>').format(workload_url(datasette, database, value), value)
    if column == "ir_blob" and isinstance(value, bytes):
        return Markup("<em>{} bytes of IR (not shown)</em>").format(len(value))
    if column == "tvm_payload" and isinstance(value, str) and len(value) > PAYLOAD_CHARS:
        return Markup("<code>{}</code>&hellip; <em>({} characters)</em>").format(value[:PAYLOAD_CHARS], len(value))
    return None


@hookimpl
def render_cell(row: Any, value: Any, column: str, table: str | None, database: str, datasette: Any) -> Any:
    """Datasette's hook: see the module docstring. Returns an awaitable (datasette awaits it)."""
    return _render(row, value, column, table, database, datasette)


# ---------------------------------------------------------------- the workload page

_OPEN: dict[str, SQLiteDatabase] = {}
_OPEN_LOCK = threading.Lock()


def _database_for(path: str, immutable: bool) -> SQLiteDatabase:
    """msdb's read-only view of a served file, opened once per file: the same way datasette
    reads it (`immutable=1` for a snapshot served `-i`, so no lock or `-wal` file is touched)."""
    from msdb.database.sql import SQLiteDatabase

    key = f"{path}|{immutable}"
    with _OPEN_LOCK:
        db = _OPEN.get(key)
        if db is None:
            location = f"sqlite:///file:{quote(path)}?immutable=1&uri=true" if immutable else path
            db = _OPEN[key] = SQLiteDatabase(location, read_only=True)
        return db


#: (file, immutable, structural hash) -> the workload's curves as last computed, most recently
#: used last; continued with only the newer records on the next request (`tuning_curves(since=)`).
_CURVES: OrderedDict[tuple[str, bool, str], list[TuningCurve]] = OrderedDict()
CURVE_CACHE_SIZE = 256


#: How many relatives the workload page lists.
RELATIVES_SHOWN = 50
#: How many of a relative's abstracted sizes the page shows before an ellipsis.
EXTENTS_SHOWN = 24


def _workload_data(path: str, immutable: bool,
                   text: str) -> tuple[WorkloadDetails, list[TuningCurve], list[RelativeDetails]]:
    from msdb.database.catalog import show_workload, tuning_curves, workload_relatives

    db = _database_for(path, immutable)
    details = show_workload(db, text)
    relatives = workload_relatives(db, details.shash, limit=RELATIVES_SHOWN)
    key = (path, immutable, details.shash)
    with _OPEN_LOCK:
        since = _CURVES.get(key)
    _, curves = tuning_curves(db, details.shash, since=since)
    with _OPEN_LOCK:
        _CURVES[key] = curves
        _CURVES.move_to_end(key)
        while len(_CURVES) > CURVE_CACHE_SIZE:
            _CURVES.popitem(last=False)
    return details, curves, relatives


def _steps(best_us: list[float | None]) -> list[tuple[int, float]]:
    """The corners of a best-so-far curve drawn as steps: where it starts, each trial where it
    drops (the old value, then the new), and its last trial. A run of 100k trials whose best
    changed 30 times is drawn with about 60 points."""
    points: list[tuple[int, float]] = []
    prev: float | None = None
    for i, us in enumerate(best_us):
        if us is None or us == prev:
            continue
        if prev is not None:
            points.append((i, prev))
        points.append((i, us))
        prev = us
    if prev is not None and points[-1][0] != len(best_us) - 1:
        points.append((len(best_us) - 1, prev))
    return points


#: Line colours of the chart, one per source, cycled.
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


#: The chart's font size (px); its legend is set in monospace, whose characters are 0.6 em wide,
#: so a legend line's width is known without a browser and long labels wrap inside the chart.
FONT_PX = 12
_MONO_CHAR_PX = 0.6 * FONT_PX
#: A width that no character of the sans-serif tick labels exceeds (digits: 0.56 to 0.64 em).
_SANS_CHAR_PX = 0.65 * FONT_PX
#: Height of one legend line, and the gap between two entries (px).
LEGEND_LINE_PX, LEGEND_GAP_PX = 16, 4
#: Where the rotated y-axis title is centred, and the room it takes (px from the left edge).
_Y_TITLE_X, _Y_TITLE_ROOM = 14, 24


def curve_svg(curves: list[TuningCurve], *, width: int = 720, height: int = 320) -> str:
    """The tuning curves as an inline SVG line chart: best latency (us) against the source's
    trials, one line per source, with axes and a legend. Self-contained: no script, no fonts
    or files from the network. Nothing is clipped or covered: the left margin grows with the
    widest latency tick, clear of the y-axis title; legend labels (sources named by their import
    paths) wrap onto as many lines as they need below the plot, each with its full text as a
    tooltip."""
    right, top, bottom = 20, 20, 40
    points = [(i, us) for c in curves for i, us in enumerate(c.best_us) if us is not None]
    lo = min((us for _, us in points), default=0.0)
    hi = max((us for _, us in points), default=0.0)
    if hi - lo < 1e-9:
        lo, hi = lo * 0.9, hi * 1.1 + 1e-9
    ticks = [lo + (hi - lo) * k / 4 for k in range(5)]
    widest = max(len(f"{us:,.1f}") for us in ticks)
    left = max(70, int(_Y_TITLE_ROOM + 6 + widest * _SANS_CHAR_PX + 0.999))
    legend_x = left + 26
    chars = int((width - right - legend_x) / _MONO_CHAR_PX)
    legends = [c.label_lines(max(chars, 8)) for c in curves]
    legend_h = sum(LEGEND_LINE_PX * len(lines) + LEGEND_GAP_PX for lines in legends)
    total_h = height + legend_h
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="msdb-curves" width="{width}" height="{total_h}" '
             f'viewBox="0 0 {width} {total_h}" role="img" aria-label="tuning curves" '
             f'style="font-family:sans-serif;font-size:{FONT_PX}px;background:#fff">']
    plot_w, plot_h = width - left - right, height - top - bottom
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>')
    if not points:
        parts.append(f'<text x="{left + 10}" y="{top + 20}">no valid measurement yet</text></svg>')
        return "".join(parts)
    max_x = max(1, max(len(c.best_us) for c in curves) - 1)

    def xy(i: int, us: float) -> tuple[float, float]:
        return left + plot_w * i / max_x, top + plot_h * (1 - (us - lo) / (hi - lo))

    for us in ticks:  # y ticks
        _, y = xy(0, us)
        parts.append(f'<line x1="{left - 4}" x2="{left}" y1="{y:.1f}" y2="{y:.1f}" stroke="#999"/>'
                     f'<text class="msdb-tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{us:,.1f}</text>')
    for k in range(5):  # x ticks
        i = round(max_x * k / 4)
        x, _ = xy(i, lo)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" stroke="#999"/>'
                     f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{i + 1}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">trials</text>'
                 f'<text class="msdb-axis-title" x="{_Y_TITLE_X}" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 {_Y_TITLE_X} {top + plot_h / 2:.1f})">best latency (us)</text>')
    y = height
    for n, (curve, lines) in enumerate(zip(curves, legends)):
        colour = COLOURS[n % len(COLOURS)]
        coords = " ".join("{:.1f},{:.1f}".format(*xy(i, us)) for i, us in _steps(curve.best_us))
        if coords:
            parts.append(f'<polyline class="msdb-curve" fill="none" stroke="{colour}" stroke-width="2" '
                         f'points="{coords}"/>')
        y += 12
        spans = "".join(f'<tspan x="{legend_x}" dy="{0 if k == 0 else LEGEND_LINE_PX}">{escape(line)}</tspan>'
                        for k, line in enumerate(lines))
        parts.append(f'<line x1="{left}" x2="{left + 20}" y1="{y - 4}" y2="{y - 4}" stroke="{colour}" stroke-width="2"/>'
                     f'<text class="msdb-legend" x="{legend_x}" y="{y}" style="font-family:monospace">'
                     f'<title>{escape(curve.label)}</title>{spans}</text>')
        y += LEGEND_LINE_PX * len(lines) - 12 + LEGEND_GAP_PX
    parts.append("</svg>")
    return "".join(parts)


PAGE = """{% extends "base.html" %}
{% block title %}workload {{ details.shash }}{% endblock %}
{% block crumbs %}<p class="crumbs"><a href="{{ urls.instance() }}">home</a> /
<a href="{{ urls.database(database) }}">{{ database }}</a> /
<a href="{{ urls.table(database, 'workload') }}">workload</a></p>{% endblock %}
{% block content %}
<h1>Workload {{ details.shash }}{% if details.name %} ({{ details.name }}){% endif %}</h1>
<p>{% if details.flops is not none %}{{ "{:,}".format(details.flops) }} FLOPs, {% endif %}{{ details.records }}
record{{ "" if details.records == 1 else "s" }}{% if details.tvm_shash %}, TVM shash {{ details.tvm_shash }}{% endif %}.
<a href="{{ urls.table(database, 'tuning_record') }}?workload_id={{ workload_id }}">All its records</a>.</p>
<h2>Tuning curves</h2>
<p>Best latency after each trial, one line per source.</p>
<div class="msdb-chart">{{ svg }}</div>
<h2>Best schedule per target</h2>
{% for best in bests %}
<h3 class="msdb-best">{{ best.label }}: {{ best.latency }}</h3>
<p>record <a href="{{ urls.row(database, 'tuning_record', best.record_id) }}">{{ best.record_id }}</a>{% if best.source %}, {{ best.source }}{% endif %}</p>
{{ best.code }}
{% else %}
<p>No valid record.</p>
{% endfor %}
<h2>Relatives</h2>
<p>The same operator at other sizes (its family: the anchor block with extents, shapes and index dtype
abstracted). Their latencies were measured on them, not on this workload.</p>
{% if relatives %}
<table class="msdb-relatives">
<tr><th>workload</th><th>sizes</th><th>target</th><th>best</th><th>record</th></tr>
{% for rel in relatives %}
{% for best in rel.bests or [none] %}
<tr><td><a class="msdb-relative" href="{{ rel.url }}">{{ rel.shash }}</a>{% if rel.name %} ({{ rel.name }}){% endif %}</td>
<td><code>{{ rel.extents }}</code></td>
{% if best %}<td>{{ best.label }}</td><td>{{ best.latency }}</td>
<td><a href="{{ urls.row(database, 'tuning_record', best.record_id) }}">{{ best.record_id }}</a></td>
{% else %}<td colspan="3">no valid record</td>{% endif %}</tr>
{% endfor %}
{% endfor %}
</table>
{% else %}
<p>No relative in this database.</p>
{% endif %}
<h2>TVMScript</h2>
{{ script }}
{% endblock %}
"""


async def _served_database(datasette: Any, request: Any) -> tuple[str, Any]:
    """(name, datasette's Database) of the route's `database`, once the actor may view it; a
    name datasette does not serve is a 404."""
    from datasette.utils.asgi import NotFound

    name = request.url_vars["database"]
    await datasette.ensure_permissions(request.actor, [("view-database", name), "view-instance"])
    try:
        return name, datasette.get_database(name)
    except KeyError:
        raise NotFound(f"no database {name!r}") from None


async def workload_page(datasette: Any, request: Any) -> Any:
    """`/-/msdb/<database>/workload/<hash>` (see the module docstring)."""
    from datasette.utils.asgi import NotFound, Response

    from msdb.database.catalog import AmbiguousHash, WorkloadNotFound, target_labels
    from msdb.errors import MsdbError

    name, served = await _served_database(datasette, request)
    if served.path is None:
        raise NotFound(f"database {name!r} is not a file")
    text = request.url_vars["hash"]
    loop = asyncio.get_running_loop()
    try:
        details, curves, relatives = await loop.run_in_executor(None, _workload_data, served.path,
                                                                not served.is_mutable, text)
    except (WorkloadNotFound, AmbiguousHash) as exc:
        return Response.html(f"<h1>Not found</h1><p>{escape(_unplaced(str(exc), served.path, name))}</p>",
                             status=404)
    except MsdbError as exc:  # not an msdb database, or an older schema: say so, not a traceback
        log.warning("workload page of %s: %s", name, exc)
        return Response.html(f"<h1>Cannot read this database</h1><p>{escape(_unplaced(str(exc), served.path, name))}"
                             "</p>", status=500)
    row = await served.execute("SELECT id FROM workload WHERE shash = ?", [details.shash])
    workload_id = next(iter(row.rows))[0]
    # targets that differ only in what a label hides (-mtriple) get labels that tell them apart
    labels = target_labels([b.target for b in details.best])
    bests = [{"label": label, "latency": _latency_html(b.mean_run_secs, b.flops),
              "record_id": b.record_id, "source": b.source,
              "code": trace_html(b.trace, max_lines=10**9) or Markup("<pre>{}</pre>").format(b.trace)}
             for b, label in zip(details.best, labels)]
    relative_rows = [
        {"shash": rel.shash, "name": rel.name, "url": workload_url(datasette, name, rel.shash),
         "extents": _extents_text(rel.extents),
         "bests": [{"label": label, "latency": _latency_html(b.mean_run_secs, b.flops), "record_id": b.record_id}
                   for b, label in zip(rel.best, target_labels([b.target for b in rel.best]))]}
        for rel in relatives]
    template = datasette.jinja_env.from_string(PAGE)
    context = {"database": name, "details": details, "workload_id": workload_id, "bests": bests,
               "relatives": relative_rows,
               "svg": Markup(curve_svg(curves)), "script": script_html(details.script, max_lines=None)}
    return Response.html(await datasette.render_template(template, context, request=request))


def _unplaced(message: str, path: str, name: str) -> str:
    """`message` with the served file's path (as msdb's errors name it) replaced by datasette's
    name for it: a page says where things are on the hub, never on the server's disk."""
    for shown in sorted({path, str(Path(path).resolve()), quote(path)}, key=len, reverse=True):
        message = message.replace(shown, name)
    return message


def _extents_text(extents: tuple[int, ...]) -> str:
    """A relative's abstracted sizes for the page: the first `EXTENTS_SHOWN`, then how many more."""
    shown = ", ".join(str(x) for x in extents[:EXTENTS_SHOWN])
    left = len(extents) - EXTENTS_SHOWN
    return f"{shown}, ... ({left} more)" if left > 0 else shown


# ---------------------------------------------------------------- published hubs

#: Methods a published hub answers; anything else would be a write (`asgi_wrapper`).
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DATABASES_ROUTE = r"^/-/databases(\.(?P<format>json))?$"


def _published(datasette: Any) -> bool:
    """Whether every database `datasette` serves is an immutable file (`msdb serve` of a publish
    directory, or the `datasette serve -i` it stands for): nothing on it can be written."""
    served = [db for name, db in datasette.databases.items() if name != "_internal"]
    return bool(served) and all(not db.is_mutable and not db.is_memory for db in served)


def _json_request(request: Any) -> bool:
    return bool(request.path.endswith(".json") or request.args.get("_format") == "json")


def _error_json(message: str, status: int, title: str, headers: dict[str, str] | None = None) -> Any:
    """datasette's JSON error shape (`ok`, `error`, `status`, `title`)."""
    from datasette.utils.asgi import Response

    return Response.json({"ok": False, "error": message, "status": status, "title": title}, status=status,
                         headers=headers)


def databases_view(datasette: Any) -> Any:
    """`/-/databases(.json)`, as datasette lists its databases, without the path of an immutable
    file: where a published snapshot lies on the server is nobody's business (a live database's
    path stays, for the team on its own machine)."""
    from datasette.views.special import JsonDataView

    def listed() -> list[dict[str, Any]]:
        return [{key: value for key, value in {
            "name": db.name, "route": db.route, "path": db.path, "size": db.size, "is_mutable": db.is_mutable,
            "is_memory": db.is_memory, "hash": db.hash}.items() if key != "path" or db.is_mutable}
            for name, db in datasette.databases.items() if name != "_internal"]

    return JsonDataView.as_view(datasette, "databases.json", listed)


class _FileDownload:
    """A file sent in `_FILE_CHUNK_BYTES` chunks with its length (datasette's own download sends
    4 KB chunks)."""

    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name = path, name

    async def asgi_send(self, send: Any) -> None:
        from datasette.utils.asgi import asgi_send_file

        await asgi_send_file(send, self.path, filename=self.name, content_type="application/octet-stream",
                             chunk_size=_FILE_CHUNK_BYTES)


async def cost_model_file(datasette: Any, request: Any) -> Any:
    """`/-/msdb/<database>/cost-models/<name>`: a cost model file the publish manifest (served in
    the metadata as `msdb_manifest`) names, from the folder of the published snapshot it was
    shipped with (docs/architecture.md, "Hub"). Anything else answers 404: a live database
    ships no model, and no other file of the server can be reached this way."""
    from datasette.utils.asgi import NotFound

    from msdb.hub.publish import manifest_cost_models

    name, served = await _served_database(datasette, request)
    manifest = datasette.metadata("msdb_manifest")
    if served.is_mutable or served.path is None or not isinstance(manifest, dict) \
            or manifest.get("snapshot") != Path(served.path).name:
        raise NotFound(f"database {name!r} is not a published snapshot: it ships no cost model")
    try:
        models = manifest_cost_models(manifest)
    except ValueError as exc:
        log.warning("cost models of %s: %s", name, exc)
        models = []
    wanted = f"cost-models/{request.url_vars['name']}"
    model = next((m for m in models if m.file == wanted), None)
    file = Path(served.path).parent / wanted
    if model is None or not file.is_file():
        raise NotFound(f"this hub ships no cost model {request.url_vars['name']!r}")
    return _FileDownload(file, model.name)


@hookimpl
def register_routes(datasette: Any) -> list[tuple[str, Any]]:
    """Datasette's hook: the workload page, a published snapshot's cost model files, and
    `/-/databases(.json)` without snapshot paths (plugin routes come before datasette's own)."""
    return [(WORKLOAD_ROUTE, workload_page), (COST_MODEL_ROUTE, cost_model_file),
            (DATABASES_ROUTE, databases_view(datasette))]


@hookimpl
def forbidden(datasette: Any, request: Any, message: str) -> Any:
    """A 403 asked for as JSON (`.json`, `?_format=json`) answered in JSON, as datasette answers
    its other errors there: a client reading a published hub's API (`?sql=` is off there) gets
    an error it can parse instead of an HTML page. Other requests get datasette's page."""
    if not _json_request(request):
        return None
    why = ("arbitrary SQL is off on this hub; use the tables' JSON API and the canned queries"
           if message == "execute-sql" else f"permission {message!r} is not granted")
    return _error_json(f"Forbidden: {why}", 403, "Forbidden")


@hookimpl
def asgi_wrapper(datasette: Any) -> Any:
    """On a published hub (`_published`) every request that would write (POST to a canned query
    or a table, PUT, DELETE, ...) is answered 405 before datasette sees it: datasette 0.65 has
    no write endpoint for an immutable file, but answers such requests with a 500 (docs/
    architecture.md, "Hub")."""

    def wrap(app: Any) -> Any:
        async def read_only(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope.get("type") == "http" and scope.get("method", "GET") not in READ_METHODS \
                    and _published(datasette):
                response = _error_json(f"{scope.get('method')} is not allowed: this hub is a read-only snapshot; "
                                       "it answers GET and HEAD", 405, "Method not allowed",
                                       headers={"Allow": "GET, HEAD, OPTIONS"})
                await response.asgi_send(send)
                return
            await app(scope, receive, send)

        return read_only

    return wrap
