"""The database and everything beside it that holds secrets are readable by their owner only (issue 28, item 13).

The SQLite file holds webhook secrets and push-signing keys (sealed), and the key pepper sits beside it: a 0644
file in a 0755 directory let every local user copy them. Tested as users run Parley: `parley keys create` and
`parley serve` as processes, then the modes on disk.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from parley.private_files import prepare_private_file

from .secured import ok, send_jsonrpc, served


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_database_its_wal_its_pepper_and_its_directory_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the common default: files 0644, directories 0755 unless Parley says otherwise
    try:
        db = tmp_path / "made" / "here" / "parley.db"
        ok("keys", "create", "echo", "--db", str(db))
        with served("--db", str(db)) as srv:
            ok("keys", "create", "echo", "--db", str(db))  # a write while the server has the WAL open
            assert send_jsonrpc(srv.url, "hello", token=None).status_code == 401
            companions = [p for p in (Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
            assert companions, "the server opened the database in WAL mode"
            assert {p.name: mode(p) for p in companions} == {p.name: 0o600 for p in companions}
    finally:
        os.umask(old)
    assert mode(db) == 0o600
    assert mode(Path(f"{db}.pepper")) == 0o600
    assert mode(db.parent) == 0o700  # the folder that holds them; folders above it are ordinary


def test_a_database_made_by_an_earlier_release_is_narrowed_and_a_users_folder_is_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    db = folder / "old.db"
    db.write_bytes(b"")
    os.chmod(db, 0o644)
    Path(f"{db}-wal").write_bytes(b"")
    os.chmod(f"{db}-wal", 0o664)
    prepare_private_file(db)
    assert mode(db) == 0o600 and mode(Path(f"{db}-wal")) == 0o600
    assert mode(folder) == 0o755  # a directory Parley did not make keeps its mode
    assert db.read_bytes() == b""  # nothing written, nothing truncated
