"""Sealed exports (docs/keys.md, Exports): the same canonical lines, sealed under the master key.

A sealed export opens only with the master key that sealed it and imports exactly what the
plaintext export of the same data imports: the same notebooks, the same verify, the same
plaintext export afterwards, sealed at rest again under the destination's own data keys. The
file holds none of the content; a chunk changed, dropped, moved, cut short or taken from another
export is ``integrity`` and imports nothing. Through the command line an export is sealed when a
master key is configured, plaintext (and said so) when none is, and ``--plaintext`` writes
today's bytes exactly. Every store here is a real file (or a throwaway PostgreSQL schema);
every stored time comes from the fixed timeline of ``oh.testing.memory_store``.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from oh.cli import main
from oh.config import (
    Locations,
    UnsealedWarning,
    open_knowledge_store,
    open_memory_store,
    start_master_key,
)
from oh.core.canonical import canonical_bytes
from oh.errors import IntegrityError, InvalidArgument
from oh.keys import KEY_FILE, MASTER_KEY_ENV, Keyring, MasterKey, MasterKeys, write_master_key
from oh.keys.macs import KnowledgeMacs
from oh.storage.base import KnowledgeStore, MemoryStore
from oh.storage.postgres.knowledge import PostgresKnowledgeStore
from oh.storage.postgres.notebooks import PostgresMemoryStore
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0
from oh.testing.postgres_cluster import Schema, fresh_schema, shared_cluster
from oh.transfer import (
    CHUNK_BYTES,
    check_export,
    export_contents,
    export_knowledge,
    export_notebooks,
    import_export,
    open_export,
    sealed_writer,
)
from oh.verify import verify_knowledge
from test_transfer import (
    NOTEBOOK,
    fill_knowledge,
    fill_memory,
    knowledge_export,
    notebooks_export,
    verifies,
)

SMALL = 256  # plaintext per chunk in the tampering tests: an export of a dozen chunks or more
FRAME = SMALL + 16
# What fill_memory writes and no byte of a sealed export may show.
CONTENT = [
    b"bleaching",
    b"methods",
    b"ends 2014",
    b"reef.pdf",
    b"agent:run-1",
    NOTEBOOK.encode(),
    "🐠".encode(),
    b"oh-export",
]


@pytest.fixture(autouse=True)
def _no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test says where its keys are: none inherited from the shell running the suite."""
    for name in (MASTER_KEY_ENV, "OH_KEYS", "OH_DATA", "OH_MEMORY_URL", "OH_KNOWLEDGE_URL"):
        monkeypatch.delenv(name, raising=False)


class Keys:
    """A host's master key and key store file."""

    def __init__(self, directory: Path, secret: int) -> None:
        self.key = MasterKey(bytes(range(secret, secret + 32)))
        self.masters = MasterKeys(self.key)
        self.path = directory / "keys.db"
        self.clock = FakeClock(T0)

    def memory(self, path: Path) -> SqliteMemoryStore:
        return SqliteMemoryStore(path, keyring=Keyring(self.masters, SqliteKeyStore(self.path)))

    def knowledge(self, path: Path) -> SqliteKnowledgeStore:
        macs = KnowledgeMacs(self.masters, SqliteKeyStore(self.path), self.clock)
        return SqliteKnowledgeStore(path, macs=macs)

    def counts(self) -> dict[str, int]:
        store = SqliteKeyStore(self.path)
        try:
            return store.count()
        finally:
            store.close()


@pytest.fixture
def here(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "here-keys", 0)


@pytest.fixture
def there(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "there-keys", 100)


@pytest.fixture
def source(tmp_path: Path, here: Keys) -> Iterator[SqliteMemoryStore]:
    """A sealed store holding fill_memory's notebooks."""
    store = here.memory(tmp_path / "source.db")
    fill_memory(store)
    yield store
    store.close()


@pytest.fixture
def empty(tmp_path: Path) -> Iterator[SqliteMemoryStore]:
    """An unsealed store with nothing in it, to import into."""
    store = SqliteMemoryStore(tmp_path / "empty.db")
    yield store
    store.close()


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


def sealed_notebooks(store: MemoryStore, masters: MasterKeys, chunk_bytes: int = SMALL) -> bytes:
    out = io.BytesIO()
    with sealed_writer(out, masters, chunk_bytes=chunk_bytes) as sealed:
        export_notebooks(store, sealed)
    return out.getvalue()


def sealed_knowledge(store: KnowledgeStore, masters: MasterKeys) -> bytes:
    out = io.BytesIO()
    report = export_knowledge(store, out, seal=masters)
    assert report.sealed_under == masters.current.id
    return out.getvalue()


def split(sealed: bytes, frame: int = FRAME) -> tuple[bytes, list[bytes]]:
    """A sealed export's header line and its chunks."""
    end = sealed.index(b"\n") + 1
    body = sealed[end:]
    return sealed[:end], [body[at : at + frame] for at in range(0, len(body), frame)]


# -- round trips -------------------------------------------------------------------------------


def test_a_sealed_export_opens_to_exactly_the_plaintext_export(
    source: SqliteMemoryStore, here: Keys
) -> None:
    plain = notebooks_export(source)
    out = io.BytesIO()
    report = export_notebooks(source, out, seal=here.masters)
    assert report.sealed_under == here.key.id
    assert report.sha256 == json.loads(plain.splitlines()[-1])["sha256"]
    assert open_export(io.BytesIO(out.getvalue()), here.masters).read() == plain
    small = sealed_notebooks(source, here.masters)
    assert len(split(small)[1]) == -(-len(plain) // SMALL) > 10
    opened = open_export(io.BytesIO(small), here.masters)
    assert opened.read() == plain
    opened.seek(0)  # read twice, as an import does
    assert opened.readline() == plain.splitlines(True)[0]
    assert opened.read() == b"".join(plain.splitlines(True)[1:])


def _files_holding(tmp_path: Path, name: str) -> list[bytes]:
    """Which of fill_memory's texts the database file ``name`` (and its WAL) holds."""
    data = b"".join(path.read_bytes() for path in tmp_path.glob(name + "*"))
    return [text for text in CONTENT[:3] if text in data]


def test_a_sealed_export_imports_into_a_sealed_store_under_the_destinations_keys(
    tmp_path: Path, source: SqliteMemoryStore, here: Keys, there: Keys, empty: SqliteMemoryStore
) -> None:
    plain = notebooks_export(source)
    destination = there.memory(tmp_path / "there.db")
    try:
        report = import_export(
            io.BytesIO(sealed_notebooks(source, here.masters)),
            memory=destination,
            masters=here.masters,
        )
        assert (report.notebooks, report.entries, report.sealed_under) == (3, 3, here.key.id)
        assert notebooks_export(destination) == plain
        assert destination.records(NOTEBOOK) == source.records(NOTEBOOK)
        assert verifies(destination)
    finally:
        destination.close()
    # Sealed again at rest, under data keys of the destination's own (the tombstone has none).
    assert there.counts() == {there.key.id: 2}
    assert _files_holding(tmp_path, "there.db") == []
    import_export(io.BytesIO(plain), memory=empty)  # what the scan finds in a store unsealed
    assert _files_holding(tmp_path, "empty.db") == CONTENT[:3]
    reopened = there.memory(tmp_path / "there.db")
    try:
        assert notebooks_export(reopened) == plain
    finally:
        reopened.close()


def test_a_sealed_export_imports_into_unsealed_stores_on_either_backend(
    source: SqliteMemoryStore, here: Keys, empty: SqliteMemoryStore, schema: Schema
) -> None:
    plain = notebooks_export(source)
    sealed = sealed_notebooks(source, here.masters, CHUNK_BYTES)
    postgres = PostgresMemoryStore(schema.url())
    try:
        for destination in (empty, postgres):
            assert check_export(io.BytesIO(sealed), masters=here.masters).notebooks == 3
            import_export(io.BytesIO(sealed), memory=destination, masters=here.masters)
            assert notebooks_export(destination) == plain
            assert verifies(destination)
        back = sealed_notebooks(postgres, here.masters)  # sealing needs no keyring in the store
    finally:
        postgres.close()
    assert open_export(io.BytesIO(back), here.masters).read() == plain


def test_a_plaintext_export_still_imports_where_a_master_key_is_configured(
    tmp_path: Path, source: SqliteMemoryStore, here: Keys, there: Keys
) -> None:
    plain = notebooks_export(source)
    destination = there.memory(tmp_path / "there.db")
    try:
        report = import_export(io.BytesIO(plain), memory=destination, masters=there.masters)
        assert (report.notebooks, report.sealed_under) == (3, None)
        assert notebooks_export(destination) == plain
    finally:
        destination.close()


def test_a_sealed_knowledge_export_imports_with_macs_and_without(
    tmp_path: Path, here: Keys, there: Keys, schema: Schema
) -> None:
    original = here.knowledge(tmp_path / "knowledge.db")
    try:
        fill_knowledge(original)
        plain = knowledge_export(original)
        sealed = sealed_knowledge(original, here.masters)
    finally:
        original.close()
    assert [text for text in (b"ten years", b"finding:a", b"ann") if text in sealed] == []
    assert export_contents(io.BytesIO(sealed), here.masters) == "knowledge"
    with_macs = there.knowledge(tmp_path / "there.db")
    without = PostgresKnowledgeStore(schema.url())
    try:
        for destination in (with_macs, without):
            report = import_export(io.BytesIO(sealed), knowledge=destination, masters=here.masters)
            assert (report.owners, report.revisions, report.proposals) == (2, 4, 6)
            assert knowledge_export(destination) == plain
            assert verify_knowledge(destination).ok
    finally:
        with_macs.close()
        without.close()
    reopened = there.knowledge(tmp_path / "there.db")  # every imported row MACed: reads pass
    try:
        assert knowledge_export(reopened) == plain
    finally:
        reopened.close()


# -- what the file shows -----------------------------------------------------------------------


def test_the_sealed_export_holds_none_of_the_content_and_names_the_key_only_by_id(
    source: SqliteMemoryStore, here: Keys
) -> None:
    sealed = sealed_notebooks(source, here.masters, CHUNK_BYTES)
    assert [text for text in CONTENT if text in sealed] == []
    assert here.key.secret not in sealed and here.key.text().encode() not in sealed
    header_line, chunks = split(sealed, CHUNK_BYTES + 16)
    header = json.loads(header_line)
    assert header_line == canonical_bytes(header) + b"\n"
    assert set(header) == {"oh_sealed_export", "master_key", "salt", "cipher", "kdf", "chunk_bytes"}
    assert (header["oh_sealed_export"], header["master_key"]) == (1, here.key.id)
    assert (header["cipher"], header["chunk_bytes"]) == ("AES-256-GCM", CHUNK_BYTES)
    assert len(chunks) == 1 and len(sealed) == len(header_line) + len(notebooks_export(source)) + 16


def test_every_export_has_a_salt_of_its_own(source: SqliteMemoryStore, here: Keys) -> None:
    first, second = (sealed_notebooks(source, here.masters) for _ in range(2))
    (head_1, chunks_1), (head_2, chunks_2) = split(first), split(second)
    assert json.loads(head_1)["salt"] != json.loads(head_2)["salt"]
    # Another export key, not only another tag: the same lines never encrypt to the same bytes
    # (a key and nonce used twice would give the same keystream).
    assert not {chunk[:-16] for chunk in chunks_1} & {chunk[:-16] for chunk in chunks_2}


# -- damaged sealed exports import nothing -----------------------------------------------------


def _other(source: MemoryStore, masters: MasterKeys) -> bytes:
    """Another sealed export of the very same data (another salt, so another export key)."""
    return sealed_notebooks(source, masters)


def _join(header: bytes, chunks: list[bytes]) -> bytes:
    return header + b"".join(chunks)


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def _edit_header(sealed: bytes, **values: object) -> bytes:
    header, chunks = split(sealed)
    changed = json.loads(header) | values
    return _join(canonical_bytes(changed) + b"\n", chunks)


Damage = Callable[[bytes, bytes], bytes]  # (the sealed export, another of the same data)

DAMAGES: dict[str, Damage] = {
    "cut at a chunk boundary": lambda s, o: _join(split(s)[0], split(s)[1][:-1]),
    "cut to the first chunk": lambda s, o: _join(split(s)[0], split(s)[1][:1]),
    "cut inside the last chunk": lambda s, o: s[:-5],
    "cut inside the tag of a chunk": lambda s, o: s[: len(split(s)[0]) + FRAME + 7],
    "the header alone": lambda s, o: split(s)[0],
    "two chunks swapped": lambda s, o: _join(
        split(s)[0], [split(s)[1][1], split(s)[1][0], *split(s)[1][2:]]
    ),
    "a chunk repeated": lambda s, o: _join(
        split(s)[0], [split(s)[1][0], *split(s)[1][:-1], split(s)[1][-1]]
    ),
    "a chunk dropped from the middle": lambda s, o: _join(
        split(s)[0], [*split(s)[1][:3], *split(s)[1][4:]]
    ),
    "a bit flipped in a chunk": lambda s, o: _flip(s, len(split(s)[0]) + 3 * FRAME + 40),
    "a bit flipped in the last tag": lambda s, o: _flip(s, len(s) - 1),
    "a bit flipped in the header's key id": lambda s, o: _flip(s, s.index(b'"master_key":"') + 14),
    "another salt in the header": lambda s, o: _edit_header(
        s, salt=json.loads(split(o)[0])["salt"]
    ),
    "another chunk size in the header": lambda s, o: _edit_header(s, chunk_bytes=SMALL * 2),
    "a chunk spliced from another export": lambda s, o: _join(
        split(s)[0], [*split(s)[1][:2], split(o)[1][2], *split(s)[1][3:]]
    ),
    "another export's header": lambda s, o: _join(split(o)[0], split(s)[1]),
    "another export's last chunk": lambda s, o: _join(
        split(s)[0], [*split(s)[1][:-1], split(o)[1][-1]]
    ),
    "bytes after the last chunk": lambda s, o: s + split(o)[1][0],
    "a header that is not JSON": lambda s, o: s.replace(
        b'"oh_sealed_export":1', b'"oh_sealed_export":'
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_damaged_sealed_export_is_integrity_and_imports_nothing(
    source: SqliteMemoryStore, here: Keys, empty: SqliteMemoryStore, damage: str
) -> None:
    sealed = sealed_notebooks(source, here.masters)
    damaged = DAMAGES[damage](sealed, _other(source, here.masters))
    assert damaged != sealed
    # Refused by the seal itself, before any line is parsed or the end line is compared.
    with pytest.raises(IntegrityError, match=r"sealed export|sealed under"):
        import_export(io.BytesIO(damaged), memory=empty, masters=here.masters)
    assert empty.notebook_ids() == []
    import_export(io.BytesIO(sealed), memory=empty, masters=here.masters)  # the undamaged one
    assert notebooks_export(empty) == notebooks_export(source)


def test_a_damaged_sealed_knowledge_export_imports_nothing(
    tmp_path: Path, here: Keys, there: Keys
) -> None:
    original = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    destination = there.knowledge(tmp_path / "there.db")
    try:
        fill_knowledge(original)
        sealed = sealed_knowledge(original, here.masters)
        for damaged in (sealed[:-1], _flip(sealed, len(sealed) // 2)):
            with pytest.raises(IntegrityError):
                import_export(io.BytesIO(damaged), knowledge=destination, masters=here.masters)
        assert destination.owners() == [] and destination.proposal_owners() == []
    finally:
        original.close()
        destination.close()


def test_a_newer_sealed_format_is_refused_as_unsupported(
    source: SqliteMemoryStore, here: Keys, empty: SqliteMemoryStore
) -> None:
    newer = _edit_header(sealed_notebooks(source, here.masters), oh_sealed_export=2)
    with pytest.raises(InvalidArgument, match="sealed export version 2 is not supported"):
        import_export(io.BytesIO(newer), memory=empty, masters=here.masters)
    assert empty.notebook_ids() == []


def test_chunks_are_opened_as_they_are_read_not_all_at_once(
    source: SqliteMemoryStore, here: Keys
) -> None:
    header, chunks = split(sealed_notebooks(source, here.masters))
    chunks[-2] = _flip(chunks[-2], 0)
    opened = open_export(io.BytesIO(_join(header, chunks)), here.masters)
    assert opened.readline() == notebooks_export(source).splitlines(True)[0]  # chunk 0 opened
    with pytest.raises(IntegrityError, match=f"chunk {len(chunks) - 2} of the sealed export"):
        opened.read()


def test_the_writer_seals_each_chunk_as_it_fills_and_the_last_only_at_the_end(
    here: Keys,
) -> None:
    out = io.BytesIO()
    with sealed_writer(out, here.masters, chunk_bytes=SMALL) as sealed:
        header = out.getvalue()
        sealed.write(b"x" * (3 * SMALL))
        sealed.flush()
        assert len(out.getvalue()) == len(header) + 2 * FRAME  # the third may be the last
        sealed.write(b"y")
        sealed.flush()
        assert len(out.getvalue()) == len(header) + 3 * FRAME
    assert len(out.getvalue()) == len(header) + 3 * FRAME + 1 + 16


@pytest.mark.parametrize("size", [0, 1, SMALL - 1, SMALL, SMALL + 1, 2 * SMALL, 5 * SMALL + 3])
def test_any_length_seals_and_opens_whole_chunk_boundaries_included(here: Keys, size: int) -> None:
    payload = bytes(index % 251 for index in range(size))
    out = io.BytesIO()
    with sealed_writer(out, here.masters, chunk_bytes=SMALL) as sealed:
        sealed.write(payload)
    frames = max(1, -(-size // SMALL))
    assert len(out.getvalue()) == out.getvalue().index(b"\n") + 1 + size + 16 * frames
    assert open_export(io.BytesIO(out.getvalue()), here.masters).read() == payload
    if size % SMALL == 0 and size:  # the last chunk is whole: dropping it must still be seen
        header, chunks = split(out.getvalue())
        with pytest.raises(IntegrityError):
            open_export(io.BytesIO(_join(header, chunks[:-1])), here.masters).read()


def test_an_export_that_fails_midway_is_left_without_its_last_chunk(
    source: SqliteMemoryStore, here: Keys, empty: SqliteMemoryStore
) -> None:
    out = io.BytesIO()

    def fail_after_writing() -> None:
        with sealed_writer(out, here.masters, chunk_bytes=SMALL) as sealed:
            export_notebooks(source, sealed)
            raise RuntimeError("the disk filled up")

    with pytest.raises(RuntimeError):
        fail_after_writing()
    assert len(out.getvalue()) > len(notebooks_export(source))  # all of it, but the last chunk
    with pytest.raises(IntegrityError):
        import_export(io.BytesIO(out.getvalue()), memory=empty, masters=here.masters)
    assert empty.notebook_ids() == []


def test_a_chunk_size_outside_the_bounds_is_refused(here: Keys) -> None:
    for size in (0, 63, 1024 * 1024 + 1):
        with (
            pytest.raises(InvalidArgument),
            sealed_writer(io.BytesIO(), here.masters, chunk_bytes=size),
        ):
            pass


# -- which key opens it ------------------------------------------------------------------------


def test_a_sealed_export_opens_only_with_its_master_key(
    source: SqliteMemoryStore, here: Keys, there: Keys, empty: SqliteMemoryStore
) -> None:
    sealed = sealed_notebooks(source, here.masters)
    for masters in (there.masters, None):
        with pytest.raises(IntegrityError) as refused:
            import_export(io.BytesIO(sealed), memory=empty, masters=masters)
        assert f"sealed under master key {here.key.id}" in refused.value.message
        with pytest.raises(IntegrityError):
            export_contents(io.BytesIO(sealed), masters)
    assert f"configured here is {there.key.id}" in _refusal(sealed, there.masters)
    assert "no master key is configured here" in _refusal(sealed, None)
    assert empty.notebook_ids() == []
    # Mid-rotation both keys are configured: an export sealed under either opens.
    rotating = MasterKeys(there.key, (here.key,))
    assert import_export(io.BytesIO(sealed), memory=empty, masters=rotating).notebooks == 3


def _refusal(sealed: bytes, masters: MasterKeys | None) -> str:
    with pytest.raises(IntegrityError) as refused:
        open_export(io.BytesIO(sealed), masters)
    return refused.value.message


# -- the commands ------------------------------------------------------------------------------


def _fill_data_directory(data: Path, *, sealed: bool = True) -> tuple[bytes, bytes]:
    """fill_memory and fill_knowledge in the data directory, through the configuration (sealed
    and MACed, with the master key it makes if none is configured, unless ``sealed`` is False:
    the opt-out); their plaintext exports."""
    locations = replace(Locations.resolve(str(data), create=True), sealed=sealed)
    locations.prepare()
    memory, knowledge = open_memory_store(locations), open_knowledge_store(locations)
    try:
        fill_memory(memory)
        fill_knowledge(knowledge)
        return notebooks_export(memory), knowledge_export(knowledge)
    finally:
        memory.close()
        knowledge.close()


def _exports_of(data: Path) -> tuple[bytes, bytes]:
    locations = Locations.resolve(str(data), create=False)
    memory, knowledge = open_memory_store(locations), open_knowledge_store(locations)
    try:
        return notebooks_export(memory), knowledge_export(knowledge)
    finally:
        memory.close()
        knowledge.close()


def _notebook_ids(data: Path) -> list[str]:
    memory = open_memory_store(Locations.resolve(str(data), create=False))
    try:
        return memory.notebook_ids()
    finally:
        memory.close()


def _move(source: Path, target: Path, tmp_path: Path, *flags: str) -> list[tuple[Path, bytes]]:
    """``oh export`` of both databases of ``source``, then ``oh import`` of each into
    ``target``; the exported files and their bytes."""
    written = []
    for what, name in (("--notebooks", "memory.oh"), ("--knowledge", "knowledge.oh")):
        file = tmp_path / name
        assert main(["export", what, "--data", str(source), "--out", str(file), *flags]) == 0
        assert main(["import", str(file), "--data", str(target)]) == 0
        written.append((file, file.read_bytes()))
    return written


def test_oh_export_seals_under_the_configured_key_and_oh_import_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key = MasterKey.generate()
    monkeypatch.setenv(MASTER_KEY_ENV, key.text())
    source, target = tmp_path / "source", tmp_path / "target"
    plain = _fill_data_directory(source)
    target.mkdir()
    start_master_key(Locations.resolve(str(target), create=True))  # the target's own key store
    for file, written in _move(source, target, tmp_path):
        assert written.startswith(b'{"chunk_bytes":65536,') and key.id.encode() in written
        assert [text for text in CONTENT if text in written] == []
        assert not file.with_name(file.name + ".partial").exists()
    out = capsys.readouterr().out
    assert [json.loads(line)["sealed_under"] for line in out.splitlines()] == [key.id] * 2
    assert _exports_of(target) == plain
    assert _files_holding(target, "memory.db") == []


def test_oh_import_refuses_an_export_sealed_under_another_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    assert main(["key", "create", "--data", str(source)]) == 0
    assert main(["key", "create", "--data", str(target)]) == 0  # a key of the target's own
    source_key = MasterKey.parse((tmp_path / "source-keys" / KEY_FILE).read_text())
    plain = _fill_data_directory(source)
    target.mkdir()
    file = tmp_path / "memory.oh"
    assert main(["export", "--notebooks", "--data", str(source), "--out", str(file)]) == 0
    capsys.readouterr()
    assert main(["import", str(file), "--data", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("oh import: integrity: this export is sealed under master key")
    assert source_key.id in err
    assert _notebook_ids(target) == []
    # A plaintext export is what moves notes between hosts with different master keys.
    argv = ["export", "--notebooks", "--plaintext", "--data", str(source), "--out", str(file)]
    assert main(argv) == 0
    assert file.read_bytes() == plain[0]
    assert main(["import", str(file), "--data", str(target)]) == 0
    assert _exports_of(target)[0] == plain[0]


def test_plaintext_gives_todays_bytes_exactly_with_a_key_configured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source"
    assert main(["key", "create", "--data", str(source)]) == 0
    plain = _fill_data_directory(source)
    capsys.readouterr()
    for what, expected in (("--notebooks", plain[0]), ("--knowledge", plain[1])):
        file = tmp_path / "plain.jsonl"
        argv = ["export", what, "--plaintext", "--data", str(source), "--out", str(file)]
        assert main(argv) == 0
        assert file.read_bytes() == expected
        _out, err = capsys.readouterr()
        assert "plaintext" not in err  # asked for: no warning
        assert json.loads(err.splitlines()[-1])["sealed_under"] is None


def test_without_a_master_key_oh_export_writes_plaintext_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    with pytest.warns(UnsealedWarning):
        plain = _fill_data_directory(source, sealed=False)  # kept plain: no key is made
    target.mkdir()
    written = _move(source, target, tmp_path)
    assert [data for _file, data in written] == list(plain)
    err = capsys.readouterr().err
    assert err.count("oh export: no master key is configured, so the export is plaintext") == 2
    assert _exports_of(target) == plain
    # --plaintext is accepted without a key too, and then there is nothing to warn about.
    file = tmp_path / "again.jsonl"
    argv = ["export", "--notebooks", "--plaintext", "--quiet", "--data", str(source)]
    assert main([*argv, "--out", str(file)]) == 0
    assert file.read_bytes() == plain[0] and capsys.readouterr().err == ""


def test_a_sealed_export_goes_through_standard_output_and_input(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    keys = tmp_path / "keys"
    key = MasterKey.generate()
    write_master_key(keys / KEY_FILE, key)
    source, target = tmp_path / "source", tmp_path / "target"
    monkeypatch.setenv("OH_KEYS", str(keys))
    plain = _fill_data_directory(source)
    capsysbinary.readouterr()
    assert main(["export", "--notebooks", "--quiet", "--data", str(source)]) == 0
    sealed = capsysbinary.readouterr().out
    assert sealed.startswith(b'{"chunk_bytes"') and b"bleaching" not in sealed
    # The target has its own key store, under the same key: a key file copied to its keys.
    target_keys = tmp_path / "target-keys"
    write_master_key(target_keys / KEY_FILE, key)
    monkeypatch.setenv("OH_KEYS", str(target_keys))
    target.mkdir()
    start_master_key(Locations.resolve(str(target), create=True))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(sealed)))
    assert main(["import", "-", "--quiet", "--data", str(target)]) == 0
    assert json.loads(capsysbinary.readouterr().out)["sealed_under"] == key.id
    assert _exports_of(target)[0] == plain[0]
