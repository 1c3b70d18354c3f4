"""Staging folders: hidden temporary folders beside an output, which the next run removes when
the process that made them died (docs/architecture.md, "Processes, temporary files and
interrupts").

An output written atomically (an export's work_dir, a new database, the tuner's artifacts) is
first written into a fresh folder and renamed into place. A process killed before the rename
cannot remove its folder, so every run first sweeps the folders of its kind (`sweep`): the
process that owns a folder holds an exclusive `flock` on it for as long as it uses it, so a
folder whose lock can be taken belongs to nobody and is removed, and a folder in use is left
alone (a concurrent export, a parallel import). Where the file system has no locks, only
folders untouched for a day are removed.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Literal

__all__ = ["write_atomically", "StagingDir", "sweep", "lock_path", "unlock", "aside_name", "NEW_DATABASE_KINDS", "sweep_new_database",
           "stage_new_database"]

logger = logging.getLogger(__name__)

#: Without file locks, a staging folder untouched this long (seconds) is taken as abandoned.
STALE_AFTER_S = 24 * 3600.0
#: The characters of `mkdtemp`'s names, which `aside_name` uses too.
_NAME_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"
#: How often `StagingDir.create` makes a new folder when sweepers keep taking its fresh ones.
_CREATE_TRIES = 100
#: The commands that build a new database file in a staging folder beside it (`.DB.<kind>-*`)
#: and link it into place once committed; each removes what killed ones of every kind left.
NEW_DATABASE_KINDS = ("import", "merge", "pull")


def lock_path(path: Path, *, wait: bool = False) -> int | None:
    """An fd of `path` holding an exclusive flock on it; None when the file system has no
    locks. `wait=False` raises `BlockingIOError` when another process holds it."""
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise BlockingIOError(exc.errno, exc.strerror) from None
        logger.debug("%s: no file locks here (%s)", path, exc)
        return None
    return fd


def unlock(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


class StagingDir:
    """A fresh folder `<parent>/<prefix>XXXXXXXX`, locked until `release` or `remove`. Make it
    with `StagingDir.create`, which first sweeps the abandoned folders of the same prefix."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def create(cls, parent: Path, prefix: str, *, min_age_s: float = 0.0) -> StagingDir:
        """A new staging folder; `min_age_s` as for `sweep`."""
        sweep(parent, (prefix,), min_age_s=min_age_s)
        for _ in range(_CREATE_TRIES):
            path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
            fd = _lock_fresh(path)
            if fd is not False:
                return cls(path, fd)
        raise OSError(f"cannot make a staging folder {prefix}* in {parent}: other processes kept removing it")

    def release(self) -> None:
        """Drop the lock (the folder was renamed into place, or removed)."""
        unlock(self._fd)
        self._fd = None

    def remove(self) -> None:
        """Remove the folder (if still there) and drop the lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.release()


def _lock_fresh(path: Path) -> int | None | Literal[False]:
    """The lock on a folder this process just made, or False when a concurrent sweep took it
    first (between `mkdtemp` and the lock the folder is unowned: a sweeper may lock and remove
    it). Locked and still the folder at `path`, it is ours: no sweep will touch it again. So a
    sweep needs no grace for young folders, and a folder a killed process left is removed by the
    very next run, whatever moment the kill came."""
    try:
        fd = lock_path(path)
    except (BlockingIOError, FileNotFoundError):
        return False  # a sweeper holds it, or already removed it
    if fd is None:
        return None
    if not _same_file(fd, path):
        unlock(fd)
        return False  # removed by a sweeper after we opened it; the name is someone else's now
    return fd


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open `fd` is still the file at `path` (not removed or renamed meanwhile)."""
    try:
        mine, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def aside_name(parent: Path, prefix: str) -> Path:
    """A free name `<parent>/<prefix>XXXXXXXX` (eight characters of [a-z0-9_], as `mkdtemp`'s)
    to rename a locked folder to (an earlier output moved aside). Nothing is made: a folder
    made to reserve the name would sit there empty and unlocked until the rename, and a
    concurrent sweep could take it."""
    for _ in range(_CREATE_TRIES):
        path = parent / f"{prefix}{''.join(secrets.choice(_NAME_CHARACTERS) for _ in range(8))}"
        if not os.path.lexists(path):
            return path
    raise OSError(f"no free name {prefix}* in {parent}")


def sweep(parent: Path, prefixes: tuple[str, ...], *, keep: Callable[[Path], bool] | None = None,
          min_age_s: float = 0.0, match: Callable[[str], bool] | None = None) -> list[Path]:
    """Remove the folders in `parent` named `<prefix>...` that no live process holds (see the
    module docstring); returns them. `keep(path)` may take a folder over instead (it is called
    with the folder locked, and returns True when it moved or kept the folder). `min_age_s`:
    also spare folders changed more recently than that (for a shared folder such as /tmp, where
    a long-running process of an older msdb may use one without a lock). `match(name)`: also
    the folders whose name it accepts (the staging folders of a command for any OUT, which no
    fixed prefix names: `msdb.hub.publish`)."""
    try:
        entries = [entry for entry in os.scandir(parent)
                   if (entry.name.startswith(prefixes) or (match is not None and match(entry.name)))
                   and entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    removed = []
    now = time.time()
    for entry in entries:
        path = Path(entry.path)
        try:
            fd = lock_path(path)
        except BlockingIOError:
            continue  # in use
        except OSError:
            continue  # gone meanwhile, or unreadable: not ours to judge
        try:
            if fd is not None and not _same_file(fd, path):
                continue  # renamed or replaced since it was listed: judge it at the next sweep
            age = now - path.stat().st_mtime
            if age < (STALE_AFTER_S if fd is None else min_age_s):
                continue
            if keep is not None and keep(path):
                continue
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
            logger.info("removed %s, left behind by a process that died", path)
        except OSError:
            continue
        finally:
            unlock(fd)
    return removed


def sweep_new_database(file: Path) -> list[Path]:
    """Remove the staging folders that killed commands building the database `file` left
    beside it (`NEW_DATABASE_KINDS`)."""
    return sweep(file.parent, tuple(f".{file.name}.{kind}-" for kind in NEW_DATABASE_KINDS))


def stage_new_database(file: Path, kind: str) -> StagingDir:
    """A locked staging folder in which `kind` (one of `NEW_DATABASE_KINDS`) builds the new
    database `file`, once the folders killed commands left for it are gone."""
    if kind not in NEW_DATABASE_KINDS:
        raise ValueError(f"stage_new_database: kind {kind!r} is not one of {', '.join(NEW_DATABASE_KINDS)}")
    sweep_new_database(file)
    return StagingDir.create(file.parent, f".{file.name}.{kind}-")


def write_atomically(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write one file through a temporary file in the same folder, renamed into place, so a
    killed run never leaves half of it (a compile report, a cost model file, a build
    artifact); the file gets the permissions `open` would give it (mkstemp's are 0600)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
