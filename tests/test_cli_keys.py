"""`oh key create|rotate|status` and the keys wired into the configuration (docs/keys.md).

The keys directory is beside the data directory unless `--keys` or `OH_KEYS` says otherwise;
`OH_MASTER_KEY` overrides its key file. A command that starts a data directory creates the
master key when none is configured and says so once; every other command only uses it.
Rotation rewraps every data key, and a rotation stopped between its steps leaves every
notebook readable and is finished by the next `oh key rotate`. Every key here is a real file
under the test's directory; every time a store stamps comes from the suite's fixed clock.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from oh.cli import main
from oh.cli.serve import _start_keys, location_flags
from oh.config import (
    Locations,
    begin_rotation,
    open_keyring,
    open_knowledge_store,
    open_memory_store,
    open_purge_access,
    remac_knowledge,
    rewrap_data_keys,
    start_master_key,
)
from oh.errors import AlreadyExists, IntegrityError, InvalidArgument, NotFound, StorageUnavailable
from oh.keys import (
    KEY_FILE,
    MASTER_KEY_ENV,
    NEXT_KEY_FILE,
    SEALED,
    Keyring,
    MasterKey,
    MasterKeys,
)
from oh.services.notebooks import purge_expired
from oh.storage.sqlite.keys import KEY_STORE_FILE, SqliteKeyStore
from oh.testing.knowledge import publish_by_review
from oh.testing.memory_store import T0, add, open_notebook, write
from oh.testing.served import Served, oh_command
from test_serve_workers import _connection_to_each_worker, _post, _remember

NOTE = "wombat-cinnabar-heliograph"  # a note text no file may hold in plain text
LATER = T0 + timedelta(hours=25)  # past the forget time of every notebook written at T0
_RUNS = itertools.count()  # each notebook ``_fill`` opens is another run's


@pytest.fixture(autouse=True)
def _no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test says where its keys are: none inherited from the shell running the suite."""
    for name in (MASTER_KEY_ENV, "OH_KEYS", "OH_DATA", "OH_MEMORY_URL", "OH_KNOWLEDGE_URL"):
        monkeypatch.delenv(name, raising=False)


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "oh-data"
    data.mkdir()
    return data


def _keys(tmp_path: Path) -> Path:
    return tmp_path / "oh-data-keys"


def _locations(data: Path, *, create: bool = False, keys: Path | None = None) -> Locations:
    return Locations(data, create=create, keys_dir=keys)


def _fill(locations: Locations, count: int = 3) -> dict[str, str]:
    """``count`` notebooks with one note each, written through the configured (sealed) store:
    notebook id -> the note's text."""
    store = open_memory_store(locations)
    try:
        written = {}
        for _ in range(count):
            run = next(_RUNS)
            notebook_id = open_notebook(store, run=f"run-{run}")
            text = f"{NOTE} {run}"
            write(store, notebook_id, 0, "r-1", add("note:a", text))
            written[notebook_id] = text
        return written
    finally:
        store.close()


def _read_all(locations: Locations, written: dict[str, str]) -> None:
    """Every notebook ``_fill`` wrote reads back as written."""
    store = open_memory_store(locations)
    try:
        for notebook_id, text in written.items():
            record = store.record(notebook_id, "note:a")
            assert record is not None
            assert json.loads(record.content)["text"] == text
    finally:
        store.close()


def _review(locations: Locations, *names: str) -> None:
    """Reviewed records accepted into ann's knowledge base, through the configured stores."""
    knowledge, memory = open_knowledge_store(locations), open_memory_store(locations)
    try:
        for name in names:
            publish_by_review(knowledge, memory, "ann", {"name": name, "text": f"{name} holds"})
    finally:
        knowledge.close()
        memory.close()


def _reviewed(locations: Locations) -> list[str]:
    """The names of ann's reviewed records at her latest revision: each row's MAC checked."""
    knowledge = open_knowledge_store(locations)
    try:
        return [r.name for r in knowledge.records_at("ann", knowledge.latest_revision("ann"))]
    finally:
        knowledge.close()


def _stored_contents(memory: Path) -> list[str]:
    with sqlite3.connect(memory) as conn:
        return [row[0] for row in conn.execute("SELECT content FROM records").fetchall()]


def _counts(key_store: Path) -> dict[str, int]:
    """How many data keys each master key wraps in the key store file."""
    store = SqliteKeyStore(key_store, create=False)
    try:
        return store.count()
    finally:
        store.close()


def _status(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    capsys.readouterr()
    assert main(["key", "status", "--json", *argv]) == 0
    return dict(json.loads(capsys.readouterr().out))


# -- where the keys are ------------------------------------------------------------------------


def test_the_keys_directory_is_beside_the_data_directory_by_default(tmp_path: Path) -> None:
    assert Locations(tmp_path / "oh-data").keys_path() == tmp_path / "oh-data-keys"
    assert Locations(Path("oh-data")).keys_path() == Path("oh-data-keys")
    assert Locations(Path(".")).keys_path() == Path.cwd().with_name(Path.cwd().name + "-keys")
    assert Locations(tmp_path / "d", keys_dir=tmp_path / "k").keys_path() == tmp_path / "k"


def test_keys_flag_wins_over_oh_keys_which_wins_over_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = str(tmp_path / "d")
    assert Locations.resolve(data).keys_path() == tmp_path / "d-keys"
    monkeypatch.setenv("OH_KEYS", str(tmp_path / "env-keys"))
    assert Locations.resolve(data).keys_path() == tmp_path / "env-keys"
    flagged = Locations.resolve(data, keys_dir=str(tmp_path / "flag-keys"))
    assert flagged.keys_path() == tmp_path / "flag-keys"


def test_commands_named_for_other_processes_carry_keys_only_when_the_default_would_miss(
    tmp_path: Path,
) -> None:
    data = tmp_path / "d"
    assert "--keys" not in location_flags(Locations(data))
    flags = location_flags(Locations(data, keys_dir=tmp_path / "elsewhere"))
    assert flags[flags.index("--keys") + 1] == str((tmp_path / "elsewhere").resolve())
    # Both databases by URL: no --data is passed, so the keys directory is named outright.
    urls = Locations(data, memory_url="m.db", knowledge_url="k.db")
    flags = location_flags(urls)
    assert flags[flags.index("--keys") + 1] == str((tmp_path / "d-keys").resolve())


# -- oh key create -----------------------------------------------------------------------------


def test_key_create_writes_a_0600_key_file_and_the_key_store_and_never_a_second(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data(tmp_path)
    assert main(["key", "create", "--data", str(data)]) == 0
    out, err = capsys.readouterr()
    key_file = _keys(tmp_path) / KEY_FILE
    key = MasterKey.parse(key_file.read_text())
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert (_keys(tmp_path) / KEY_STORE_FILE).is_file()
    assert f"master key {key.id} written to {key_file.resolve()}" in out
    assert key.text() not in out + err  # the file form never prints the key
    assert "back up the master key file" in err and "can never be read again" in err

    assert main(["key", "create", "--data", str(data)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("oh key: already_exists: a master key file exists at ")
    assert MasterKey.parse(key_file.read_text()) == key  # untouched


def test_key_create_stdout_prints_a_key_that_parses_and_writes_no_key_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys"
    assert main(["key", "create", "--stdout", "--keys", str(keys)]) == 0
    out, err = capsys.readouterr()
    key = MasterKey.parse(out)
    assert out == key.text() + "\n"
    assert not (keys / KEY_FILE).exists()
    assert (keys / KEY_STORE_FILE).is_file()
    assert MASTER_KEY_ENV in err and "can never be read again" in err and key.text() not in err


def test_key_create_refuses_when_oh_master_key_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MASTER_KEY_ENV, MasterKey.generate().text())
    for argv in (["key", "create"], ["key", "create", "--stdout"]):
        assert main([*argv, "--keys", str(tmp_path / "keys")]) == 2
        assert "already_exists: OH_MASTER_KEY is set" in capsys.readouterr().err
    assert not (tmp_path / "keys").exists()


def test_key_create_refuses_a_key_store_whose_data_keys_another_key_wrapped(
    tmp_path: Path,
) -> None:
    """The key file was lost: a new key could not open a single data key, so Oh refuses to
    make one over the key store rather than start anew as if nothing were there."""
    data = _data(tmp_path)
    assert start_master_key(_locations(data, create=True)) is not None
    _fill(_locations(data), 1)
    (_keys(tmp_path) / KEY_FILE).unlink()
    with pytest.raises(AlreadyExists, match="holds 1 data keys wrapped by master key"):
        start_master_key(_locations(data, create=True))
    assert not (_keys(tmp_path) / KEY_FILE).exists()


# -- oh key status -----------------------------------------------------------------------------


def test_status_shows_the_key_its_source_the_store_and_the_data_keys_never_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data(tmp_path)
    status = _status(capsys, "--data", str(data))
    keys = _keys(tmp_path).resolve()
    assert status == {
        "keys_dir": str(keys),
        "master_key_id": None,
        "source": None,
        "key_file": None,
        "key_store": str(keys / KEY_STORE_FILE),
        "key_store_exists": False,
        "data_keys": {},
        "unreadable_data_keys": 0,
        "rotation_in_progress": False,
        "next_key_id": None,
        "key_store_shared": False,
        "warnings": [],
    }
    assert not _keys(tmp_path).exists()  # status creates nothing
    assert main(["key", "create", "--data", str(data)]) == 0
    key = MasterKey.parse((keys / KEY_FILE).read_text())
    _fill(_locations(data), 2)
    status = _status(capsys, "--data", str(data))
    assert status["master_key_id"] == key.id
    assert (status["source"], status["key_file"]) == ("file", str(keys / KEY_FILE))
    assert status["key_store_exists"] is True
    assert status["data_keys"] == {key.id: 2}
    capsys.readouterr()
    assert main(["key", "status", "--data", str(data)]) == 0
    text = capsys.readouterr().out
    assert f"master key: {key.id} (file {keys / KEY_FILE})" in text
    assert f"data keys under {key.id}: 2" in text
    assert key.text() not in text and key.text()[6:] not in text


def test_status_exits_1_when_data_keys_are_under_a_key_that_is_not_configured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data(tmp_path)
    start_master_key(_locations(data, create=True))
    _fill(_locations(data), 2)
    monkeypatch.setenv(MASTER_KEY_ENV, MasterKey.generate().text())  # the wrong key
    capsys.readouterr()
    assert main(["key", "status", "--json", "--data", str(data)]) == 1
    status = json.loads(capsys.readouterr().out)
    assert (status["source"], status["key_file"]) == ("environment", None)
    assert status["unreadable_data_keys"] == 2


# -- OH_MASTER_KEY -----------------------------------------------------------------------------


def test_oh_master_key_seals_without_a_key_file_and_is_needed_to_open_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data(tmp_path)
    key = MasterKey.generate()
    monkeypatch.setenv(MASTER_KEY_ENV, key.text())
    # A command that starts a data directory finds the key configured and creates none.
    assert start_master_key(_locations(data, create=True)) is None
    assert not (_keys(tmp_path) / KEY_FILE).exists()
    written = _fill(_locations(data), 2)
    assert all(content.startswith(SEALED) for content in _stored_contents(data / "memory.db"))
    assert _counts(_keys(tmp_path) / KEY_STORE_FILE) == {key.id: 2}
    _read_all(_locations(data), written)
    monkeypatch.delenv(MASTER_KEY_ENV)
    assert open_keyring(_locations(data)) is None
    with pytest.raises(StorageUnavailable):
        open_memory_store(_locations(data))


def test_a_configured_key_without_its_key_store_is_refused_by_commands_that_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data(tmp_path)
    monkeypatch.setenv(MASTER_KEY_ENV, MasterKey.generate().text())
    with pytest.raises(NotFound, match="no key store at"):
        open_keyring(_locations(data))
    assert not _keys(tmp_path).exists()
    keyring = open_keyring(_locations(data, create=True))
    assert isinstance(keyring, Keyring)
    keyring.close()
    assert (_keys(tmp_path) / KEY_STORE_FILE).is_file()


# -- a command that starts a data directory ----------------------------------------------------


def test_starting_a_data_directory_creates_the_key_once_and_other_commands_never(
    tmp_path: Path,
) -> None:
    data = tmp_path / "oh-data"
    assert start_master_key(_locations(data)) is None  # create=False: nothing made
    assert not _keys(tmp_path).exists()
    created = start_master_key(_locations(data, create=True))
    assert created == _keys(tmp_path) / KEY_FILE
    assert stat.S_IMODE(created.stat().st_mode) == 0o600
    assert (_keys(tmp_path) / KEY_STORE_FILE).is_file()
    key = created.read_text()
    assert start_master_key(_locations(data, create=True)) is None
    assert created.read_text() == key


def test_the_serve_start_up_creates_the_key_and_warns_once_and_the_store_is_sealed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "oh-data"
    _start_keys(_locations(data, create=True), "serve")
    err = capsys.readouterr().err
    key_file = (_keys(tmp_path) / KEY_FILE).resolve()
    assert err.count(f"oh serve: created the master key {key_file}") == 1
    assert f"back up the master key file {key_file} apart from the data directory" in err
    assert data.is_dir()
    _start_keys(_locations(data, create=True), "serve")
    assert capsys.readouterr().err == ""  # once: the next start finds the key
    _fill(_locations(data), 1)
    [content] = _stored_contents(data / "memory.db")
    assert content.startswith(SEALED) and NOTE not in content


def test_token_create_starts_the_data_directory_with_a_key_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "oh-data"
    assert main(["token", "create", "--owner", "ann", "--data", str(data)]) == 0
    err = capsys.readouterr().err
    assert "oh token create: created the master key" in err
    assert (_keys(tmp_path) / KEY_FILE).is_file()
    assert main(["token", "create", "--owner", "bob", "--data", str(data)]) == 0
    assert "master key" not in capsys.readouterr().err


def test_a_data_directory_that_cannot_be_made_leaves_no_key_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    in_the_way = tmp_path / "oh-data"
    in_the_way.write_text("a file")
    assert main(["token", "create", "--owner", "ann", "--data", str(in_the_way)]) == 2
    assert "invalid_argument" in capsys.readouterr().err
    assert not _keys(tmp_path).exists()


def test_serve_workers_share_the_one_key_each_opening_its_own_keyring(tmp_path: Path) -> None:
    """`oh serve --workers 2` on a fresh directory: the key is made once, before the workers
    start; each worker seals with it, and a note one worker wrote reads through the other."""
    if not sys.platform.startswith("linux"):
        pytest.skip("finds the serving process in /proc")
    data = tmp_path / "oh-data"
    with Served(data, args=["--workers", "2"]) as served:
        assert served.output().count("created the master key") == 1
        opened = served.open_notebook("ann", "reef", "run-1")
        notebook, token = opened["notebook"]["id"], opened["agent_token"]
        first, second = _connection_to_each_worker(served).values()
        path = f"/v1/notebooks/{notebook}/tools"
        status, answer = _post(first, f"{path}/remember", token, _remember(0, "r-1", "note:a"))
        assert (status, answer["status"]) == (200, "applied")
        status, read = _post(second, f"{path}/read", token, {"name": "note:a"})
        assert status == 200 and "note:a seen on the reef" in json.dumps(read)
        for connection in (first, second):
            connection.close()
    [content] = _stored_contents(data / "memory.db")
    assert content.startswith(SEALED) and "seen on the reef" not in content
    key = MasterKey.parse((_keys(tmp_path) / KEY_FILE).read_text())
    assert _counts(_keys(tmp_path) / KEY_STORE_FILE) == {key.id: 1}


# -- oh key rotate -----------------------------------------------------------------------------


def test_rotate_rewraps_every_data_key_and_the_rotated_key_file_alone_reads_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data(tmp_path)
    keys = _keys(tmp_path)
    assert main(["key", "create", "--data", str(data)]) == 0
    old = MasterKey.parse((keys / KEY_FILE).read_text())
    written = _fill(_locations(data), 3)
    _review(_locations(data), "finding:a", "finding:b")
    capsys.readouterr()
    assert main(["key", "rotate", "--data", str(data)]) == 0
    out, err = capsys.readouterr()
    new = MasterKey.parse((keys / KEY_FILE).read_text())
    assert new != old and not (keys / NEXT_KEY_FILE).exists()
    assert f"master key rotated: {old.id} -> {new.id}" in out
    assert "data keys rewrapped: 3" in out
    # Two revisions, two reviewed record versions and the two proposals they were accepted from.
    assert "knowledge rows MACed again: 6" in out
    assert new.text() not in out + err and old.text() not in out + err
    assert stat.S_IMODE((keys / KEY_FILE).stat().st_mode) == 0o600
    assert _counts(keys / KEY_STORE_FILE) == {new.id: 3}
    _read_all(_locations(data), written)  # with the rotated key file, the only key there
    assert _reviewed(_locations(data)) == ["finding:a", "finding:b"]  # MACs under the new key
    # The old key opens none of them any more.
    store = SqliteKeyStore(keys / KEY_STORE_FILE)
    stale = Keyring(MasterKeys(old), store)
    with pytest.raises(IntegrityError):
        stale.cipher(next(iter(written)))
    stale.close()


@pytest.mark.parametrize("stop_after", ["rewrap", "remac"])
def test_a_rotation_stopped_between_steps_reads_everything_and_rotate_finishes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stop_after: str
) -> None:
    data = _data(tmp_path)
    keys = _keys(tmp_path)
    start_master_key(_locations(data, create=True))
    old = MasterKey.parse((keys / KEY_FILE).read_text())
    written = _fill(_locations(data), 3)
    _review(_locations(data), "finding:a")
    new = begin_rotation(_locations(data))
    rotation = rewrap_data_keys(_locations(data), new)
    assert (rotation.old_id, rotation.new_id, rotation.rewrapped) == (old.id, new.id, 3)
    if stop_after == "remac":
        assert remac_knowledge(_locations(data), new) > 0
    # The crash: no rename. The old key file and the next key open everything.
    assert MasterKey.parse((keys / KEY_FILE).read_text()) == old
    _read_all(_locations(data), written)
    assert _reviewed(_locations(data)) == ["finding:a"]
    # Made meanwhile by a process still on the old key: rewrapped and MACed again too.
    written |= _fill(_locations(data), 1)
    _review(_locations(data), "finding:b")
    status = _status(capsys, "--data", str(data))
    assert (status["rotation_in_progress"], status["next_key_id"]) == (True, new.id)
    assert status["data_keys"] == {old.id: 1, new.id: 3}
    assert main(["key", "rotate", "--data", str(data)]) == 0
    assert f"{old.id} -> {new.id}" in capsys.readouterr().out  # resumed with the same key
    assert MasterKey.parse((keys / KEY_FILE).read_text()) == new
    assert not (keys / NEXT_KEY_FILE).exists()
    assert _counts(keys / KEY_STORE_FILE) == {new.id: 4}
    _read_all(_locations(data), written)
    assert _reviewed(_locations(data)) == ["finding:a", "finding:b"]


def test_rotate_needs_the_knowledge_database_and_changes_nothing_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Renaming the key without MACing the knowledge again would leave every reviewed row
    under a key that is gone: a data directory that is not there stops it first."""
    keys = tmp_path / "keys"
    assert main(["key", "create", "--keys", str(keys)]) == 0
    before = (keys / KEY_FILE).read_text()
    missing = tmp_path / "typo"
    assert main(["key", "rotate", "--keys", str(keys), "--data", str(missing)]) == 2
    assert "oh key: not_found: data directory" in capsys.readouterr().err
    assert (keys / KEY_FILE).read_text() == before and not (keys / NEXT_KEY_FILE).exists()


def test_a_rotation_stopped_before_the_rewrap_changes_nothing_until_rotate_finishes_it(
    tmp_path: Path,
) -> None:
    data = _data(tmp_path)
    keys = _keys(tmp_path)
    start_master_key(_locations(data, create=True))
    written = _fill(_locations(data), 2)
    new = begin_rotation(_locations(data))  # the crash: the next key written, nothing else
    assert stat.S_IMODE((keys / NEXT_KEY_FILE).stat().st_mode) == 0o600
    assert begin_rotation(_locations(data)) == new  # resumed, never a second next key
    _read_all(_locations(data), written)
    assert main(["key", "rotate", "--data", str(data)]) == 0
    assert MasterKey.parse((keys / KEY_FILE).read_text()) == new
    _read_all(_locations(data), written)


def test_rotate_refuses_an_environment_key_and_says_where_the_way_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data(tmp_path)
    start_master_key(_locations(data, create=True))
    before = (_keys(tmp_path) / KEY_FILE).read_text()
    monkeypatch.setenv(MASTER_KEY_ENV, MasterKey.generate().text())
    assert main(["key", "rotate", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("oh key: invalid_argument: OH_MASTER_KEY is set")
    assert "docs/keys.md" in err
    assert (_keys(tmp_path) / KEY_FILE).read_text() == before
    assert not (_keys(tmp_path) / NEXT_KEY_FILE).exists()
    with pytest.raises(InvalidArgument):
        begin_rotation(_locations(data))


def test_the_documented_rotation_of_an_environment_key_runs_as_written_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/keys.md's block, typed in a shell beside ./oh-data whose key is in OH_MASTER_KEY:
    the key goes to the key file, is rotated without OH_MASTER_KEY, and the new key it prints
    goes back into OH_MASTER_KEY; then the same again with the new key."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "keys.md").read_text()
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "env -u" in b]
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    data = _data(tmp_path)
    keys = _keys(tmp_path)
    key = MasterKey.generate()
    monkeypatch.setenv(MASTER_KEY_ENV, key.text())
    start_master_key(_locations(data, create=True))
    written = _fill(_locations(data), 2)
    _review(_locations(data), "finding:a")
    for _ in range(2):
        env = {**os.environ, MASTER_KEY_ENV: key.text()}
        done = subprocess.run(
            ["/bin/bash", "-euo", "pipefail", "-c", block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        new = MasterKey.parse(done.stdout.splitlines()[-1])
        assert new.id != key.id and not (keys / KEY_FILE).exists()
        key = new
        monkeypatch.setenv(MASTER_KEY_ENV, key.text())
        _read_all(_locations(data), written)
        assert _reviewed(_locations(data)) == ["finding:a"]
        assert _status(capsys, "--data", str(data))["data_keys"] == {key.id: 2}


def test_rotate_without_a_key_file_is_not_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["key", "rotate", "--keys", str(tmp_path / "keys")]) == 2
    assert "oh key: not_found: no master key file at" in capsys.readouterr().err
    assert not (tmp_path / "keys").exists()


# -- the purge worker --------------------------------------------------------------------------


def test_purge_destroys_the_keys_of_the_notebooks_it_purges_without_the_master_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data(tmp_path)
    start_master_key(_locations(data, create=True))
    written = _fill(_locations(data), 2)
    key_store = _keys(tmp_path) / KEY_STORE_FILE
    assert sum(_counts(key_store).values()) == 2
    # The worker needs no master key: without the key file it still destroys the keys.
    key_file = _keys(tmp_path) / KEY_FILE
    key = key_file.read_text()
    key_file.unlink()
    access = open_purge_access(_locations(data))
    try:
        report = purge_expired(access, LATER)
    finally:
        access.close()
    assert sorted(report.purged) == sorted(written)
    assert _counts(key_store) == {}
    key_file.write_text(key)
    keyring = open_keyring(_locations(data))
    assert keyring is not None
    assert all(not keyring.has_key(notebook_id) for notebook_id in written)
    keyring.close()


def test_purge_without_a_key_store_purges_as_before(tmp_path: Path) -> None:
    data = _data(tmp_path)
    store = open_memory_store(_locations(data))  # no key configured: not sealed
    notebook_id = open_notebook(store)
    write(store, notebook_id, 0, "r-1", add("note:a"))
    store.close()
    access = open_purge_access(_locations(data))
    try:
        report = purge_expired(access, LATER)
    finally:
        access.close()
    assert report.purged == [notebook_id]
    assert not _keys(tmp_path).exists()


# -- the installed command ---------------------------------------------------------------------


@pytest.mark.parametrize("runner", ["script", "module"])
def test_the_oh_command_creates_shows_and_refuses_as_documented(
    tmp_path: Path, runner: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OH_")}
    keys = tmp_path / "keys"
    prefix = oh_command() if runner == "script" else [sys.executable, "-m", "oh"]

    def oh(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, env=env, timeout=120, check=False
        )

    created = oh("key", "create", "--keys", str(keys))
    assert created.returncode == 0, created.stderr
    key = MasterKey.parse((keys / KEY_FILE).read_text())
    assert stat.S_IMODE((keys / KEY_FILE).stat().st_mode) == 0o600
    assert "can never be read again" in created.stderr
    shown = oh("key", "status", "--json", "--keys", str(keys))
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert (status["master_key_id"], status["source"]) == (key.id, "file")
    assert status["key_store_exists"] is True and key.text() not in shown.stdout
    again = oh("key", "create", "--keys", str(keys))
    assert again.returncode == 2
    assert again.stderr.startswith("oh key: already_exists: ")
    printed = oh("key", "create", "--stdout", "--keys", str(tmp_path / "other"))
    assert printed.returncode == 0, printed.stderr
    env[MASTER_KEY_ENV] = MasterKey.parse(printed.stdout).text()
    status = json.loads(oh("key", "status", "--json", "--keys", str(tmp_path / "other")).stdout)
    assert (status["master_key_id"], status["source"]) == (
        MasterKey.parse(printed.stdout).id,
        "environment",
    )


def test_a_key_file_made_by_another_process_meanwhile_is_never_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes starting on a fresh keys directory: both find no key, both write one. The
    second must be told (and then use the first's), never replace it: the first already wraps
    data keys with the key it holds."""
    import oh.config.keys
    from oh.errors import AlreadyExists
    from oh.keys import MasterKey, read_master_key, write_master_key

    keys = tmp_path / "keys"
    first = MasterKey.generate()
    write_master_key(keys / "master.key", first)
    # The second process looked before the first had written: it saw nothing.
    monkeypatch.setattr(Path, "exists", lambda self: False)
    with pytest.raises(AlreadyExists):
        write_master_key(keys / "master.key", MasterKey.generate())
    monkeypatch.undo()
    assert read_master_key(keys / "master.key") == first
    real = oh.config.keys.load_master_keys
    monkeypatch.setattr(oh.config.keys, "load_master_keys", lambda *args: None)
    monkeypatch.setattr(oh.config.keys, "_data_keys", lambda path: {})
    locations = oh.config.Locations(tmp_path / "data", keys_dir=keys)
    assert oh.config.start_master_key(locations) is None  # the first's key is used
    monkeypatch.undo()
    assert real(keys, {}).current == first  # type: ignore[union-attr]
    assert [p.name for p in keys.iterdir() if p.name.endswith(".tmp")] == []
