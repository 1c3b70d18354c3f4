"""Bulk INSERT of `tuning_record` rows, the import path's hot loop (budget: >= 20k records/s
into a database of a million; docs/benchmarks.md, "Databases"): multi-row INSERTs bound the way
pysqlite takes them fastest on SQLite, binary `COPY` on PostgreSQL (psycopg 3), a plain
executemany elsewhere, and the page cache a bulk transaction gets (docs/architecture.md,
"Databases", bulk commits)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, Sequence

from sqlalchemy import Integer, insert
from sqlalchemy.engine import Connection

from msdb.database import models as M
from msdb.database.engine import CACHE_KIB, dbapi_connection

__all__ = ["RECORD_COLUMNS", "BULK_CACHE_KIB", "bulk_cache_kib", "bulk_insert", "insert_record_rows",
           "insert_record_params"]

BULK_CACHE_KIB = 262144  # the most a bulk commit raises the page cache to (bulk_cache_kib)
_INSERT_CHUNK = 5000

#: The columns of a `tuning_record` row as the bulk paths take them, in this order.
RECORD_COLUMNS = ("workload_id", "target_id", "source_id", "trace", "trace_hash", "run_secs", "mean_run_secs",
                  "is_valid", "args_info")


def bulk_cache_kib(records: int) -> int:
    """The page cache for a bulk commit of `records` records: about 4 KiB each (a record is
    2-3 KB of table pages plus its share of the top-k index's leaves), at least `CACHE_KIB`,
    at most `BULK_CACHE_KIB`. With the normal cache a 50k-record commit into a database of
    a million records evicted the top-k index's leaves (every batch touches nearly all of
    them) to make room for new table pages, and read them back from the file for the next
    records; that made inserting twice as slow at 1M records as at 100k."""
    return max(CACHE_KIB, min(BULK_CACHE_KIB, records * 4))


@functools.lru_cache(maxsize=16)
def _insert_sql(dialect: Any, table: Any, columns: tuple[str, ...]) -> tuple[str, tuple[str, ...] | None]:
    """The INSERT for `columns` in the driver's own parameter style, and the parameter order
    when that style is positional (None: named)."""
    compiled = insert(table).compile(dialect=dialect, column_keys=list(columns))
    return compiled.string, (tuple(compiled.positiontup or ()) if compiled.positional else None)


def bulk_insert(conn: Connection, table: Any, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Bulk INSERT through the DBAPI cursor of `conn`'s transaction. SQLAlchemy's per-row
    parameter processing doubled the cost of a bulk commit; the values here are plain ints,
    floats, bools and strings that every driver takes as they are."""
    sql, order = _insert_sql(conn.dialect, table, columns)
    if order is None:
        params: list[Any] = [dict(zip(columns, row)) for row in rows]
    elif order == columns:
        params = rows
    else:
        index = [columns.index(name) for name in order]
        params = [tuple(row[i] for i in index) for row in rows]
    cursor = dbapi_connection(conn).cursor()
    try:
        for start in range(0, len(params), _INSERT_CHUNK):
            cursor.executemany(sql, params[start:start + _INSERT_CHUNK])
    finally:
        cursor.close()


#: Rows per INSERT statement of a SQLite bulk insert (x 9 columns: 900 parameters, under the
#: 999 that old SQLite builds allow).
_ROWS_PER_INSERT = 100
#: What a NULL is bound as in a SQLite bulk insert (see `_SQLiteBulkInsert`).
_SQLITE_NULL = ""


class _SQLiteBulkInsert:
    """A bulk INSERT of rows given as one flat parameter list, tuned for pysqlite.

    Two costs dominated SQLite's share of a bulk commit besides the B-tree work itself:
    - pysqlite passes `None` and `bool` (anything but exact int, float, str, bytes) through its
      adapter protocol, a failed attribute lookup that raises and clears an exception, about a
      microsecond per value, three values per record. Nullable columns are therefore bound as
      `NULLIF(?, '')` with `''` standing for NULL (no nullable column of these tables ever
      holds an empty string: they hold ids, numbers and JSON), and booleans as 0/1, which is
      what SQLite stores for them anyway.
    - every executed statement re-reads and rewrites the AUTOINCREMENT counter and sets up
      its foreign-key and statement bookkeeping; one INSERT of `_ROWS_PER_INSERT` rows does
      that once for all of them.
    """

    def __init__(self, table: Any, columns: tuple[str, ...]) -> None:
        values = ", ".join(f"NULLIF(?, '{_SQLITE_NULL}')" if table.c[name].nullable else "?" for name in columns)
        head = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES "
        self.width = len(columns)
        self.single = head + f"({values})"
        self.multi = head + ", ".join([f"({values})"] * _ROWS_PER_INSERT)

    def __call__(self, conn: Connection, params: list[Any]) -> None:
        """INSERT the rows of `params` (`width` values per row, in column order)."""
        width = self.width
        step = _ROWS_PER_INSERT * width
        full = len(params) // step * step
        cursor = dbapi_connection(conn).cursor()
        try:
            for offset in range(0, full, step):
                cursor.execute(self.multi, params[offset:offset + step])
            if full < len(params):
                cursor.executemany(self.single, [params[i:i + width] for i in range(full, len(params), width)])
        finally:
            cursor.close()


_RECORD_INSERT = _SQLiteBulkInsert(M.tuning_record, RECORD_COLUMNS)


def _copy_type(column: Any) -> str:
    """The PostgreSQL type name psycopg's binary COPY writes a column's values as."""
    from sqlalchemy import BigInteger, Boolean, Float

    kind = column.type
    if isinstance(kind, BigInteger):
        return "int8"
    if isinstance(kind, Integer):
        return "int4"
    if isinstance(kind, Float):
        return "float8"
    if isinstance(kind, Boolean):
        return "bool"
    return "text"  # Text and String: the same binary form as varchar


def _copy_rows(conn: Connection, table: Any, columns: tuple[str, ...], rows: Iterable[Sequence[Any]]) -> None:
    """PostgreSQL's bulk path (psycopg 3): `COPY table (columns) FROM STDIN` in binary format in
    `conn`'s transaction, rows streamed by psycopg's C row writer. An executemany of INSERTs
    spent most of its time in per-statement round trips; binary COPY also spares the client
    formatting numbers as text (40% of its CPU time in COPY) and the server parsing them."""
    cursor = dbapi_connection(conn).cursor()
    try:
        with cursor.copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([_copy_type(table.c[name]) for name in columns])
            write_row = copy.write_row
            for one in rows:
                write_row(one)
    finally:
        cursor.close()


def _copies(conn: Connection) -> bool:
    """Whether `conn` takes `_copy_rows` (PostgreSQL through psycopg 3)."""
    return conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg"


def _sqlite_fast(conn: Connection) -> bool:
    """Whether `conn` takes `_SQLiteBulkInsert` (pysqlite, positional `?` parameters)."""
    return conn.dialect.name == "sqlite" and conn.dialect.paramstyle == "qmark"


def insert_record_params(conn: Connection, params_for: Callable[[Any, tuple[Any, Any]], list[Any]]) -> None:
    """INSERT the `tuning_record` rows that `params_for(null, bools)` builds, in `conn`'s
    transaction: their values flat, `RECORD_COLUMNS` per record, with NULL spelled `null` and
    False/True as `bools`, which is the form the fastest path for `conn` binds as they are (the
    commit path of the SQL database class, which builds each record's values once)."""
    if _sqlite_fast(conn):
        _RECORD_INSERT(conn, params_for(_SQLITE_NULL, (0, 1)))
        return
    params = params_for(None, (False, True))
    width = len(RECORD_COLUMNS)
    rows = [tuple(params[i:i + width]) for i in range(0, len(params), width)]
    if _copies(conn):
        _copy_rows(conn, M.tuning_record, RECORD_COLUMNS, rows)
    else:
        bulk_insert(conn, M.tuning_record, RECORD_COLUMNS, rows)


def insert_record_rows(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """INSERT `tuning_record` rows (tuples in `RECORD_COLUMNS` order, NULL as None, is_valid
    a bool) in `conn`'s transaction: the SQLite fast path of `_SQLiteBulkInsert` where it
    applies, else `bulk_insert`. For writers that build rows themselves (import, merge)."""
    if not rows:
        return
    if _sqlite_fast(conn):
        null = _SQLITE_NULL
        params: list[Any] = []
        extend = params.extend
        for workload_id, target_id, source_id, trace, trace_hash, run_secs, mean, valid, args in rows:
            extend((workload_id, target_id, null if source_id is None else source_id, trace, trace_hash,
                    null if run_secs is None else run_secs, null if mean is None else mean, 1 if valid else 0,
                    null if args is None else args))
        _RECORD_INSERT(conn, params)
    elif _copies(conn):  # binary COPY takes exactly a float and a bool (rows from JSON may hold ints)
        _copy_rows(conn, M.tuning_record, RECORD_COLUMNS,
                   ((w, t, s, trace, trace_hash, run, None if mean is None else float(mean), bool(valid), args)
                    for w, t, s, trace, trace_hash, run, mean, valid, args in rows))
    else:
        bulk_insert(conn, M.tuning_record, RECORD_COLUMNS, list(rows))
