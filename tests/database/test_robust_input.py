"""Every parser of untrusted bytes has bounds, and an import refuses records that cannot belong to
their workload: each hostile or mistaken input below is one bad line naming
file:line (or one clear error), never a traceback, a hang or gigabytes; `--skip-bad` skips it."""

from __future__ import annotations

import contextlib
import json
import logging
import pathlib
import shlex
import signal
import threading
import time
from typing import Any, Iterator

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from msdb.cli.main import cli
from msdb.database import SQLiteDatabase, merge as merge_module
from msdb.database.location import open_database
from msdb.database.merge import merge_databases
from msdb.database.tvm_import import ImportAborted, import_tvm
from msdb.hashing import structural_equal, structural_hash
from msdb.interop.tvm import grammar, import_reader
from msdb.interop.tvm.grammar import LineParser
from msdb.interop.tvm.payload import payload_bytes
from msdb.interop.tvm.import_reader import read_import
from msdb.ir import expr as E
from msdb.ir import stmt as S
from msdb.ir import to_script
from msdb.ir.codec import UnsafeBlob, dump_ir, load_ir
from msdb.ir.function import PrimFunc
from msdb.ir.tree_size import TreeTooLarge
from msdb.records import Target, TargetError
from msdb.records.target import MAX_TARGET_CHARS, _split_words
from tests.cli.helpers import RECORD_FILE, TEAMS, WORKLOAD_FILE, copy_team, edit_lines, frame, query

from .helpers import CPU, matmul, record


def _import(db_path: pathlib.Path, *paths: pathlib.Path, **options: Any):
    db = open_database(db_path, create=True)
    try:
        return import_tvm(db, list(paths), **options)
    finally:
        db.close()


def _run(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="msdb")


def _append_record(wd: pathlib.Path, line: str) -> int:
    """Append a record line to the work_dir; its line number."""
    lines = (wd / RECORD_FILE).read_text().splitlines()
    (wd / RECORD_FILE).write_text("\n".join(lines + [line]) + "\n")
    return len(lines) + 1


def _edited(line: str, edit) -> str:  # type: ignore[no-untyped-def]
    record_ = json.loads(line)
    edit(record_)
    return json.dumps(record_, separators=(",", ":"))


FIRST = (TEAMS["team_a"] / RECORD_FILE).read_text().splitlines()[0]


def _bad_reasons(wd: pathlib.Path, **options: Any) -> dict[int, str]:
    plan = read_import([wd], **options)
    return {b.line: b.reason for b in plan.bad_lines if b.path.name == RECORD_FILE}


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Fail (instead of running for hours) when the block takes longer than `seconds`."""
    def expired(*_: Any) -> None:
        raise TimeoutError(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------- 1. JSON nesting and line length


def test_a_line_nested_100000_deep_is_one_bad_line(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_a", tmp_path / "wd")
    deep = "[" * 100_000 + "]" * 100_000
    number = _append_record(wd, deep)
    edit_lines(wd / WORKLOAD_FILE, lambda ls: ls + [deep + "\n"])
    reasons = _bad_reasons(wd)
    assert "nested too deeply" in reasons[number]
    db = tmp_path / "db.sqlite"
    result = _run("import", db, wd)
    assert result.exit_code == 1 and "Traceback" not in result.output and "RecursionError" not in result.output
    assert result.stderr.startswith(f"Error: {wd / WORKLOAD_FILE}:3: JSON nested too deeply")
    assert result.stderr.count("\n") == 1
    result = _run("import", db, wd, "--skip-bad")
    assert result.exit_code == 0, result.output
    assert f"{wd / RECORD_FILE}:{number}: JSON nested too deeply" in result.stderr
    assert query(db, "SELECT COUNT(*) FROM tuning_record") == [(128,)]


def test_a_deep_line_is_bad_in_parsing_workers_too(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_reader, "_CHUNK", 30)
    wd = copy_team("team_a", tmp_path / "wd")
    number = _append_record(wd, "[0,[" + "[" * 50_000 + "]" * 50_000 + ",null,null,null]]")
    one, two = _bad_reasons(wd, workers=1), _bad_reasons(wd, workers=2)
    assert one == two and list(one) == [number] and "nested too deeply" in one[number]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_line_longer_than_the_bound_is_one_bad_line(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                                      workers: int) -> None:
    monkeypatch.setattr(grammar, "MAX_LINE_CHARS", 60_000)  # the longest team_a line is ~54,000
    monkeypatch.setattr(import_reader, "_CHUNK", 30)
    wd = copy_team("team_a", tmp_path / "wd")
    number = _append_record(wd, _edited(FIRST, lambda r: r[1][2].update(tag="x" * 70_000)))
    reasons = _bad_reasons(wd, workers=workers)
    assert list(reasons) == [number]
    assert reasons[number].startswith("line is 7") and "msdb reads lines of at most 60,000" in reasons[number]


# ---------------------------------------------------------------- 2. IR blobs


HOSTILE_BLOBS = {
    "bytes8 claiming 2^62": b"\x80\x05\x8e" + (1 << 62).to_bytes(8, "little") + b"abc",  # 14 bytes
    "memo put to slot 2^31 - 1": b"\x80\x05N" + b"r" + (2**31 - 1).to_bytes(4, "little") + b".",
    "frame of 2^40": b"\x80\x05\x95" + (1 << 40).to_bytes(8, "little") + b"N.",
    "unicode8 claiming 2^63 - 1": b"\x80\x05\x8d" + (2**63 - 1).to_bytes(8, "little") + b".",
    "negative long4": b"\x80\x05\x8b\xff\xff\xff\xff.",
}


@pytest.mark.parametrize("blob", HOSTILE_BLOBS.values(), ids=HOSTILE_BLOBS.keys())
def test_the_ir_codec_refuses_sizes_beyond_the_blob(blob: bytes) -> None:
    with pytest.raises(UnsafeBlob, match="IR blob"):
        load_ir(blob)


def test_an_ir_blob_claiming_2_62_bytes_falls_back_to_the_script(tmp_path: pathlib.Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "t.db"
    db = SQLiteDatabase(path)
    w = db.commit_workload(matmul())
    db.commit_tuning_record(record(w, [1e-3]))
    blob = HOSTILE_BLOBS["bytes8 claiming 2^62"]
    assert len(blob) == 14
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE workload SET ir_blob = :b"), {"b": blob})
    db.close()
    again = SQLiteDatabase(path)
    try:
        with caplog.at_level(logging.WARNING, logger="msdb.database.rows"):
            best = again.query_tuning_record(matmul(), CPU)
            assert best is not None and structural_equal(best.workload.mod, matmul())
            (stored,) = again.workloads()
            assert structural_equal(stored.mod, matmul())
    finally:
        again.close()
    assert any("IR blob unreadable (UnsafeBlob" in r.getMessage() for r in caplog.records)


def _dag(levels: int, x: E.Var | None = None) -> E.PrimExpr:
    """`Add(prev, prev)` `levels` times: 2 * levels nodes, a tree of 2^levels leaves."""
    expr: E.PrimExpr = x if x is not None else E.Var("x", "float32")
    for _ in range(levels):
        expr = E.Add(expr, expr, "float32")
    return expr


def _func(expr: E.PrimExpr, *params: E.Var) -> PrimFunc:
    return PrimFunc(params, {}, S.Evaluate(expr))


def test_an_ir_blob_of_a_dag_falls_back_to_the_script(tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "t.db"
    db = SQLiteDatabase(path)
    db.commit_workload(matmul())
    db.close()
    huge = _func(_dag(300))
    with SQLiteDatabase(path).engine.begin() as conn:
        conn.execute(text("UPDATE workload SET ir_blob = :b"), {"b": dump_ir(huge)})
    again = SQLiteDatabase(path)
    try:
        with _deadline(30), caplog.at_level(logging.WARNING, logger="msdb.database.rows"):
            (stored,) = again.workloads()
            assert structural_equal(stored.mod, matmul())
    finally:
        again.close()
    assert any("TreeTooLarge" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- 3. shared subexpressions


def _dag_payload(levels: int) -> str:
    """team_a's GMM workload line with its update's value replaced by `levels` of
    `Add(prev, prev)`: a graph of ~60 bytes per level."""
    shash, payload = json.loads((TEAMS["team_a"] / WORKLOAD_FILE).read_text().splitlines()[0])
    graph = json.loads(payload_bytes(payload))
    nodes = graph["nodes"]
    store = max(i for i, n in enumerate(nodes) if n["type"] == "tirx.BufferStore")
    prev = nodes[store]["data"]["value"]
    ty = nodes[prev]["data"]["ty"]
    for _ in range(levels):
        nodes.append({"type": "prim.Add", "data": {"span": 0, "ty": ty, "a": prev, "b": prev}})
        prev = len(nodes) - 1
    nodes[store]["data"]["value"] = prev
    return json.dumps([shash, frame(json.dumps(graph, separators=(",", ":")).encode())])


def test_a_dag_payload_of_22_levels_is_refused_not_hashed() -> None:
    """2^22 leaves: beyond `MAX_TREE_NODES`, refused at once (it used to take seconds and a GB)."""
    start = time.perf_counter()
    reason = LineParser().workload(_dag_payload(22))
    assert isinstance(reason, str) and "expands to more than 1,000,000 IR nodes" in reason
    assert time.perf_counter() - start < 5


def test_an_18_kb_dag_payload_costs_linear_time() -> None:
    line = _dag_payload(300)
    assert len(line) > 18_000
    with _deadline(30):
        reason = LineParser().workload(line)
    assert isinstance(reason, str) and "expands to more than" in reason


@pytest.mark.slow
def test_hashing_and_printing_a_dag_stop_with_one_error() -> None:
    func = _func(_dag(300))
    with _deadline(60):
        with pytest.raises(TreeTooLarge, match="cannot be hashed"):
            structural_hash(func)
        with pytest.raises(TreeTooLarge, match="expands to more than"):
            to_script(func)
    # shared but small: hashed and printed as the tree it stands for, as before
    x = E.Var("x", "float32")

    def tree(levels: int) -> E.PrimExpr:
        return x if levels == 0 else E.Add(tree(levels - 1), tree(levels - 1), "float32")

    shared, unshared = _func(_dag(3, x), x), _func(tree(3), x)
    assert structural_hash(shared) == structural_hash(unshared)
    assert to_script(shared) == to_script(unshared)


# ---------------------------------------------------------------- 4. targets


def test_a_long_target_string_parses_in_linear_time() -> None:
    """A growth ratio, not a time: the two sizes are parsed in turn and each keeps its least
    CPU time (`process_time`: time this process was not running does not count), so a loaded
    machine (which read 22x in wall time) does not decide it."""
    def cpu_seconds(target: str, n: int) -> float:
        start = time.process_time()
        assert len(Target(target).get("mattr")) == n
        return time.process_time() - start

    sizes = (1_500, 12_000)  # 8x longer; 60,000 characters: under MAX_TARGET_CHARS
    targets = {n: "llvm -mattr=" + ",".join(["+avx"] * n) for n in sizes}
    best = dict.fromkeys(sizes, float("inf"))
    for _ in range(9):
        for n in sizes:
            best[n] = min(best[n], cpu_seconds(targets[n], n))
    small, large = best[sizes[0]], best[sizes[1]]
    assert large < 16 * small, (small, large)  # linear: 8x; shlex took 25x and more (quadratic)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" \t\n'\"\\ab=-,é", max_size=16))
def test_target_words_split_as_shlex_does(text_: str) -> None:
    try:
        expected: Any = shlex.split(text_)
    except ValueError as exc:
        expected = str(exc)
    try:
        got: Any = _split_words(text_)
    except ValueError as exc:
        got = str(exc)
    assert got == expected


def test_a_100_mb_tag_is_refused_with_one_error() -> None:
    start = time.perf_counter()
    with pytest.raises(TargetError, match=f"target config is longer than {MAX_TARGET_CHARS:,} characters"):
        Target({"kind": "llvm", "tag": "x" * 100_000_000})
    with pytest.raises(TargetError, match="target string is longer than"):
        Target("llvm -tag=" + "x" * 100_000_000)
    assert time.perf_counter() - start < 5


def test_a_long_tag_and_a_lone_surrogate_are_bad_lines_at_import(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_a", tmp_path / "wd")
    long_tag = _append_record(wd, _edited(FIRST, lambda r: r[1][2].update(tag="x" * 1_000_000)))
    surrogate = _append_record(wd, _edited(FIRST, lambda r: r[1][2].update(tag="gpu\ud800")))
    assert "\\ud800" in (wd / RECORD_FILE).read_text()  # as a JSON escape: the file is UTF-8
    reasons = _bad_reasons(wd)
    assert reasons[long_tag].startswith("bad target: target config is longer than 65,536 characters")
    assert reasons[surrogate].startswith("bad target: ") and "lone surrogate" in reasons[surrogate]
    db = tmp_path / "db.sqlite"
    _import(db, wd, skip_bad=True)
    out = tmp_path / "out"
    assert _run("export", db, out).exit_code == 0  # nothing unwritable got in
    assert len((out / RECORD_FILE).read_text().splitlines()) == 2  # the best record of each workload


# ---------------------------------------------------------------- 5. run_secs


def test_negative_and_nan_run_secs_are_bad_lines(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_a", tmp_path / "wd")
    negative = _append_record(wd, _edited(FIRST, lambda r: r[1].__setitem__(1, [-0.5])))
    mixed = _append_record(wd, _edited(FIRST, lambda r: r[1].__setitem__(1, [0.001, -1e-9])))
    nan = _append_record(wd, _edited(FIRST, lambda r: r[1].__setitem__(1, [float("nan")])))
    reasons = _bad_reasons(wd)
    assert reasons[negative] == "run_secs [-0.5] holds a negative time"
    assert reasons[mixed] == "run_secs [0.001, -1e-09] holds a negative time"
    assert reasons[nan] == "run_secs [NaN] holds a value that is not a finite number"
    db = tmp_path / "db.sqlite"
    _import(db, wd, skip_bad=True)
    assert query(db, "SELECT MIN(mean_run_secs) >= 0 FROM tuning_record") == [(1,)]


# ---------------------------------------------------------------- 6. instruction kinds


def test_an_instruction_kind_tvm_does_not_have_is_a_bad_line(tmp_path: pathlib.Path) -> None:
    wd = copy_team("team_a", tmp_path / "wd")
    enter = [inst[0] for inst in json.loads(FIRST)[1][0][0]].index("EnterPostproc")  # decisions stay put
    number = _append_record(wd, _edited(FIRST, lambda r: r[1][0][0].insert(enter, ["Frobnicate", ["b0"], [], []])))
    reasons = _bad_reasons(wd)
    assert list(reasons) == [number]
    assert reasons[number] == (f'trace instruction {enter} is of kind "Frobnicate", which TVM does not have '
                               "(--unknown-kinds imports it; it can never be replayed)")
    assert _bad_reasons(wd, unknown_kinds=True) == {}
    db = tmp_path / "db.sqlite"
    result = _run("import", db, wd)
    assert result.exit_code == 1 and f"{wd / RECORD_FILE}:{number}: trace instruction {enter}" in result.stderr
    result = _run("import", db, wd, "--unknown-kinds")
    assert result.exit_code == 0, result.output
    assert query(db, "SELECT COUNT(*) FROM tuning_record") == [(129,)]


def test_every_kind_of_the_fixture_logs_is_a_tvm_kind() -> None:
    from msdb.interop.tvm.trace_check import tvm_kinds

    kinds = set()
    for path in sorted(pathlib.Path(TEAMS["team_a"]).parents[1].rglob(RECORD_FILE)):
        for line in path.read_text().splitlines():
            if line.strip():
                kinds |= {inst[0] for inst in json.loads(line)[1][0][0]}
    assert kinds and kinds <= tvm_kinds()


# ---------------------------------------------------------------- 7. records that cannot belong to their workload


def test_records_paired_with_another_teams_workloads_are_refused(tmp_path: pathlib.Path) -> None:
    """The probe: team_a's workload file with team_b's record file used to attach team_b's conv
    records to team_a's `linear` workload, silently."""
    db = tmp_path / "db.sqlite"
    paths = [TEAMS["team_a"] / WORKLOAD_FILE, TEAMS["team_b"] / RECORD_FILE]
    with pytest.raises(ImportAborted) as info:
        _import(db, *paths)
    # team_b's GMM records (workload 0) fit team_a's GMM, the same workload; its conv records
    # (workload 1) cannot belong to team_a's workload 1, the dense layer
    bad = info.value.bad_lines
    conv = [n for n, line in enumerate(paths[1].read_text().splitlines(), start=1) if line.startswith("[1,")]
    assert [b.line for b in bad] == conv and all(b.path == paths[1] for b in bad)
    assert bad[0].reason == (
        "trace instruction 0 gets block 'PadInput', which the workload does not have (its blocks: Y, Z, root): this "
        "record cannot belong to workload 1 of database_workload.json (is the record file paired with its own "
        "workload file?)")
    result = _run("import", db, *paths)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.startswith(f"Error: {paths[1]}:{conv[0]}: trace instruction 0 gets block 'PadInput'")
    assert result.stderr.rstrip("\n").endswith("(and 63 more bad lines); nothing was imported (--skip-bad imports the "
                                               "other lines)")
    result = _run("import", db, *paths, "--skip-bad")
    assert result.exit_code == 0 and result.stderr.count("(skipped)") == 64
    assert query(db, "SELECT COUNT(*) FROM tuning_record") == [(64,)]


def test_a_trace_with_more_loops_than_its_block_has_is_refused(tmp_path: pathlib.Path) -> None:
    """team_a's GMM trace (4 loops around block Z) pointed at team_a's dense workload (2 loops
    around its own block Z): same block name, impossible loops."""
    wd = copy_team("team_a", tmp_path / "wd")
    number = _append_record(wd, "[1," + FIRST[3:])
    reasons = _bad_reasons(wd)
    assert reasons == {number: (
        "trace instruction 3 gets 4 loops around block 'Z', but the workload has 2 there: this record cannot "
        "belong to workload 1 of database_workload.json (is the record file paired with its own workload file?)")}


def test_the_fit_check_accepts_every_fixture_log(tmp_path: pathlib.Path) -> None:
    root = pathlib.Path(TEAMS["team_a"]).parents[1]
    work_dirs = sorted(p.parent for p in root.rglob(RECORD_FILE))
    assert work_dirs, f"no {RECORD_FILE} under {root}"
    plan = read_import(work_dirs, opaque=True, workers=1)
    assert [b for b in plan.bad_lines if "cannot belong" in b.reason] == []


# ---------------------------------------------------------------- 8. merge and concurrent writers


@pytest.mark.slow
def test_a_concurrent_writer_succeeds_during_a_long_merge(tmp_path: pathlib.Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    src, dest = tmp_path / "src.sqlite", tmp_path / "dest.sqlite"
    _import(src, TEAMS["team_a"], TEAMS["team_b"], TEAMS["team_c"])
    SQLiteDatabase(dest).close()
    monkeypatch.setattr(merge_module, "_BATCH", 32)
    monkeypatch.setattr(merge_module, "CHUNK_SECONDS", 0.1)
    slow_insert = merge_module.insert_record_rows

    def insert(conn: Any, rows: Any) -> None:  # a merge of 384 records made to hold the lock ~2.4 s
        time.sleep(0.2)
        slow_insert(conn, rows)

    monkeypatch.setattr(merge_module, "insert_record_rows", insert)
    errors: list[BaseException] = []

    def merge() -> None:
        a, b = open_database(dest), open_database(src)
        try:
            merge_databases(a, b)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            a.close()
            b.close()

    thread = threading.Thread(target=merge)
    thread.start()
    time.sleep(0.5)
    writer = SQLiteDatabase(dest, busy_timeout_s=1.0)  # a tuner that waits 1 s, not 30
    committed = 0
    try:
        while thread.is_alive() and committed < 3:
            w = writer.commit_workload(matmul(n=8 + committed))
            writer.commit_tuning_record(record(w, [1e-3]))
            committed += 1
            time.sleep(0.2)
    finally:
        writer.close()
        thread.join()
    assert errors == [] and committed >= 1
    assert query(dest, "SELECT COUNT(*) FROM tuning_record") == [(384 + committed,)]
    monkeypatch.undo()
    b, a = open_database(src), open_database(dest)
    try:
        again = merge_databases(a, b)  # idempotent across chunks
    finally:
        a.close()
        b.close()
    assert again.records_new == 0 and again.records_duplicate == 384
