"""The one place a storage backend is chosen (``oh.storage.backends``): by a location's URL."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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
    "oh.storage.libsql_knowledge",
    "oh.storage.libsql_host",
    "oh.storage.libsql_vectors",
    "oh.storage.postgres",
    "oh.storage.postgres_knowledge",
    "oh.storage.postgres_host",
    "oh.storage.postgres_vectors",
}


def test_the_configuration_opens_no_backend_of_its_own() -> None:
    tree = ast.parse(Path(oh.config.__file__).read_text())
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert not {module for module, _ in imported} & _STORE_MODULES
    # From the embedded backend's module, only its names for drivers and durability settings.
    assert {name for module, name in imported if module == "oh.storage.libsql"} <= {
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
