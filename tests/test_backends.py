"""The one place a storage backend is chosen (``oh.storage.backends``): by a location's URL."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import oh
import oh.config
from oh.config import Locations, open_host_registry, open_knowledge_store, open_memory_store
from oh.errors import NotFound
from oh.storage.backends import Embedded, Postgres, backend_of


@pytest.mark.parametrize(
    "url",
    [None, "memory.db", "/var/lib/oh/memory.db", "file:memory.db", "libsql:///tmp/m.db"],
)
def test_a_path_or_no_url_is_the_embedded_backend(url: str | None) -> None:
    assert isinstance(backend_of(url), Embedded)


@pytest.mark.parametrize(
    "url", ["postgresql://oh@127.0.0.1/oh", "postgres://oh:pw@db.internal:5432/oh"]
)
def test_a_postgresql_url_is_the_postgresql_backend(url: str) -> None:
    assert isinstance(backend_of(url), Postgres)


# Backend modules the configuration must never import: it asks ``backend_of`` instead.
_STORE_MODULES = {
    "oh.storage.sqlite.knowledge",
    "oh.storage.sqlite.host",
    "oh.storage.sqlite.vectors",
    "oh.storage.postgres.notebooks",
    "oh.storage.postgres.knowledge",
    "oh.storage.postgres.host",
    "oh.storage.postgres.vectors",
}


def test_the_configuration_opens_no_backend_of_its_own() -> None:
    imported = {
        (node.module, alias.name)
        for path in Path(oh.config.__file__).parent.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert ("oh.storage.backends", "backend_of") in imported  # it asks the one factory
    assert not {module for module, _ in imported} & _STORE_MODULES
    # From the embedded backend's module, only its names for drivers and durability settings.
    assert {name for module, name in imported if module == "oh.storage.sqlite.notebooks"} <= {
        "DRIVERS",
        "Driver",
        "Synchronous",
    }


def test_the_embedded_backend_opens_every_part_in_the_data_directory(tmp_path: Path) -> None:
    locations = Locations(tmp_path / "data", sealed=False)
    with pytest.warns(oh.config.UnsealedWarning):
        memory = open_memory_store(locations, synchronous="OFF")
    knowledge = open_knowledge_store(locations)
    registry = open_host_registry(locations)
    try:
        assert {p.name for p in (tmp_path / "data").iterdir()} >= {"memory.db", "knowledge.db"}
        assert backend_of(None).sealed_memory(locations) is None  # made without keys
    finally:
        for part in (memory, knowledge, registry):
            part.close()


def test_a_missing_embedded_file_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    locations = Locations(tmp_path / "nowhere", create=False)
    with pytest.raises(NotFound):
        open_memory_store(locations)
    assert not (tmp_path / "nowhere").exists()
    assert not (tmp_path / "nowhere-keys").exists()
    assert backend_of(None).sealed_memory(locations) is None


def test_only_the_backends_module_tells_a_backend_by_its_url() -> None:
    """Every other module asks ``backend_of`` (``local``, ``place``, ``shown``, ``check``,
    ``cluster``); only the key store's own location, which is never embedded in a memory
    database, reads a URL's scheme beside it."""
    allowed = {"storage/backends.py", "storage/urls.py", "storage/key_stores.py"}
    source = Path(oh.__file__).parent
    offenders = []
    for path in source.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "is_postgres_url"
                and path.relative_to(source).as_posix() not in allowed
            ):
                offenders.append(f"{path.relative_to(source)}:{node.lineno}")
    assert offenders == []


def test_each_backend_says_where_it_is_for_another_process_and_for_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    embedded = Locations(Path("data"), memory_url="here/memory.db")
    backend = backend_of(embedded.memory_url)
    assert backend.local is True
    absolute = str((tmp_path / "here" / "memory.db").resolve())
    assert backend.place(embedded.memory_url, embedded.memory_path) == absolute
    assert backend.shown(embedded.memory_url, embedded.memory_path) == absolute
    assert backend.cluster(embedded.memory_url) is None

    url = "postgresql://oh:secret@127.0.0.1:1/oh"
    server = Locations(tmp_path / "data", memory_url=url, create=False)
    backend = backend_of(url)
    assert backend.local is False
    assert backend.place(url, server.memory_path) == url  # another process needs the password
    assert backend.shown(url, server.memory_path) == "postgresql://oh:***@127.0.0.1:1/oh"
    backend.check(server.memory_path)  # nothing on this machine to check, nothing connects
    server.prepare(knowledge=False)  # likewise: no data directory is made or needed for it
    assert not (tmp_path / "data").exists()
    with pytest.raises(NotFound):
        server.prepare()  # the knowledge database is still the embedded default here


def test_preparing_an_embedded_location_checks_its_directory(tmp_path: Path) -> None:
    missing = Locations(tmp_path / "nowhere", create=False)
    with pytest.raises(NotFound):
        missing.prepare()
    made = Locations(tmp_path / "made")
    made.prepare()
    assert (tmp_path / "made").is_dir()
