"""docs/user-guide.md stays true: its code blocks run in order, in a scratch folder.

The rules of the guide's blocks (its introduction tells readers the same):
- a ```python block runs as a script in a new interpreter (this one), in a scratch folder that
  holds a copy of examples/team_logs as team_logs/;
- a ```sh block whose first line starts with `msdb ` runs line by line through bash, in the same
  folder; `msdb` there is this interpreter's msdb command. Every line of such a block must be an
  msdb command;
- a block preceded by `<!-- not run: why -->` never runs. A block preceded by
  `<!-- needs TVM: why -->` runs only in `test_user_guide_runs_with_tvm` (marked `tvm`: .ci/run
  runs it in its TVM virtualenv);
- a ```text block preceded by `<!-- output of the block above -->` must equal what the last
  command of the block before it printed;
- every other ```python or ```sh block is an error: a block either runs or says why it does not.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "user-guide.md"
TEAM_LOGS = ROOT / "examples" / "team_logs"
BLOCK_TIMEOUT_S = 300

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*(not run|needs TVM|output of the block above)\b(.*?)-->\s*$")


@dataclass
class Block:
    """One fenced code block of the guide."""

    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    marker: str | None  # "not run", "needs TVM", "output of the block above" or None
    reason: str

    def where(self) -> str:
        return f"{GUIDE.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        return [line for line in self.code.splitlines() if line.strip() and not line.lstrip().startswith("#")]

    def is_msdb_sh(self) -> bool:
        commands = self.commands()
        return self.lang == "sh" and bool(commands) and commands[0].startswith("msdb ")


def guide_blocks(text: str | None = None) -> list[Block]:
    """The fenced blocks of the guide, each with the marker comment right above it (if any)."""
    lines = (GUIDE.read_text() if text is None else text).splitlines()
    blocks: list[Block] = []
    previous = ""  # the last non-blank line outside a block
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{GUIDE.name}:{start + 1}: code block never closed")
        marker = _MARKER.match(previous)
        blocks.append(Block(opening.group(1), "\n".join(body) + "\n", start + 1,
                            marker.group(1) if marker else None,
                            marker.group(2).lstrip(":").strip() if marker else ""))
        previous = ""
        i += 1
    return blocks


def _msdb_command(bindir: pathlib.Path) -> None:
    """`msdb` for the guide's sh blocks: this interpreter's msdb command, whichever venv runs us."""
    bindir.mkdir()
    script = bindir / "msdb"
    code = "import sys; from msdb.cli.main import cli; sys.argv[0] = 'msdb'; sys.exit(cli())"
    script.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c {shlex.quote(code)} \"$@\"\n")
    script.chmod(0o755)


def _failed(block: Block, what: str, proc: subprocess.CompletedProcess[str]) -> str:
    return (f"{block.where()}: {what} exited with {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}"
            f"\n--- stderr ---\n{proc.stderr[-4000:]}")


def run_guide(tmp_path: pathlib.Path, *, with_tvm: bool) -> int:
    """Run the guide's blocks in order; returns how many ran."""
    work = tmp_path / "guide"
    work.mkdir()
    shutil.copytree(TEAM_LOGS, work / "team_logs")
    scripts = tmp_path / "blocks"
    scripts.mkdir()
    bindir = tmp_path / "bin"
    _msdb_command(bindir)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    last_output: str | None = None
    ran = 0
    for block in guide_blocks():
        if block.marker == "output of the block above":
            assert last_output is not None, f"{block.where()}: an output block after a block that did not run"
            printed = [line.rstrip() for line in last_output.strip("\n").splitlines()]
            shown = [line.rstrip() for line in block.code.strip("\n").splitlines()]
            assert printed == shown, f"{block.where()}: the guide shows\n{block.code}\nbut the command printed\n{last_output}"
            continue
        last_output = None
        if block.marker == "not run" or (block.marker == "needs TVM" and not with_tvm):
            continue
        if block.lang == "python":
            script = scripts / f"block_line{block.line}.py"
            script.write_text(block.code)
            proc = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=BLOCK_TIMEOUT_S)
            assert proc.returncode == 0, _failed(block, "the python block", proc)
            last_output = proc.stdout
        elif block.is_msdb_sh():
            for command in block.commands():
                proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                                      timeout=BLOCK_TIMEOUT_S)
                assert proc.returncode == 0, _failed(block, f"`{command}`", proc)
                last_output = proc.stdout
        else:
            continue
        ran += 1
    return ran


def test_every_code_block_runs_or_says_why() -> None:
    blocks = guide_blocks()
    for block in blocks:
        if block.marker is not None and block.marker != "output of the block above":
            assert block.reason, f"{block.where()}: `<!-- {block.marker}: ... -->` must say why"
            assert block.lang in ("python", "sh"), f"{block.where()}: only python and sh blocks are run"
        if block.lang == "python" or block.marker is not None:
            continue
        if block.lang == "sh":
            assert block.is_msdb_sh(), (f"{block.where()}: an sh block that does not start with `msdb ` never runs; "
                                        "mark it `<!-- not run: why -->`")
            for command in block.commands():
                assert command.startswith("msdb "), (f"{block.where()}: `{command}` is not an msdb command; an sh "
                                                     "block that runs holds only msdb commands")
    markers = [b.marker for b in blocks]
    for before, block in zip(blocks, blocks[1:]):
        if block.marker == "output of the block above":
            assert before.marker is None and before.is_msdb_sh(), f"{block.where()}: shows the output of no command"
    run_here = [b for b in blocks if b.marker is None and b.lang in ("python", "sh")]
    assert sum(b.lang == "python" for b in run_here) >= 5 and sum(b.lang == "sh" for b in run_here) >= 5
    assert markers.count("needs TVM") >= 1


def test_block_rules() -> None:
    text = "\n".join([
        "<!-- not run: needs a GPU -->", "```python", "raise SystemExit(1)", "```", "",
        "```sh", "msdb ls team.sqlite", "# a comment", "msdb show team.sqlite ab", "```",
        "<!-- output of the block above -->", "```text", "x", "```",
        "<!-- needs TVM: TVM's side -->", "```python", "import tvm", "```",
    ])
    blocks = guide_blocks(text)
    assert [(b.lang, b.marker, b.reason, b.line) for b in blocks] == [
        ("python", "not run", "needs a GPU", 2), ("sh", None, "", 6), ("text", "output of the block above", "", 12),
        ("python", "needs TVM", "TVM's side", 16)]
    assert blocks[1].commands() == ["msdb ls team.sqlite", "msdb show team.sqlite ab"] and blocks[1].is_msdb_sh()


def test_documents_name_only_files_that_exist() -> None:
    """README.md and docs/ point only at files the repository has (the README once named a
    DESIGN.md that was never committed), and the README points at the guide."""
    docs = sorted((ROOT / "docs").glob("*.md"))
    assert docs, "no documents in docs/"
    for doc in (ROOT / "README.md", *docs):
        text = doc.read_text()
        where = doc.relative_to(ROOT)
        for target in re.findall(r"\]\(([^)#\s]+)[^)]*\)", text):  # [text](target)
            if "://" not in target:
                assert (doc.parent / target).exists(), f"{where} links {target}, which does not exist"
        for name in set(re.findall(r"[\w./-]*\w\.md\b", text)):  # any document named in the text
            assert any((base / name).exists() for base in (doc.parent, ROOT, ROOT / "docs")), \
                f"{where} names {name}, which is not in the repository"
        for name in set(re.findall(r"`((?:docs|examples|tests)/[\w./-]*)`", text)):
            assert (ROOT / name).exists(), f"{where} names {name}, which is not in the repository"
    assert "(docs/user-guide.md)" in (ROOT / "README.md").read_text()


@pytest.mark.slow
def test_user_guide_runs(tmp_path: pathlib.Path) -> None:
    assert run_guide(tmp_path, with_tvm=False) >= 10


@pytest.mark.tvm
def test_user_guide_runs_with_tvm(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("tvm")
    assert run_guide(tmp_path, with_tvm=True) >= 13
