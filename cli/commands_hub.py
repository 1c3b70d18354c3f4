"""`msdb serve`: a database or a published snapshot as a website (docs/architecture.md, "Hub")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from msdb.hub.serve import ServePlan

__all__ = ["serve_command"]


@click.command(name="serve")
@click.argument("path", metavar="PATH")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 listens on every interface (put a published hub behind a proxy).")
@click.option("--port", default=8001, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--open", "open_browser", is_flag=True, help="Open the hub in a web browser.")
def serve_command(path: str, host: str, port: int, open_browser: bool) -> None:
    """Browse PATH in datasette, with msdb's pages and canned queries.

    PATH is a database file, served live (WAL mode: tuners and imports may write while it
    serves), or a `msdb publish` directory, served read-only (immutable, arbitrary SQL off:
    only pages, the JSON API and the canned queries answer). Traces show as TVM's schedule
    code, workloads as TVMScript, each with a page of its tuning curves. Ctrl-C stops it.

    \b
    Example:
        msdb serve msdb.sqlite --open
        msdb serve hub/ --host 0.0.0.0 --port 8080
    """
    from msdb.hub.serve import serve

    def ready(plan: ServePlan, url: str) -> None:
        how = "read-only snapshot, SQL off" if plan.published else "live database, WAL"
        click.echo(f"Serving {plan.file} ({how}) at {url}  (Ctrl-C stops)", err=True)

    serve(path, host=host, port=port, open_browser=open_browser, on_ready=ready)
