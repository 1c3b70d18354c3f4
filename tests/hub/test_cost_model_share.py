"""A pretrained cost model shipped with a hub snapshot: `msdb publish --cost-model` checks and
copies it and names it in the manifest, `msdb serve` serves it, `msdb pull` fetches it beside DB
byte-identical and checked (size, sha256, a model file with the manifest's stamp), and refuses,
in one line and writing nothing, what a hub tampered with or made too large."""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import threading
from pathlib import Path
from typing import Iterator

import httpx
import numpy as np
import pytest
from click.testing import CliRunner

import msdb
from msdb.cli.main import cli
from msdb.hub.client import MAX_MODEL_BYTES
from msdb.hub.publish import MANIFEST_NAME, METADATA_NAME, file_sha256, publish
from msdb.hub.pull import HubError, pull
from msdb.hub.serve import ServeError, plan_serve
from msdb.tuner.cost_model import saved
from msdb.tuner.cost_model.base import create
from msdb.tuner.cost_model.saved import CostModelFileError
from tests.hub.hubs import contents, file_digest, hub_server, loopback_server
from tests.hub.serving import make_team_db

MODEL_FILE = "cost-models/xgb-llvm.npz"


@pytest.fixture(scope="module")
def team_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_team_db(tmp_path_factory.mktemp("team") / "team.sqlite")


@pytest.fixture(scope="module")
def model_file(team_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real XGBoost model pretrained on a few of the team's llvm records."""
    db = msdb.SQLiteDatabase(str(team_db), read_only=True)
    try:
        records = db.get_all_tuning_records()
    finally:
        db.close()
    model = create("xgb", seed=0)
    assert model.pretrain(records, "llvm", max_per_workload=8) > 0  # type: ignore[attr-defined]
    path = tmp_path_factory.mktemp("model") / "team-xgb.npz"
    model.save(str(path))
    return path


@pytest.fixture(scope="module")
def hub_dir(team_db: Path, model_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("published") / "hub"
    publish(team_db, out, cost_models=[model_file])
    return out


def _leftovers(folder: Path) -> list[str]:
    """Staging folders and temporary files a pull may have left in `folder`."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------- publish


def test_publish_ships_the_model_named_in_the_manifest(hub_dir: Path, model_file: Path) -> None:
    manifest = json.loads((hub_dir / MANIFEST_NAME).read_text())
    meta, _arrays = saved.read_model_file(model_file)
    assert manifest["cost_models"] == [{
        "file": MODEL_FILE, "sha256": file_sha256(model_file), "size": model_file.stat().st_size, "kind": "xgb",
        "format": "msdb-xgb-model-1", "stamp": meta["stamp"]}]
    assert meta["stamp"]["target_kind"] == "llvm" and meta["stamp"]["records"] > 0
    assert (hub_dir / MODEL_FILE).read_bytes() == model_file.read_bytes()
    # datasette's metadata carries the manifest: a hub served with `datasette -m` ships it too
    assert json.loads((hub_dir / METADATA_NAME).read_text())["msdb_manifest"] == manifest
    assert plan_serve(hub_dir).manifest == manifest


def test_cli_publish_prints_the_model(team_db: Path, model_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "hub"
    result = CliRunner().invoke(cli, ["publish", str(team_db), str(out), "--cost-model", str(model_file)])
    assert result.exit_code == 0, result.output
    stamp = saved.read_model_file(model_file)[0]["stamp"]
    line = (f"  with cost model xgb for llvm ({stamp['records']} records of {stamp['workloads']} workloads): "
            f"{MODEL_FILE} (sha256 {file_sha256(model_file)})")
    assert result.output.splitlines()[1] == line
    assert (out / MODEL_FILE).read_bytes() == model_file.read_bytes()


def test_publish_without_a_model_writes_the_manifest_as_before(team_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "hub"
    publish(team_db, out)
    assert "cost_models" not in json.loads((out / MANIFEST_NAME).read_text())
    assert not (out / "cost-models").exists()


def _text(path: Path) -> Path:
    path.write_text("not a model\n")
    return path


def _untrained(path: Path) -> Path:
    create("xgb").save(str(path))
    return path


@pytest.mark.parametrize("make, says", [(_text, "not a cost model file"),
                                        (_untrained, "the cost model has learned nothing")])
def test_publish_refuses_what_is_not_a_trained_model(team_db: Path, hub_dir: Path, tmp_path: Path, make, says) -> None:
    """One `Error:` line naming the file, exit status 1, nothing published: an earlier publish
    directory is as it was, a new one is not made."""
    bad = make(tmp_path / "bad.npz")
    earlier = tmp_path / "earlier"
    shutil.copytree(hub_dir, earlier)
    before = {p.name: p.read_bytes() for p in earlier.rglob("*") if p.is_file()}
    for out in (earlier, tmp_path / "new"):
        result = CliRunner().invoke(cli, ["publish", str(team_db), str(out), "--cost-model", str(bad)])
        assert result.exit_code == 1, result.output
        assert result.output.startswith(f"Error: {bad}: {says}") and result.output.count("\n") == 1
    assert {p.name: p.read_bytes() for p in earlier.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "new").exists() and _leftovers(tmp_path) == []


def test_publish_refuses_two_models_of_one_kind_and_target_kind(team_db: Path, model_file: Path,
                                                               tmp_path: Path) -> None:
    twin = tmp_path / "twin.npz"
    shutil.copyfile(model_file, twin)
    with pytest.raises(CostModelFileError, match=f"^{twin}: {model_file} is also a 'xgb' cost model of 'llvm'"):
        publish(team_db, tmp_path / "hub", cost_models=[model_file, twin])
    assert not (tmp_path / "hub").exists()


def test_publish_refuses_a_model_past_what_a_pull_fetches(team_db: Path, model_file: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import msdb.hub.publish as publish_module

    size = model_file.stat().st_size
    monkeypatch.setattr(publish_module, "MAX_MODEL_BYTES", size - 1)
    with pytest.raises(CostModelFileError, match=f"^{model_file}: {size:,} bytes; a hub ships cost models of at most"):
        publish(team_db, tmp_path / "hub", cost_models=[model_file])
    assert not (tmp_path / "hub").exists()


def test_serve_refuses_a_publish_directory_that_lost_its_model(hub_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "hub"
    shutil.copytree(hub_dir, broken)
    (broken / MODEL_FILE).unlink()
    with pytest.raises(ServeError, match=f"manifest naming cost model {MODEL_FILE} but no such file"):
        plan_serve(broken)


# ---------------------------------------------------------------- serve and pull


@pytest.mark.slow
@pytest.mark.parametrize("server", ["msdb-serve", "datasette-printed"])
def test_pull_fetches_the_model_byte_identical_and_it_loads(hub_dir: Path, model_file: Path, team_db: Path,
                                                           tmp_path: Path, server: str) -> None:
    local = tmp_path / "local.sqlite"
    pulled = tmp_path / "local.xgb-llvm.npz"
    with hub_server(hub_dir, tmp_path / "serve.log", server) as url:
        result = CliRunner().invoke(cli, ["pull", url, str(local)])
        assert result.exit_code == 0, result.output
        stamp = saved.read_model_file(model_file)[0]["stamp"]
        assert result.output.splitlines()[1] == (
            f"cost model xgb for llvm ({stamp['records']} records of {stamp['workloads']} workloads): {pulled}")
        assert pulled.read_bytes() == model_file.read_bytes()
        assert contents(local) == contents(team_db)
        model = saved.load_cost_model(pulled, target="llvm")
        original = saved.load_cost_model(model_file, target="llvm")
        assert model.booster is not None  # type: ignore[attr-defined]
        rows = original.booster.predict(_dmatrix(original))  # type: ignore[attr-defined]
        assert np.array_equal(model.booster.predict(_dmatrix(original)), rows)  # type: ignore[attr-defined]

        # pulled again: the same file is not fetched again
        inode = pulled.stat().st_ino
        again = CliRunner().invoke(cli, ["pull", url, str(local)])
        assert again.exit_code == 0, again.output
        assert again.output.splitlines()[1].endswith(f"{pulled} (unchanged)") and pulled.stat().st_ino == inode

        # --cost-model-out: a file for the one model, or a folder
        into = tmp_path / "models"
        into.mkdir()
        for out, where in ((tmp_path / "mine.npz", tmp_path / "mine.npz"), (into, into / "xgb-llvm.npz")):
            result = CliRunner().invoke(cli, ["pull", url, str(local), "--cost-model-out", str(out)])
            assert result.exit_code == 0, result.output
            assert result.output.splitlines()[1].endswith(f"workloads): {where}")
            assert where.read_bytes() == model_file.read_bytes()

        # refused before anything is fetched or pulled: a file that is not a model, the DB
        # itself, a folder that does not exist
        notes = tmp_path / "notes.txt"
        notes.write_text("mine")
        before = contents(local)
        for out, why in ((notes, f"{notes} exists and is not a cost model file"),
                         (local, f"the cost model destination {local} is the database being pulled into"),
                         (tmp_path / "no" / "m.npz", f"folder {tmp_path / 'no'} does not exist")):
            result = CliRunner().invoke(cli, ["pull", url, str(local), "--cost-model-out", str(out)])
            assert result.exit_code == 1 and why in result.output, result.output
            assert len(result.output.strip().splitlines()) == 1, result.output
        assert contents(local) == before and notes.read_text() == "mine" and not (tmp_path / "no").exists()
        notes.unlink()

        # the route serves what the manifest names, and nothing else
        assert httpx.get(f"{url}-/msdb/snapshot/{MODEL_FILE}").content == model_file.read_bytes()
        for other in ("cost-models/mlp-llvm.npz", "cost-models/..%2Fmanifest.json", "snapshot.sqlite",
                      "cost-models/manifest.json"):
            assert httpx.get(f"{url}-/msdb/snapshot/{other}", follow_redirects=True).status_code == 404, other
    assert _leftovers(tmp_path) == []


def _dmatrix(model: object) -> object:
    """The feature rows `model` learned from, as an XGBoost matrix."""
    import xgboost as xgb

    rows = np.concatenate([f for group in model.data.values() for f in group.features])  # type: ignore[attr-defined]
    return xgb.DMatrix(rows)


@pytest.mark.slow
def test_a_hub_without_a_model_pulls_as_before(hub_dir: Path, team_db: Path, tmp_path: Path) -> None:
    """Bare datasette serves no metadata, so no manifest: the records come, no model file (the
    plugin's route serves no file a served manifest does not name)."""
    local = tmp_path / "local.sqlite"
    with hub_server(hub_dir, tmp_path / "serve.log", "datasette-bare") as url:
        result = CliRunner().invoke(cli, ["pull", url, str(local), "--cost-model-out", str(tmp_path / "m.npz")])
        assert httpx.get(f"{url}-/msdb/snapshot/{MODEL_FILE}").status_code == 404
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1:] == [f"{url}: the hub ships no cost model; nothing written to "
                                              f"{tmp_path / 'm.npz'}"]
    assert contents(local) == contents(team_db)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local.sqlite", "serve.log"]


def _refused(url: str, tmp_path: Path, match: str, **options: object) -> None:
    """A pull into a new DB and into an existing one refused with one line naming `url`; no DB
    made, the existing one and its model unchanged, nothing half-written; from the CLI (where
    `options` are its defaults), one `Error:` line and exit status 1."""
    existing = tmp_path / "existing.sqlite"
    model = tmp_path / "existing.xgb-llvm.npz"
    before = file_digest(existing), file_digest(model)
    for db in (tmp_path / "new.sqlite", existing):
        with pytest.raises(HubError, match=match) as error:
            pull(url, db, **options)  # type: ignore[arg-type]
        assert str(error.value).startswith(f"hub {url}") and "\n" not in str(error.value)
    assert not (tmp_path / "new.sqlite").exists() and not (tmp_path / "new.xgb-llvm.npz").exists()
    assert (file_digest(existing), file_digest(model)) == before
    assert _leftovers(tmp_path) == []
    if options:
        return
    result = CliRunner().invoke(cli, ["pull", url, str(tmp_path / "new.sqlite")])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith(f"Error: hub {url}")
    assert not (tmp_path / "new.sqlite").exists() and _leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_tampered_or_oversized_model_is_refused(hub_dir: Path, model_file: Path, tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    shutil.copytree(hub_dir, hub)
    work = tmp_path / "work"
    work.mkdir()
    good = model_file.read_bytes()
    with hub_server(hub, tmp_path / "serve.log") as url:
        pull(url, work / "existing.sqlite")  # a DB and its model from the hub as published
        assert (work / "existing.xgb-llvm.npz").read_bytes() == good
        (work / "existing.xgb-llvm.npz").write_bytes(good[:-1] + b"?")  # so that a pull would fetch it again
        address = f"{url}-/msdb/snapshot/{MODEL_FILE}"

        # changed after publishing, same size: the sha256 is not the manifest's
        (hub / MODEL_FILE).write_bytes(bytes([good[0] ^ 1]) + good[1:])
        _refused(url, work, f"^hub {url}: {address} is {len(good):,} bytes of sha256 [0-9a-f]{{64}}, its manifest "
                            f"says {len(good):,} bytes of sha256 {file_sha256(model_file)}")
        # grown past the size the manifest gives: cut there
        (hub / MODEL_FILE).write_bytes(good + b"\0" * 100_000)
        _refused(url, work, f"^hub {url}: {address} answered more than {len(good):,} bytes, the size its manifest gives")
        # a manifest's size past what the puller fetches: refused before it is fetched
        (hub / MODEL_FILE).write_bytes(good)
        _refused(url, work, f"^hub {url}: its manifest gives cost model {MODEL_FILE} {len(good):,} bytes; msdb "
                            f"fetches at most 1,000", max_model_bytes=1000)

    # a manifest (datasette's metadata) claiming a model past MAX_MODEL_BYTES is refused as it is read
    metadata = json.loads((hub / METADATA_NAME).read_text())
    metadata["msdb_manifest"]["cost_models"][0]["size"] = 2 * MAX_MODEL_BYTES
    (hub / METADATA_NAME).write_text(json.dumps(metadata))
    with hub_server(hub, tmp_path / "serve-printed.log", "datasette-printed") as url:
        _refused(url, work, f"^hub {url}: its manifest's cost model {MODEL_FILE}: size {2 * MAX_MODEL_BYTES} is not "
                            f"between 1 and {MAX_MODEL_BYTES:,} bytes")


class _ModelHub(http.server.BaseHTTPRequestHandler):
    """A hub whose manifest names a cost model of `size` bytes and whose model route does not end
    (`mode` "endless": bytes without a length, as fast as it can; "trickle": a byte every 0.2 s)."""

    mode = "endless"
    size = 1000
    release: threading.Event

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        entry = {"file": MODEL_FILE, "sha256": "0" * 64, "size": self.size, "kind": "xgb",
                 "format": "msdb-xgb-model-1", "stamp": {"features": "f", "target_kind": "llvm"}}
        answers = {"/-/databases.json": [{"name": "snap", "hash": None}],
                   "/snap.json": {"tables": [{"name": "tuning_record"}], "queries": []},
                   "/-/metadata.json": {"msdb_manifest": {"sha256": None, "cost_models": [entry]}}}
        if self.path in answers:
            body = json.dumps(answers[self.path]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        with contextlib.suppress(OSError):
            while not self.release.is_set():
                self.wfile.write(b"x" * (1 << 16) if self.mode == "endless" else b"x")
                self.wfile.flush()
                if self.mode == "trickle":
                    self.release.wait(0.2)  # the hub's pace, not a synchronization


@contextlib.contextmanager
def _model_hub(mode: str) -> Iterator[str]:
    release = threading.Event()
    with loopback_server(type(f"_ModelHub_{mode}", (_ModelHub,), {"mode": mode, "release": release}), release) as url:
        yield url


@pytest.mark.slow
@pytest.mark.parametrize("mode, match", [("endless", "answered more than 1,000 bytes, the size its manifest gives"),
                                         ("trickle", "no answer within 1 s")])
def test_a_model_that_does_not_end_is_cut(tmp_path: Path, mode: str, match: str) -> None:
    """A model body without a length is cut at the manifest's size, a slow one at the deadline;
    nothing is written."""
    with _model_hub(mode) as url:
        with pytest.raises(HubError, match=f"^hub {url}: .*{match}"):
            pull(url, tmp_path / "new.sqlite", timeout_s=1.0)
    assert list(tmp_path.iterdir()) == []
