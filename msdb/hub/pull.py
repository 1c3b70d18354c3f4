"""`msdb pull URL DB`: copy what a hub has and DB lacks, incrementally and resumably.

Keyset pages of the hub's records are staged in memory and merged into DB by
`msdb.database.merge.merge_databases` (one implementation of dedup), in committed batches with a
cursor in the `source` row of kind `pull`; every row passes the admission rule, and every read
and write of DB's tables is `msdb.database.pulled`'s: this module speaks HTTP. The cost model
files a published snapshot ships (its manifest's `cost_models`) are fetched into a staging folder
beside their destination, checked against the manifest (size, sha256, a model file with the
stamp it names) before the records are read, and renamed into place once the records are in.
See docs/architecture.md, "Hub".
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import math
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from msdb.database.pulled import (RECORD_FIELDS, WORKLOAD_FIELDS, add_pulled_tasks, cursor_location, find_pull_cursor,
                                  move_pull_cursor, new_pull_source, stage_rows, staging_database)
from msdb.hub.client import MAX_MODEL_BYTES, HubClient, HubError, TIMEOUT_S, parse_time
from msdb.interop.progress import ProgressFn

if TYPE_CHECKING:
    from msdb.database.admission import Admission, AdmittedWorkload
    from msdb.database.merge import DedupCache
    from msdb.database.sql import SQLiteDatabase
    from msdb.hub.publish import SharedCostModel
    from msdb.ir.function import IRModule
    from msdb.staging import StagingDir

__all__ = ["PullSummary", "PulledCostModel", "pull", "pull_into", "cursor_location", "PAGE_SIZE", "MERGE_RECORDS",
           "HubError"]

#: Records per page: None for the hub's `max_returned_rows` (datasette's default 1000).
PAGE_SIZE: int | None = None
#: Records merged (and committed, with the cursor) at once: pages are gathered up to this many,
#: so a merge's fixed costs are paid once per batch, not once per page.
MERGE_RECORDS = 5000


@dataclass(frozen=True)
class PulledCostModel:
    """A cost model file a pull put in place (`fetched`), or found there already identical."""

    path: Path
    kind: str
    target_kind: str
    workloads: int
    records: int
    fetched: bool

    def line(self) -> str:
        how = "" if self.fetched else " (unchanged)"
        return (f"cost model {self.kind} for {self.target_kind} ({self.records} records of {self.workloads} "
                f"workloads): {self.path}{how}")


@dataclass
class PullSummary:
    """What one pull did."""

    url: str
    records_read: int = 0
    records_new: int = 0
    records_duplicate: int = 0
    #: records the admission rule left out (`skip_bad`), those of a refused workload included
    records_refused: int = 0
    workloads_new: int = 0
    tasks_added: int = 0
    pages: int = 0
    after: int = 0
    seconds: float = 0.0
    #: what was left out, one `record N: reason` line each (N: the hub's id)
    refused: list[str] = field(default_factory=list)
    #: the cost model files the hub ships, where they are now
    cost_models: list[PulledCostModel] = field(default_factory=list)

    def line(self) -> str:
        rate = f", {self.records_read / self.seconds:.0f} records/s" if self.seconds > 0 and self.records_read else ""
        refused = f", {self.records_refused} refused" if self.records_refused else ""
        return (f"{self.url}: {self.records_read} records read in {self.pages} pages: {self.records_new} new, "
                f"{self.records_duplicate} duplicate{refused}; workloads: {self.workloads_new} new; up to hub record "
                f"{self.after}; {self.seconds:.2f} s{rate}")


def pull(url: str, db: str | os.PathLike[str], *, timeout_s: float = TIMEOUT_S, user: str | None = None,
         host: str | None = None, progress: ProgressFn | None = None, skip_bad: bool = False,
         cost_model_out: str | os.PathLike[str] | None = None, max_model_bytes: int = MAX_MODEL_BYTES) -> PullSummary:
    """`msdb pull URL DB`: check the hub, then open (or create, staged) DB and pull into it.
    `timeout_s`: the most one request to the hub may take, all of it; `skip_bad`: leave out
    (and list) what the admission rule refuses instead of stopping (module docstring).

    The hub's cost model files go beside DB as `<DB stem>.<kind>-<target kind>.npz` (in the
    current folder for a server DB), or to `cost_model_out`: an existing folder, or the file for
    the one model of a hub that ships one. `max_model_bytes`: the largest model file fetched."""
    from msdb.database.location import database_file, open_database

    client = HubClient(url, timeout_s=timeout_s)
    _ = client.database  # the hub is checked before DB is opened: a bad hub creates and changes nothing
    manifest = client.check_manifest()
    file = database_file(os.fspath(db))
    models = _StagedModels(client, manifest, file, cost_model_out, max_model_bytes)
    try:
        models.fetch()  # checked before DB is opened, placed once the records are in
        if file is not None and not file.exists():
            summary = _pull_into_new_file(file, client, user=user, host=host, progress=progress, skip_bad=skip_bad)
        else:
            if file is not None:
                from msdb.staging import sweep_new_database

                sweep_new_database(file)  # what a pull (import, merge) killed while creating it left
            local = open_database(db, create=True)
            try:
                summary = pull_into(local, client, user=user, host=host, progress=progress, skip_bad=skip_bad)
            finally:
                local.close()
        summary.cost_models = models.place()
    finally:
        models.remove()
    return summary


class _StagedModels:
    """The cost model files a hub's manifest names, fetched into staging folders beside their
    destinations and checked (`fetch`), then renamed into place (`place`); `remove` drops what
    was not placed (module docstring)."""

    def __init__(self, client: HubClient, manifest: dict[str, Any] | None, db_file: Path | None,
                 out: str | os.PathLike[str] | None, max_bytes: int) -> None:
        from msdb.hub.publish import manifest_cost_models

        self.client = client
        self.max_bytes = max_bytes
        try:
            self.models = manifest_cost_models(manifest) if manifest is not None else []
        except ValueError as exc:
            raise client.wrong(f"its manifest's {exc}") from None
        self.destinations = [_model_destination(client, model, db_file, out, len(self.models))
                             for model in self.models]
        self.staged: list[tuple[StagingDir, Path] | None] = []

    def fetch(self) -> None:
        from msdb.hub.publish import file_sha256

        for model, destination in zip(self.models, self.destinations):
            if destination.is_file() and destination.stat().st_size == model.size \
                    and file_sha256(destination) == model.sha256:
                self.staged.append(None)  # what the hub ships is already there
                continue
            self.staged.append(self._fetch(model, destination))

    def _fetch(self, model: SharedCostModel, destination: Path) -> tuple[StagingDir, Path]:
        """`model` downloaded into a staging folder beside `destination` and checked: its size and
        sha256 the manifest's, a cost model file whose format and stamp the manifest's."""
        from msdb.staging import StagingDir
        from msdb.model_file import CostModelFileError, ModelStamp, read_model_file

        client = self.client
        path = f"-/msdb/{urllib.parse.quote(client.database)}/{model.file}"
        address = client.url + path
        if model.size > self.max_bytes:
            raise HubError(f"hub {client.url}: its manifest gives cost model {model.file} {model.size:,} bytes; msdb "
                           f"fetches at most {self.max_bytes:,}")
        stage = StagingDir.create(destination.parent, f".{destination.name}.pull-")
        try:
            temp = stage.path / destination.name
            digest = hashlib.sha256()
            with open(temp, "wb") as f:
                def sink(chunk: bytes) -> None:
                    digest.update(chunk)
                    f.write(chunk)

                size = client.download(path, sink, model.size)
            if size != model.size or digest.hexdigest() != model.sha256:
                raise HubError(f"hub {client.url}: {address} is {size:,} bytes of sha256 {digest.hexdigest()}, its "
                               f"manifest says {model.size:,} bytes of sha256 {model.sha256}; the cost model changed "
                               f"after `msdb publish`: publish it again")
            try:
                meta, _arrays = read_model_file(temp)
                stamp = ModelStamp.from_json(meta.get("stamp"), str(temp))
            except CostModelFileError as exc:
                why = str(exc).replace(f"{temp}: ", "")
                raise HubError(f"hub {client.url}: {address} is not a usable cost model file ({why})") from None
            if meta["format"] != model.format or stamp != model.model_stamp():
                raise HubError(f"hub {client.url}: {address} is a {meta['format']} model of stamp {stamp}, not what "
                               f"its manifest says; publish it again")
        except BaseException:
            stage.remove()
            raise
        return stage, temp

    def place(self) -> list[PulledCostModel]:
        placed = []
        for i, (model, destination) in enumerate(zip(self.models, self.destinations)):
            staged = self.staged[i]
            if staged is not None:
                os.replace(staged[1], destination)
                staged[0].remove()
                self.staged[i] = None
            stamp = model.model_stamp()
            placed.append(PulledCostModel(destination, model.kind, str(stamp.target_kind), stamp.workloads,
                                          stamp.records, fetched=staged is not None))
        return placed

    def remove(self) -> None:
        for staged in self.staged:
            if staged is not None:
                staged[0].remove()
        self.staged = []


def _model_destination(client: HubClient, model: SharedCostModel, db_file: Path | None,
                       out: str | os.PathLike[str] | None, count: int) -> Path:
    """Where a pull puts `model`, one of `count` (see `pull`): checked before anything is
    fetched, so that a pull that cannot place a model creates and changes nothing. The folder
    must exist, and a file already there is replaced only when it is a cost model file."""
    if out is None:
        destination = Path.cwd() / model.name if db_file is None else db_file.parent / f"{db_file.stem}.{model.name}"
    else:
        given = Path(out)
        if given.is_dir():
            destination = given / model.name
        elif count > 1:
            raise HubError(f"hub {client.url} ships {count} cost models; the cost model destination {given} must be "
                           f"an existing folder to hold them all")
        else:
            destination = given
    if not destination.parent.is_dir():
        raise HubError(f"cannot put hub {client.url}'s cost model at {destination}: folder {destination.parent} "
                       f"does not exist")
    if db_file is not None and destination.absolute() == db_file.absolute():
        raise HubError(f"the cost model destination {destination} is the database being pulled into; name another file")
    if destination.exists() and not _is_model_file(destination):
        raise HubError(f"{destination} exists and is not a cost model file; msdb pull does not overwrite it with hub "
                       f"{client.url}'s cost model (name another --cost-model-out)")
    return destination


def _is_model_file(path: Path) -> bool:
    from msdb.model_file import CostModelFileError, read_model_file

    try:
        read_model_file(path, with_arrays=False)
    except CostModelFileError:
        return False
    return True


class _NewFile:
    """A new DB file built in a staging folder until its first batch is committed, then linked
    into place (module docstring)."""

    def __init__(self, file: Path) -> None:
        from msdb.database.location import open_database, stage_new_file

        self.stage, self.temp, _ = stage_new_file(file, "pull")
        self.file = file
        try:
            self.db: SQLiteDatabase = open_database(str(self.temp), create=True)
        except BaseException:
            self.stage.remove()
            raise

    def place(self, local: SQLiteDatabase) -> SQLiteDatabase:
        """Close the staged database, link it into place, and open it there."""
        from msdb.database.errors import DatabaseOpenError
        from msdb.database.location import open_database
        from msdb.database.tvm_import import _checkpoint, _link_no_replace

        local.close()
        _checkpoint(self.temp)
        placed = _link_no_replace(self.temp, self.file)
        self.stage.remove()
        if not placed:
            raise DatabaseOpenError(f"{self.file} was created by another process during the pull; nothing was "
                                    f"written to it: pull again to pull into it")
        self.db = open_database(str(self.file))
        return self.db


def _pull_into_new_file(file: Path, client: HubClient, **options: Any) -> PullSummary:
    new = _NewFile(file)
    try:
        return pull_into(new.db, client, placed=new.place, **options)
    finally:
        new.db.close()
        new.stage.remove()


def pull_into(local: SQLiteDatabase, client: HubClient, *, user: str | None = None, host: str | None = None,
              progress: ProgressFn | None = None, skip_bad: bool = False,
              placed: Callable[[SQLiteDatabase], SQLiteDatabase] | None = None) -> PullSummary:
    """Pull from the hub of `client` into the open database `local` (module docstring).
    `placed(local)`: called once the first batch is committed (or at the end), returns the
    database to go on with (a new file, placed)."""
    from msdb.database.admission import Admission
    from msdb.database.merge import DedupCache

    start = time.perf_counter()
    summary = PullSummary(client.url)
    admission = Admission(f"hub {client.url}", skip_bad=skip_bad,
                          refusal=" the pull stops before its batch (--skip-bad pulls the rest)")
    source_id, after = find_pull_cursor(local, client.url)
    hub = _HubCache(client, admission, summary)
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
                if placed is not None:
                    local, placed = placed(local), None
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
    if placed is not None:
        local = placed(local)
    summary.after = after
    summary.refused = admission.refused
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
    admitted = hub.admit(batch)  # before anything is written: a refused batch writes nothing
    if source_id is None:
        source_id = new_pull_source(local, hub.client.url, after, user=user, host=host)
    if admitted:
        _merge_page(local, staging, hub, admitted, source_id, summary, cache)
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
        if missing:
            raise client.wrong(f"its tuning_record rows lack {', '.join(missing)}")
    client.check_ids("tuning_record", rows, after)  # the cursor advances, or the pull stops here
    return rows


def _hub_max_id(client: HubClient) -> int:
    rows, _next = client.rows("tuning_record", [("_sort_desc", "id"), ("_size", "1")])
    return int(rows[0]["id"]) if rows else 0


class _HubCache:
    """The hub's workload and target rows a pull needed, fetched once each, and the admission
    rule's verdict on each workload (`admitted`: its admitted form, or None when refused)."""

    def __init__(self, client: HubClient, admission: Admission, summary: PullSummary) -> None:
        self.client = client
        self.admission = admission
        self.summary = summary
        self.workloads: dict[int, dict[str, Any]] = {}
        self.targets: dict[int, str] = {}
        self.admitted: dict[int, AdmittedWorkload | None] = {}

    def admit(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The records of `batch` the admission rule admits, with their workloads (module
        docstring); the others raise `AdmissionError`, or with `skip_bad` are counted and listed."""
        for row in batch:
            if isinstance(row.get("target"), str) and type(row["target_id"]) is int:
                self.targets[row["target_id"]] = row["target"]  # records_since names each record's target
        ids = [row for row in batch if type(row["workload_id"]) is int and type(row["target_id"]) is int]
        self.need_workloads({row["workload_id"] for row in ids})
        self.need_targets({row["target_id"] for row in ids})
        admission, good = self.admission, []
        for row in batch:
            what = f"record {row['id']}"
            workload_id, target_id = row["workload_id"], row["target_id"]
            if type(workload_id) is not int or type(target_id) is not int:
                admission.refuse(what, f"its workload_id {workload_id!r} and target_id {target_id!r} are not ids")
            else:
                workload = self.admitted_workload(workload_id)
                if workload is not None and admission.record_row(what, row, self.targets[target_id], workload):
                    good.append(row)
                    continue
            self.summary.records_refused += 1
        return good

    def admitted_workload(self, workload_id: int) -> AdmittedWorkload | None:
        if workload_id not in self.admitted:
            row = self.workloads[workload_id]
            self.admitted[workload_id] = self.admission.workload_row(
                f"workload {workload_id} ({str(row.get('shash'))[:16]})", row)
        return self.admitted[workload_id]

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
    workloads = {wid: {**hub.workloads[wid], "created_at": _time_or_none(hub.workloads[wid]["created_at"])}
                 for wid in workload_ids}
    mods: dict[int, IRModule | None] = {}
    for wid in workload_ids:
        admitted = hub.admitted[wid]
        assert admitted is not None  # `page` holds admitted records only
        mods[wid] = admitted.mod
    stage_rows(local, staging, source_id, workloads, {tid: hub.targets[tid] for tid in target_ids}, page, mods)
    merged = merge_databases(local, staging, cache=cache, admitted=True)
    summary.records_new += merged.records_new
    summary.records_duplicate += merged.records_duplicate
    summary.workloads_new += merged.workloads_new


def _time_or_none(value: Any) -> Any:
    """A hub's DateTime column as a datetime; None for one that does not parse (stored as now)."""
    try:
        return parse_time(value)
    except (TypeError, ValueError):
        return None


def _pull_tasks(local: SQLiteDatabase, hub: _HubCache) -> int:
    """Add the hub's tasks of workloads `local` has (by structural hash); how many were new."""
    client = hub.client
    tasks = client.all_rows("task")
    if not tasks:
        return 0
    try:
        models = {int(row["id"]): str(row["name"]) for row in client.all_rows("model")}
        tasks = [{"model_id": int(t["model_id"]), "workload_id": int(t["workload_id"]), "name": str(t["name"]),
                  "weight": float(t["weight"])} for t in tasks]
    except (KeyError, TypeError, ValueError):
        raise client.wrong("its task or model rows lack msdb's columns") from None
    if any(not math.isfinite(t["weight"]) or t["weight"] < 0 for t in tasks):
        raise client.wrong("its task weights are not finite non-negative numbers")
    # a refused workload's tasks are not added: its hash is not believed
    hub_workloads: dict[int, dict[str, Any]] = {wid: row for wid, row in hub.workloads.items()
                                                if hub.admitted.get(wid, True) is not None}
    wanted = sorted({t["workload_id"] for t in tasks} - hub.workloads.keys())
    for i in range(0, len(wanted), 200):
        chunk = wanted[i:i + 200]
        for row in client.all_rows("workload", [("id__in", ",".join(map(str, chunk))), ("_col", "shash"),
                                                ("_col", "ir_format")]):
            hub_workloads[int(row["id"])] = row
    return add_pulled_tasks(local, tasks, models, hub_workloads)
