"""`msdb pull URL DB`: copy what a hub has and DB lacks, incrementally (docs/architecture.md, "Hub").

The hub's records are read in keyset pages over datasette's JSON API
(`tuning_record.json?id__gt=N&_sort=id`; a hub's record ids are its commit order and are never
reused), with the workloads and targets they point at. Each page is
staged in an in-memory msdb database and merged into DB by `msdb.database.merge.merge_databases`,
so a pull deduplicates exactly as `msdb merge` does (workloads by structural hash, records by
(workload, target, trace, run_secs)): there is one implementation of dedup.

Provenance: the records a pull adds point at one `source` row of kind `pull` per hub, whose
`location` is the hub's URL with the last hub record id read as its fragment
(`http://hub:8001/#after=1234`). That fragment is the pull's cursor: the next pull of that URL
starts after it, so a pull of an unchanged hub makes one small request and writes nothing.

Resumable: pages are merged in batches of about `MERGE_RECORDS` records, and each batch is
committed (its records, then the cursor, each transaction whole). A pull killed or failing part
way leaves DB consistent, with the batches it committed; the next pull goes on from the cursor
(a batch whose records were committed but not its cursor is read again and adds nothing, being
deduplicated). One `DedupCache` serves every merge of a pull, so DB's existing keys are read once. A hub that is down, slow, answers HTML or JSON of the
wrong shape, or serves a snapshot whose sha256 is not its manifest's, is a `HubError` naming the
URL; the hub is checked before DB is opened, so such a pull creates and changes nothing.

Models and tasks: after the records, the hub's tasks of workloads DB now has are added with
`msdb.database.pulled.add_pulled_tasks` (a task DB has keeps its weight, as in a merge). Every
read and write of DB's tables is `msdb.database.pulled`'s; this module speaks HTTP.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from msdb.database.pulled import (RECORD_FIELDS, WORKLOAD_FIELDS, add_pulled_tasks, cursor_location, find_pull_cursor,
                                  move_pull_cursor, new_pull_source, stage_rows, staging_database)
from msdb.hub.client import HubClient, HubError, TIMEOUT_S, parse_time
from msdb.interop.progress import ProgressFn

if TYPE_CHECKING:
    from msdb.database.merge import DedupCache
    from msdb.database.sqlite import SQLiteDatabase

__all__ = ["PullSummary", "pull", "pull_into", "cursor_location", "PAGE_SIZE", "MERGE_RECORDS", "HubError"]

#: Records per page: None for the hub's `max_returned_rows` (datasette's default 1000).
PAGE_SIZE: int | None = None
#: Records merged (and committed, with the cursor) at once: pages are gathered up to this many,
#: so a merge's fixed costs are paid once per batch, not once per page.
MERGE_RECORDS = 5000


@dataclass
class PullSummary:
    """What one pull did."""

    url: str
    records_read: int = 0
    records_new: int = 0
    records_duplicate: int = 0
    workloads_new: int = 0
    tasks_added: int = 0
    pages: int = 0
    after: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        rate = f", {self.records_read / self.seconds:.0f} records/s" if self.seconds > 0 and self.records_read else ""
        return (f"{self.url}: {self.records_read} records read in {self.pages} pages: {self.records_new} new, "
                f"{self.records_duplicate} duplicate; workloads: {self.workloads_new} new; up to hub record "
                f"{self.after}; {self.seconds:.2f} s{rate}")


def pull(url: str, db: str | os.PathLike[str], *, timeout_s: float = TIMEOUT_S, user: str | None = None,
         host: str | None = None, progress: ProgressFn | None = None) -> PullSummary:
    """`msdb pull URL DB`: check the hub, then open (or create) DB and pull into it."""
    from msdb.database.location import open_database

    client = HubClient(url, timeout_s=timeout_s)
    _ = client.database  # the hub is checked before DB is opened: a bad hub creates and changes nothing
    client.check_manifest()
    local = open_database(db, create=True)
    try:
        return pull_into(local, client, user=user, host=host, progress=progress)
    finally:
        local.close()


def pull_into(local: SQLiteDatabase, client: HubClient, *, user: str | None = None, host: str | None = None,
              progress: ProgressFn | None = None) -> PullSummary:
    """Pull from the hub of `client` into the open database `local` (module docstring)."""
    from msdb.database.merge import DedupCache

    start = time.perf_counter()
    summary = PullSummary(client.url)
    source_id, after = find_pull_cursor(local, client.url)
    hub = _HubCache(client)
    cache = DedupCache()  # DB's dedup keys, read once for the whole pull
    first = _page(client, after)
    if not first and after > 0 and _hub_max_id(client) < after:
        after = 0  # the hub was replaced by another database: read it all again (dedup keeps DB right)
        first = _page(client, after)
    # for progress bars: about how many records there are to read (ids are dense but for prunes)
    total = max(_hub_max_id(client) - after, len(first)) if first and progress is not None else 0
    staging: SQLiteDatabase | None = None
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            batch: list[dict[str, Any]] = []
            for page in _pages(pool, client, first):
                batch.extend(page)
                summary.pages += 1
                if len(batch) < MERGE_RECORDS:
                    continue
                staging = staging or staging_database()
                source_id = _commit_batch(local, staging, hub, cache, batch, source_id, after, summary, user, host)
                after = int(batch[-1]["id"])
                batch = []
                if progress is not None:
                    progress("pulling", summary.records_read, total)
            if batch:
                staging = staging or staging_database()
                source_id = _commit_batch(local, staging, hub, cache, batch, source_id, after, summary, user, host)
                after = int(batch[-1]["id"])
                if progress is not None:
                    progress("pulling", summary.records_read, total)
    finally:
        if staging is not None:
            staging.close()
    summary.after = after
    summary.tasks_added = _pull_tasks(local, hub)
    summary.seconds = time.perf_counter() - start
    return summary


def _pages(pool: concurrent.futures.ThreadPoolExecutor, client: HubClient, first: list[dict[str, Any]]
           ) -> Iterator[list[dict[str, Any]]]:
    """`first` and the hub's pages after it; each next page is read (keyset: its start is known
    once this one is) while the caller merges this one."""
    page = first
    while page:
        upcoming = pool.submit(_page, client, int(page[-1]["id"]))
        try:
            yield page
        except GeneratorExit:
            upcoming.cancel()
            raise
        page = upcoming.result()


def _commit_batch(local: SQLiteDatabase, staging: SQLiteDatabase, hub: _HubCache, cache: DedupCache,
                  batch: list[dict[str, Any]], source_id: int | None, after: int, summary: PullSummary,
                  user: str | None, host: str | None) -> int:
    """Merge `batch` into `local`, then move the cursor past it; the pull source row's id."""
    if source_id is None:
        source_id = new_pull_source(local, hub.client.url, after, user=user, host=host)
    _merge_page(local, staging, hub, batch, source_id, summary, cache)
    move_pull_cursor(local, source_id, hub.client.url, int(batch[-1]["id"]))
    summary.records_read += len(batch)
    return source_id


def _page(client: HubClient, after: int) -> list[dict[str, Any]]:
    """The hub's records after id `after`, in id order: its canned query `records_since` where it
    has one (`msdb.hub.canned`: each row carries its target's config), else the table's JSON."""
    from msdb.hub.canned import RECORDS_SINCE

    if RECORDS_SINCE in client.queries:
        rows, _next = client.rows(RECORDS_SINCE, [("after", str(after)), ("limit", str(PAGE_SIZE or ""))])
    else:
        size = "max" if PAGE_SIZE is None else str(PAGE_SIZE)
        rows, _next = client.rows("tuning_record", [("id__gt", str(after)), ("_sort", "id"), ("_size", size)])
    for row in rows:
        missing = [name for name in RECORD_FIELDS if name not in row]
        if missing or not isinstance(row["id"], int):
            raise client.wrong(f"its tuning_record rows lack {', '.join(missing) or 'an integer id'}")
    return rows


def _hub_max_id(client: HubClient) -> int:
    rows, _next = client.rows("tuning_record", [("_sort_desc", "id"), ("_size", "1")])
    return int(rows[0]["id"]) if rows else 0


class _HubCache:
    """The hub's workload and target rows a pull needed, fetched once each."""

    def __init__(self, client: HubClient) -> None:
        self.client = client
        self.workloads: dict[int, dict[str, Any]] = {}
        self.targets: dict[int, str] = {}

    def need_workloads(self, ids: set[int]) -> None:
        missing = sorted(ids - self.workloads.keys())
        for i in range(0, len(missing), 200):
            chunk = missing[i:i + 200]
            rows = self.client.all_rows("workload", [("id__in", ",".join(map(str, chunk)))])
            for row in rows:
                if not all(name in row for name in ("id", *WORKLOAD_FIELDS)):
                    raise self.client.wrong("its workload rows lack msdb's columns")
                self.workloads[int(row["id"])] = row
        lost = set(missing) - self.workloads.keys()
        if lost:
            raise self.client.wrong(f"records point at workloads {sorted(lost)[:5]} it does not list")

    def need_targets(self, ids: set[int]) -> None:
        if ids <= self.targets.keys():
            return
        for row in self.client.all_rows("target"):
            if "id" not in row or not isinstance(row.get("config"), str):
                raise self.client.wrong("its target rows lack msdb's columns")
            self.targets[int(row["id"])] = row["config"]
        lost = ids - self.targets.keys()
        if lost:
            raise self.client.wrong(f"records point at targets {sorted(lost)[:5]} it does not list")


def _merge_page(local: SQLiteDatabase, staging: SQLiteDatabase, hub: _HubCache, page: list[dict[str, Any]],
                source_id: int, summary: PullSummary, cache: DedupCache) -> None:
    """Stage one page of hub records (their workloads and targets, and a copy of the pull source
    row) and merge it into `local`."""
    from msdb.database.merge import merge_databases

    workload_ids = {int(row["workload_id"]) for row in page}
    target_ids = {int(row["target_id"]) for row in page}
    for row in page:
        if isinstance(row.get("target"), str):  # records_since names each record's target
            hub.targets[int(row["target_id"])] = row["target"]
    hub.need_workloads(workload_ids)
    hub.need_targets(target_ids)
    workloads = {wid: {**hub.workloads[wid], "created_at": parse_time(hub.workloads[wid]["created_at"])}
                 for wid in workload_ids}
    stage_rows(local, staging, source_id, workloads, {tid: hub.targets[tid] for tid in target_ids}, page)
    merged = merge_databases(local, staging, cache=cache)
    summary.records_new += merged.records_new
    summary.records_duplicate += merged.records_duplicate
    summary.workloads_new += merged.workloads_new


def _pull_tasks(local: SQLiteDatabase, hub: _HubCache) -> int:
    """Add the hub's tasks of workloads `local` has (by structural hash); how many were new."""
    client = hub.client
    tasks = client.all_rows("task")
    if not tasks:
        return 0
    models = {int(row["id"]): str(row["name"]) for row in client.all_rows("model")}
    hub_workloads: dict[int, dict[str, Any]] = dict(hub.workloads)
    wanted = sorted({int(t["workload_id"]) for t in tasks} - hub_workloads.keys())
    for i in range(0, len(wanted), 200):
        chunk = wanted[i:i + 200]
        for row in client.all_rows("workload", [("id__in", ",".join(map(str, chunk))), ("_col", "shash"),
                                                ("_col", "ir_format")]):
            hub_workloads[int(row["id"])] = row
    return add_pulled_tasks(local, tasks, models, hub_workloads)
