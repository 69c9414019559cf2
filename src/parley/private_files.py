"""Files that hold secrets are readable by their owner only.

The SQLite database holds webhook secrets and push-signing keys, sealed with a key beside it: it is created
0600, in a 0700 directory when Parley makes the directory, before SQLite opens it (SQLite gives its WAL and
shared-memory files the database file's mode). A database an earlier release created with the umask's mode
is narrowed to 0600 when it is opened (issue 28, item 13).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700


def prepare_private_file(path: str | Path) -> None:
    """Make `path`'s directory (0700, when missing) and the file itself (0600, empty, when missing); narrow an
    existing file, and its `-wal` and `-shm` companions, to 0600."""
    path = Path(path)
    parent = path.parent
    if not parent.exists():
        parent.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        os.chmod(parent, DIRECTORY_MODE)  # mkdir's mode is masked by the umask
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            if name.stat().st_mode & 0o077:
                os.chmod(name, FILE_MODE)
