"""Staging folders (msdb.staging): the next run removes a folder a killed process left, whatever
moment the kill came, and never one its maker still holds (docs/architecture.md, "Processes,
temporary files and interrupts")."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from msdb.staging import StagingDir, lock_path, sweep, unlock
from msdb import staging

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock")


def test_a_folder_left_empty_by_a_process_killed_at_once_is_removed_by_the_next_run(
        tmp_path: pathlib.Path) -> None:
    """The maker dies the moment it has its folder (nothing written yet): the next run's sweep
    removes it, young and empty as it is."""
    code = textwrap.dedent(f"""
        import os, pathlib
        from msdb.staging import StagingDir
        stage = StagingDir.create(pathlib.Path({str(tmp_path)!r}), ".out.publish-")
        print(stage.path, flush=True)
        os._exit(9)
    """)
    made = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert made.returncode == 9, made.stderr
    left = pathlib.Path(made.stdout.strip())
    assert left.is_dir() and not any(left.iterdir())
    assert sweep(tmp_path, (".out.publish-",)) == [left]
    assert not left.exists()


def test_a_folder_its_maker_holds_is_never_swept(tmp_path: pathlib.Path) -> None:
    stage = StagingDir.create(tmp_path, ".out.export-")
    try:
        assert sweep(tmp_path, (".out.export-",)) == []
        assert stage.path.is_dir()
    finally:
        stage.remove()
    assert not stage.path.exists()


def test_a_fresh_folder_a_sweeper_took_first_is_given_up(tmp_path: pathlib.Path) -> None:
    """Between `mkdtemp` and the lock a sweeper may take the folder: the maker gives it up (and
    makes another) rather than use a folder someone else is removing."""
    taken = tmp_path / ".out.import-taken"
    taken.mkdir()
    sweeper = lock_path(taken)
    try:
        assert staging._lock_fresh(taken) is False
    finally:
        unlock(sweeper)
    gone = tmp_path / ".out.import-gone"
    assert staging._lock_fresh(gone) is False
    mine = staging._lock_fresh(taken)
    assert isinstance(mine, int)
    unlock(mine)
