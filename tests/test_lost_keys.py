"""A lost or wrong key store stops Oh; it never corrupts the data.

Sealed data whose key store or master key is missing, wrong or truncated: ``oh serve``,
``oh mcp``, ``oh token create`` and ``oh verify`` refuse to start, name the missing piece and
the fix, and change no byte of any data file; no new master key is made over sealed data. Then
the real keys directory is put back, and everything reads as before: restoring the key store
restores everything.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from oh.keys import KEY_FILE, MASTER_KEY_ENV, MasterKey, write_master_key
from oh.storage.sqlite.keys import KEY_STORE_FILE
from oh.testing.served import Served, free_port, oh_command, remember_over_http

NOTE = "zlostkeys tide gauge reads 4.2 m"


def _digests(directory: Path) -> dict[str, str]:
    """Every data file's digest. ``-shm`` is left out: SQLite's WAL index, shared memory that
    any reader, even a read-only one, updates and that holds no data (it is rebuilt from the
    WAL); the database and its WAL are the data."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.endswith("-shm")
    }


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A data directory and its keys as ``oh serve`` left them, with one note in a notebook."""
    root = tmp_path_factory.mktemp("lost-keys")
    data = root / "data"
    with Served(data) as served:
        owner = served.owner_token("ann")
        opened = served.open_notebook("ann", "reef.pdf", "run-1")
        remember_over_http(
            served.url, opened["agent_token"], opened["notebook"]["id"], "finding:gauge", NOTE
        )
    return {
        "data": data,
        "keys": root / "data-keys",
        "owner": owner,
        "notebook": opened["notebook"]["id"],
        "agent": opened["agent_token"],
    }


def _copy(written: dict[str, Any], into: Path) -> tuple[Path, Path]:
    data, keys = into / "data", into / "data-keys"
    shutil.copytree(written["data"], data)
    shutil.copytree(written["keys"], keys)
    return data, keys


def _missing_store(keys: Path) -> None:
    (keys / KEY_STORE_FILE).unlink()


def _missing_folder(keys: Path) -> None:
    shutil.rmtree(keys)


def _wrong_key_file(keys: Path) -> None:
    write_master_key(keys / KEY_FILE, MasterKey.generate(), replace=True)


def _truncated_empty(keys: Path) -> None:
    (keys / KEY_STORE_FILE).write_bytes(b"")


def _truncated_half(keys: Path) -> None:
    path = keys / KEY_STORE_FILE
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


CASES: dict[str, tuple[Callable[[Path], None], dict[str, str], str]] = {
    "missing-keys-db": (_missing_store, {}, "key store"),
    "missing-keys-folder": (_missing_folder, {}, "no master key is configured"),
    "wrong-master-key-file": (_wrong_key_file, {}, "wrapped by master key"),
    "wrong-master-key-env": (
        lambda keys: None,
        {MASTER_KEY_ENV: MasterKey.generate().text()},
        "wrapped by master key",
    ),
    "truncated-key-store": (_truncated_empty, {}, "not the one they were sealed with"),
    "half-a-key-store": (_truncated_half, {}, "key store"),
}


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("case", list(CASES))
def test_a_lost_or_wrong_key_store_stops_every_command_and_changes_no_byte(
    written: dict[str, Any], tmp_path: Path, case: str
) -> None:
    damage, extra, named = CASES[case]
    data, keys = _copy(written, tmp_path)
    damage(keys)
    before = _digests(data)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OH_")}
    env = clean | extra
    oh = oh_command()
    where = ["--data", str(data), "--keys", str(keys)]
    commands = {
        "serve": [*oh, "serve", *where, "--port", str(free_port())],
        "token": [*oh, "token", "create", "--owner", "ann", *where],
        "verify": [*oh, "verify", *where],
        "mcp": [*oh, "mcp", "--notebook", written["notebook"], *where],
    }
    for name, argv in commands.items():
        run_env = env | ({"OH_AGENT_TOKEN": written["agent"]} if name == "mcp" else {})
        done = _run(argv, run_env)
        said = done.stderr + done.stdout
        assert done.returncode != 0, (case, name, said)
        assert "serving memory from" not in said, (case, name, said)
        assert named in said, (case, name, said)
        assert "Traceback" not in said, (case, name, said)
        assert _digests(data) == before, (case, name)  # not one byte of the data changed
    assert not (keys / KEY_FILE).exists() or case != "missing-keys-folder"  # no new key made
    # The real keys back: everything reads as it did.
    shutil.rmtree(keys, ignore_errors=True)
    shutil.copytree(written["keys"], keys)
    with Served(data, args=["--keys", str(keys)]) as served:
        records = httpx.get(
            f"{served.url}/v1/notebooks/{written['notebook']}/records",
            headers={"Authorization": f"Bearer {written['owner']}"},
            timeout=30,
        )
        assert records.status_code == 200, records.text
        assert [note["text"] for note in records.json()["notes"]] == [NOTE]
    verified = _run([*oh, "verify", "--data", str(data), "--keys", str(keys)], clean)
    assert verified.returncode == 0, verified.stdout + verified.stderr
