"""`msdb.tvm` without TVM: msdb never imports TVM when it is imported, and
`as_tvm_database` says in one line what to install, before it opens or creates anything.
Runs in msdb's own environment, which has no TVM; TVM is hidden where it is installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from msdb.errors import MsdbError


def test_importing_msdb_and_msdb_tvm_does_not_import_tvm() -> None:
    code = ("import sys, msdb, msdb.tvm, msdb.database; from msdb.tvm import as_tvm_database; "
            "assert not {'tvm', 'tvm_ffi'} & set(sys.modules), sorted(m for m in sys.modules if m.startswith('tvm'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_without_tvm_as_tvm_database_names_the_extra_and_creates_nothing(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from msdb.tvm import TVMNotInstalled, as_tvm_database

    monkeypatch.setitem(sys.modules, "tvm", None)  # `import tvm` raises ImportError, TVM installed or not
    path = tmp_path / "new.sqlite"
    with pytest.raises(TVMNotInstalled) as caught:
        as_tvm_database(path, create=True)
    message = str(caught.value)
    assert message.startswith("msdb.tvm needs apache-tvm 0.27 (") and "pip install 'msdb[tvm]'" in message
    assert "\n" not in message
    assert isinstance(caught.value, MsdbError) and isinstance(caught.value, ImportError)
    assert not path.exists() and list(tmp_path.iterdir()) == []
