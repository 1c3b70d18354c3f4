"""Whole-database operations behind the `msdb` command line: merge, listing and showing,
verification, pruning and schema migration (DESIGN.md sections 5, 9, 10).

Each module holds one operation as a library function that takes an opened `SQLiteDatabase`
and returns a small result object; the CLI only opens databases, calls these and prints.
TVM import and export live in `msdb.interop.tvm.importer` / `exporter` and share the row-level
helpers of `msdb.ops.store`.

- `store`: opening a database by path or URL, the one write transaction, target/workload/source
  rows, record dedup keys, bulk inserts.
- `merge`: `merge_databases(dest, src)`.
- `catalog`: `list_workloads(db)` (for `msdb ls`), `show_workload(db, hash)` (for `msdb show`).
- `verify`: `verify_database(db)` (integrity, rehash, replay).
- `maintain`: `prune(db, top_k)`, `migrate(location)`.
"""

from __future__ import annotations
