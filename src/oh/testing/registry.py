"""The host registry conformance suite: every ``HostRegistry`` backend passes it unchanged.

Subclass ``HostRegistryConformance`` and override the ``harness`` fixture with a
``RegistryHarness`` that opens a registry (its own connection) on one database.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import pytest

from oh.storage.base import HostRegistry, RegisteredDocument
from oh.testing.declared import ran

__all__ = ["HostRegistryConformance", "RegistryHarness"]

AT = "2026-11-29T12:00:00.000000Z"
LATER = "2026-11-29T13:00:00.000000Z"


class RegistryHarness(Protocol):
    def open(self) -> HostRegistry:
        """A new registry (its own connection) on the harness's database."""
        ...


class HostRegistryConformance:
    """One test per rule. Backends override ``harness``."""

    @pytest.fixture
    def harness(self) -> RegistryHarness:
        raise NotImplementedError("a backend's test module provides the harness fixture")

    @pytest.fixture
    def registry(
        self, harness: RegistryHarness, request: pytest.FixtureRequest
    ) -> Iterator[HostRegistry]:
        registry = harness.open()
        ran(request, HostRegistryConformance, registry)
        yield registry
        registry.close()

    def test_the_first_registration_decides_the_owner(self, registry: HostRegistry) -> None:
        assert registry.register_document("reef.pdf", "ann", AT) == "ann"
        assert registry.register_document("reef.pdf", "bob", LATER) == "ann"
        assert registry.document_owner("reef.pdf") == "ann"
        assert registry.document_owner("kelp.pdf") is None
        assert registry.owner_documents("ann", limit=10) == [
            RegisteredDocument("reef.pdf", "ann", AT)
        ]
        assert registry.owner_documents("bob", limit=10) == []

    def test_an_owners_documents_are_listed_by_name_and_only_theirs(
        self, registry: HostRegistry
    ) -> None:
        for document, owner in (
            ("reef.pdf", "ann"),
            ("Kelp.pdf", "ann"),
            ("bob.pdf", "bob"),
            ("atoll-2016.pdf", "ann"),
            ("é-accent.pdf", "ann"),
            ("atoll.pdf", "ann"),
        ):
            registry.register_document(document, owner, AT)
        listed = registry.owner_documents("ann", limit=10)
        # Byte (code point) order: capitals before small letters, "-" before ".".
        assert [row.document for row in listed] == [
            "Kelp.pdf",
            "atoll-2016.pdf",
            "atoll.pdf",
            "reef.pdf",
            "é-accent.pdf",
        ]
        assert {row.owner for row in listed} == {"ann"}
        assert [row.document for row in registry.owner_documents("bob", limit=10)] == ["bob.pdf"]
        assert registry.owner_documents("carol", limit=10) == []

    def test_the_listing_goes_on_after_a_name_a_page_at_a_time(
        self, registry: HostRegistry
    ) -> None:
        names = [f"doc-{i:02d}.pdf" for i in range(7)]
        for name in reversed(names):
            registry.register_document(name, "ann", AT)
        registry.register_document("doc-03b.pdf", "bob", AT)  # between two of ann's
        pages, after = [], None
        while True:
            page = registry.owner_documents("ann", after=after, limit=3)
            if not page:
                break
            pages.append([row.document for row in page])
            after = page[-1].document
        assert pages == [names[0:3], names[3:6], names[6:7]]
        # ``after`` need not be one of the owner's documents: the listing goes on past it.
        assert [r.document for r in registry.owner_documents("ann", after="doc-03a", limit=2)] == [
            "doc-04.pdf",
            "doc-05.pdf",
        ]
        assert registry.owner_documents("ann", after="doc-06.pdf", limit=3) == []

    def test_a_removed_document_leaves_the_listing(self, registry: HostRegistry) -> None:
        registry.register_document("reef.pdf", "ann", AT)
        registry.register_document("kelp.pdf", "ann", AT)
        registry.remove_document("reef.pdf")
        assert [row.document for row in registry.owner_documents("ann", limit=10)] == ["kelp.pdf"]
        # Registered again, by another owner this time: it is theirs alone, with its new time.
        assert registry.register_document("reef.pdf", "bob", LATER) == "bob"
        assert registry.owner_documents("bob", limit=10) == [
            RegisteredDocument("reef.pdf", "bob", LATER)
        ]
        assert [row.document for row in registry.owner_documents("ann", limit=10)] == ["kelp.pdf"]

    def test_another_connection_lists_the_same_documents(
        self, harness: RegistryHarness, registry: HostRegistry
    ) -> None:
        registry.register_document("reef.pdf", "ann", AT)
        other = harness.open()
        try:
            assert other.owner_documents("ann", limit=10) == [
                RegisteredDocument("reef.pdf", "ann", AT)
            ]
            other.register_document("kelp.pdf", "ann", LATER)
        finally:
            other.close()
        assert [row.document for row in registry.owner_documents("ann", limit=10)] == [
            "kelp.pdf",
            "reef.pdf",
        ]
