"""Packs (SPEC §8): the pack format and its digest, the shipped Research, Language and Finance
packs, validation on write, preview and install per owner, the CLI, and the docs' examples."""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import random
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import rfc8785

from oh.cli.profiles import register
from oh.config import Locations, open_host
from oh.core.canonical import canonical_text, sha256_hex
from oh.core.changes import Add, parse_changes
from oh.core.clock import utc_text
from oh.core.records import MAX_FIELDS_BYTES, Record
from oh.core.reviewed import revision_hash
from oh.errors import AlreadyExists, IntegrityError, InvalidArgument, NotFound, OhError
from oh.profiles import (
    PACK_FORMAT,
    SHIPPED_PACKS,
    Pack,
    Profiles,
    Schema,
    Version,
    default_codecs,
    find_pack,
    load_pack,
    parse_pack,
    read_pack,
    seal,
    shipped_pack,
)
from oh.profiles.codecs import Codec, Codecs, Params, reject
from oh.services.knowledge import Knowledge
from oh.services.notebooks import Notebooks
from oh.storage.base import PackInstall
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.knowledge import SOURCE
from oh.testing.lifecycle import T0, FakeClock
from oh.testing.memory_store import add, write
from oh.verify import verify_knowledge

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "docs" / "packs.md").read_text()

REEF: dict[str, Any] = {
    "format": 1,
    "name": "reef-monitoring",
    "version": "1.0.0",
    "description": "Reef survey sites and the bleaching observed at them.",
    "kinds": {
        "site": {
            "description": "A surveyed reef site.",
            "fields": {
                "site_name": {"codec": "text", "max_length": 200, "required": True},
                "depth": {"codec": "quantity", "units": ["m"]},
                "habitat": {"codec": "enum", "values": ["fringing", "barrier"]},
            },
        },
        "bleaching_observation": {
            "fields": {
                "site": {"codec": "reference", "kinds": ["site"], "required": True},
                "observed_on": {"codec": "date", "required": True},
                "bleached": {"codec": "percent", "minimum": "0", "maximum": "100"},
            },
        },
    },
}


def reef(version: str = "1.0.0", change: Callable[[dict[str, Any]], None] | None = None) -> Pack:
    """The reef pack at ``version``, sealed after ``change`` edits a copy of it."""
    value = copy.deepcopy(REEF)
    value["version"] = version
    if change is not None:
        change(value)
    return parse_pack(seal(value))


def site_fields(value: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = value["kinds"]["site"]["fields"]
    return fields


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteKnowledgeStore]:
    opened = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    yield opened
    opened.close()


@pytest.fixture
def profiles(store: SqliteKnowledgeStore) -> Profiles:
    return Profiles(store, clock=FakeClock())


def record(name: str, fields: dict[str, Any] | None = None, text: str = "t") -> Record:
    return Record.parse({"name": name, "text": text, "fields": fields or {}})


def refusal(call: Callable[[], Any]) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as caught:
        call()
    return caught.value


# -- the pack format -----------------------------------------------------------------------------


def test_a_sealed_pack_loads_with_its_manifest_and_kinds() -> None:
    pack = load_pack(json.dumps(seal(REEF)))
    assert (pack.name, str(pack.version), pack.format) == ("reef-monitoring", "1.0.0", 1)
    assert sorted(pack.kinds) == ["bleaching_observation", "site"]
    assert pack.kinds["site"].fields["site_name"].required is True
    assert pack.kinds["site"].fields["depth"].required is False
    assert pack.to_json() == seal(REEF)


def test_the_digest_is_sha256_of_the_rfc8785_form_without_the_digest() -> None:
    sealed = seal(REEF)
    content = {key: value for key, value in sealed.items() if key != "digest"}
    assert sealed["digest"] == sha256_hex(rfc8785.dumps(content))
    assert load_pack(json.dumps(sealed)).content == canonical_text(content)


def test_formatting_and_key_order_do_not_change_the_digest() -> None:
    sealed = seal(REEF)
    reordered = dict(reversed(list(sealed.items())))
    assert load_pack(json.dumps(reordered, indent=7)).digest == sealed["digest"]


def test_a_damaged_pack_is_refused() -> None:
    sealed = seal(REEF)
    sealed["kinds"]["site"]["fields"]["site_name"]["max_length"] = 20
    error = refusal(lambda: parse_pack(sealed))
    assert error.details == {"field": "pack.digest", "rule": "pack.digest"}
    assert "damaged" in error.message


def test_a_truncated_pack_file_is_refused() -> None:
    text = json.dumps(seal(REEF))
    assert refusal(lambda: load_pack(text[: len(text) // 2])).code == "invalid_argument"


def test_a_pack_without_a_well_formed_digest_is_refused() -> None:
    sealed = seal(REEF)
    for digest in (None, "", sealed["digest"].upper(), 42):
        value = {**sealed, "digest": digest}
        if digest is None:
            del value["digest"]
        assert refusal(lambda value=value: parse_pack(value)).details["rule"] == "pack.digest"


@pytest.mark.parametrize(
    "value",
    [
        {**REEF, "format": 2},
        {**REEF, "format": "1"},
        {**REEF, "format": True},
        {key: value for key, value in REEF.items() if key != "format"},
        [REEF],
        "research",
    ],
    ids=["format-2", "format-text", "format-true", "no-format", "a-list", "a-string"],
)
def test_a_pack_of_an_unknown_format_is_refused(value: Any) -> None:
    assert refusal(lambda: parse_pack(value)).details["rule"] == "pack.format"


def test_the_format_is_checked_before_the_digest() -> None:
    newer = {**seal(REEF), "format": PACK_FORMAT + 1}
    error = refusal(lambda: parse_pack(newer))
    assert error.details["rule"] == "pack.format"
    assert f"reads format {PACK_FORMAT}" in error.message


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(pack: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        target = pack
        for key in parents:
            target = target[key]
        target[last] = value

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def change(pack: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        target = pack
        for key in parents:
            target = target[key]
        del target[last]

    return change


SCHEMA_REFUSALS = [
    ("unknown-key", _set("homepage", "https://example.org"), "pack.homepage", "pack.schema"),
    ("bad-name", _set("name", "Reef Monitoring"), "pack.name", "pack.schema"),
    ("not-semver", _set("version", "1.0"), "pack.version", "pack.version"),
    ("leading-zero", _set("version", "01.0.0"), "pack.version", "pack.version"),
    ("no-description", _drop("description"), "pack.description", "pack.schema"),
    ("no-kinds", _set("kinds", {}), "pack.kinds", "pack.schema"),
    ("kinds-list", _set("kinds", ["site"]), "pack.kinds", "pack.schema"),
    ("bad-kind-name", _set("kinds/Site", {"fields": {}}), "pack.kinds.Site", "pack.schema"),
    ("kind-key", _set("kinds/site/label", "x"), "pack.kinds.site.label", "pack.schema"),
    ("no-fields", _drop("kinds/site/fields"), "pack.kinds.site.fields", "pack.schema"),
    (
        "bad-field-name",
        _set("kinds/site/fields/Name", {"codec": "text"}),
        "pack.kinds.site.fields.Name",
        "pack.schema",
    ),
    (
        "required-text",
        _set("kinds/site/fields/site_name/required", "yes"),
        "pack.kinds.site.fields.site_name.required",
        "pack.schema",
    ),
    (
        "unknown-codec",
        _set("kinds/site/fields/depth", {"codec": "metres"}),
        "pack.kinds.site.fields.depth.codec",
        "codec.unknown",
    ),
    (
        "bad-codec-param",
        _set("kinds/site/fields/site_name/max_length", -1),
        "pack.kinds.site.fields.site_name.max_length",
        "codec.params",
    ),
    (
        "no-codec",
        _set("kinds/site/fields/depth", {"required": True}),
        "pack.kinds.site.fields.depth.codec",
        "codec.unknown",
    ),
]


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [case[1:] for case in SCHEMA_REFUSALS],
    ids=[case[0] for case in SCHEMA_REFUSALS],
)
def test_a_pack_that_breaks_the_manifest_schema_is_refused_naming_the_place(
    change: Callable[[dict[str, Any]], None], field: str, rule: str
) -> None:
    value = copy.deepcopy(REEF)
    change(value)
    value["digest"] = sha256_hex(canonical_text(value))
    error = refusal(lambda: parse_pack(value))
    assert (error.details["field"], error.details["rule"]) == (field, rule)


def test_a_pack_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(" " * (1 << 20) + json.dumps(seal(REEF)))
    assert refusal(lambda: read_pack(path)).details["rule"] == "pack.size"


def test_a_missing_pack_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        read_pack(tmp_path / "nowhere.json")
    with pytest.raises(NotFound, match="shipped"):
        find_pack(str(tmp_path / "nowhere.json"))


def test_a_pack_is_found_by_path_or_by_shipped_name(tmp_path: Path) -> None:
    path = tmp_path / "reef.json"
    path.write_text(json.dumps(seal(REEF)))
    assert find_pack(str(path)).name == "reef-monitoring"
    assert find_pack("research").name == "research"


def test_semantic_versions_order_by_precedence() -> None:
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.2.0",
        "1.10.0",
        "2.0.0",
    ]
    versions = [Version.parse(text) for text in ordered]
    assert sorted(random.Random(8).sample(versions, len(versions))) == versions
    assert all(a < b for a, b in itertools.pairwise(versions))


def test_build_metadata_does_not_order_versions() -> None:
    first, second = Version.parse("1.0.0+build.1"), Version.parse("1.0.0+build.2")
    assert first.precedence() == second.precedence()


# -- the shipped packs ---------------------------------------------------------------------------

SPEC_KINDS = {
    "research": {"publication_version", "study", "method", "sample", "finding", "correction"},
    "language": {"term", "sense", "usage_example", "translation"},
    "finance": {"entity", "instrument", "filing", "period", "metric", "correction"},
}


@pytest.mark.parametrize("name", SHIPPED_PACKS)
def test_each_shipped_pack_loads_verifies_and_has_the_kinds_the_spec_lists(name: str) -> None:
    pack = shipped_pack(name)
    assert (pack.name, pack.format) == (name, PACK_FORMAT)
    assert set(pack.kinds) == SPEC_KINDS[name]
    assert seal(pack.to_json()) == pack.to_json()  # sealed as shipped


def test_the_shipped_packs_are_package_data() -> None:
    from importlib import resources

    folder = resources.files("oh.profiles").joinpath("shipped")
    assert sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".json")) == [
        f"{name}.json" for name in sorted(SHIPPED_PACKS)
    ]


def test_an_unknown_shipped_pack_is_not_found() -> None:
    with pytest.raises(NotFound):
        shipped_pack("astronomy")


def test_research_and_finance_share_one_correction_kind() -> None:
    research, finance = shipped_pack("research"), shipped_pack("finance")
    assert research.kinds["correction"].signature() == finance.kinds["correction"].signature()


def test_all_three_shipped_packs_install_side_by_side(profiles: Profiles) -> None:
    for name in SHIPPED_PACKS:
        assert profiles.install("ann", shipped_pack(name)).changed
    assert [item.pack.name for item in profiles.installed("ann")] == sorted(SHIPPED_PACKS)
    assert len(profiles.schema("ann").kinds) == 15


VALID_RECORDS = [
    (
        "research",
        "finding:bleaching-threshold",
        {
            "statement": "Bleaching began after four weeks 1 °C above the summer maximum.",
            "effect_size": "0.62",
            "effect_measure": "correlation",
            "effect_interval": {"low": "0.48", "high": "0.73"},
            "confidence_level": "95%",
            "p_value": "1e-3",
            "sample": "sample:northern-sites-2016",
        },
        {"confidence_level": "95", "p_value": "0.001"},
    ),
    (
        "research",
        "publication_version:hughes-preprint-v2",
        {
            "title": "Recovery of coral cover after mass bleaching",
            "version_label": "preprint v2",
            "stage": "preprint",
            "doi": "DOI:10.5555/Reef.Preprint.2",
            "date": "2017",
            "url": "HTTPS://Preprints.Example.org/reef/v2",
            "isbn": "0-306-40615-2",
            "orcids": ["https://orcid.org/0000-0002-1825-0097"],
            "language": "EN-au",
        },
        {
            "doi": "10.5555/reef.preprint.2",
            "url": "https://preprints.example.org/reef/v2",
            "isbn": "9780306406157",
            "orcids": ["0000-0002-1825-0097"],
            "language": "en-AU",
        },
    ),
    (
        "research",
        "sample:northern-sites-2016",
        {"size": 24.0, "population": "Reef sites", "period": {"low": "2016-03", "high": "2016-11"}},
        {"size": 24},
    ),
    (
        "language",
        "translation:reef-pt",
        {
            "translates": "sense:coral-reef-en-1",
            "equivalent": "recife de coral",
            "language": "PT-br",
            "equivalence": "exact",
        },
        {"language": "pt-BR"},
    ),
    (
        "language",
        "term:korallenriff-de",
        {"lemma": "Korallenriff", "language": "de-CH-1901", "forms": ["Korallenriffe"]},
        {"language": "de-CH-1901"},
    ),
    (
        "finance",
        "instrument:apple-common",
        {
            "name": "Apple Inc. common stock",
            "isin": "us0378331005",
            "ticker": "aapl",
            "currency": "usd",
            "issuer": "entity:apple",
        },
        {"isin": "US0378331005", "ticker": "AAPL", "currency": "USD"},
    ),
    (
        "finance",
        "metric:apple-net-sales-fy2023",
        {
            "subject": "entity:apple",
            "metric": "net sales",
            "period": "period:apple-fy2023",
            "money": {"amount": "383285000000.00", "currency": "usd"},
        },
        {"money": {"amount": "383285000000", "currency": "USD"}},
    ),
    (
        "finance",
        "entity:apple",
        {"legal_name": "Apple Inc.", "lei": "HWUPKR0MPOU8FGXBT394", "jurisdiction": "US-CA"},
        {},
    ),
]


@pytest.mark.parametrize(
    ("pack", "name", "fields", "canonical"),
    VALID_RECORDS,
    ids=[case[1] for case in VALID_RECORDS],
)
def test_realistic_records_of_the_shipped_packs_validate_in_canonical_form(
    pack: str, name: str, fields: dict[str, Any], canonical: dict[str, Any]
) -> None:
    checked = Schema.of([shipped_pack(pack)]).check(record(name, fields), reviewed=True)
    assert checked.fields == {**fields, **canonical}
    assert Schema.of([shipped_pack(pack)]).check(checked) == checked


INVALID_RECORDS = [
    ("research", "finding:x", {"effect_size": "0.5"}, "fields.statement", "kind.required"),
    (
        "research",
        "finding:x",
        {"statement": "s", "effect_size": 0.62},
        "fields.effect_size",
        "decimal.string",
    ),
    (
        "research",
        "finding:x",
        {"statement": "s", "sample": "study:reef-resurvey"},
        "fields.sample",
        "reference.kind",
    ),
    (
        "research",
        "finding:x",
        {"statement": "s", "p_value": "1.5"},
        "fields.p_value",
        "decimal.maximum",
    ),
    (
        "research",
        "finding:x",
        {"statement": "s", "confidence": "95"},
        "fields.confidence",
        "kind.unknown_field",
    ),
    ("research", "sample:x", {"size": 0, "population": "p"}, "fields.size", "integer.minimum"),
    (
        "research",
        "publication_version:x",
        {"title": "t", "version_label": "v", "doi": "10.5555"},
        "fields.doi",
        "doi.format",
    ),
    (
        "research",
        "publication_version:x",
        {"title": "t", "version_label": "v", "orcids": ["0000-0002-1825-0098"]},
        "fields.orcids[0]",
        "orcid.checksum",
    ),
    (
        "research",
        "publication_version:x",
        {"title": "Two\nlines", "version_label": "v"},
        "fields.title",
        "text.single_line",
    ),
    (
        "research",
        "correction:x",
        {"corrects": "finding:x", "statement": "s", "date": "2019-02-30"},
        "fields.date",
        "date.calendar",
    ),
    (
        "language",
        "term:x",
        {"lemma": "reef", "language": "en_GB"},
        "fields.language",
        "language.format",
    ),
    (
        "language",
        "sense:x",
        {"term": "term:reef", "definition": "d", "language": "en", "register": "street"},
        "fields.register",
        "enum.value",
    ),
    (
        "finance",
        "instrument:x",
        {"name": "n", "isin": "US0378331006"},
        "fields.isin",
        "isin.checksum",
    ),
    (
        "finance",
        "entity:x",
        {"legal_name": "n", "lei": "HWUPKR0MPOU8FGXBT395"},
        "fields.lei",
        "lei.checksum",
    ),
    (
        "finance",
        "metric:x",
        {
            "subject": "entity:apple",
            "metric": "net sales",
            "period": "period:fy2023",
            "money": {"amount": "1", "currency": "USX"},
        },
        "fields.money.currency",
        "currency.code",
    ),
    (
        "finance",
        "period:x",
        {"span": {"low": "2023-09-30", "high": "2022-09-25"}},
        "fields.span",
        "interval.order",
    ),
    (
        "finance",
        "filing:x",
        {"entity": "entity:apple", "form": "10-K", "filed_on": "2023-11"},
        "fields.filed_on",
        "date.partial",
    ),
]


@pytest.mark.parametrize(
    ("pack", "name", "fields", "field", "rule"),
    INVALID_RECORDS,
    ids=[f"{case[1]}-{case[4]}" for case in INVALID_RECORDS],
)
def test_realistic_invalid_records_are_refused_naming_the_field_and_the_rule(
    pack: str, name: str, fields: dict[str, Any], field: str, rule: str
) -> None:
    error = refusal(lambda: Schema.of([shipped_pack(pack)]).check(record(name, fields)))
    assert error.details == {"field": field, "rule": rule, "name": name}
    assert error.message.startswith(f"{name}: {field}: ")


# -- validation on write ---------------------------------------------------------------------------


def test_until_a_pack_is_installed_fields_are_only_checked_to_be_canonical_json(
    profiles: Profiles,
) -> None:
    loose = record("finding:x", {"effect_size": 0.62, "anything": [1, {"goes": True}]})
    assert profiles.schema("ann").kinds == {}
    assert profiles.check("ann", loose) is loose
    assert profiles.check("ann", loose, reviewed=True) is loose


def test_fields_of_a_kind_in_an_installed_profile_are_canonicalized_on_check(
    profiles: Profiles,
) -> None:
    profiles.install("ann", reef())
    checked = profiles.check(
        "ann",
        record("site:a", {"site_name": "Lizard Island", "depth": {"value": "6.0", "unit": "m"}}),
    )
    assert checked.fields["depth"] == {"value": "6", "unit": "m"}


def test_the_digest_is_computed_over_the_canonical_fields(profiles: Profiles) -> None:
    profiles.install("ann", reef())
    spelled = [
        {"site": "site:a", "observed_on": "2016-03-29", "bleached": "45.50%"},
        {"site": "site:a", "observed_on": "2016-03-29", "bleached": "4.55e1"},
    ]
    first, second = (profiles.check("ann", record("bleaching_observation:a", f)) for f in spelled)
    assert first.digest == second.digest
    assert first.canonical() == second.canonical()


def test_a_kind_outside_every_installed_profile_is_left_unchanged(profiles: Profiles) -> None:
    profiles.install("ann", reef())
    lead = record("lead:reef-survey-2016", {"score": 0.5})
    assert profiles.check("ann", lead) is lead


def test_reviewed_records_use_the_installed_kinds_once_a_profile_is_installed(
    profiles: Profiles,
) -> None:
    profiles.install("ann", reef())
    error = refusal(lambda: profiles.check("ann", record("lead:x"), reviewed=True))
    assert error.details == {"field": "kind", "rule": "profile.kind", "name": "lead:x"}


def test_canonical_fields_over_the_size_limit_are_refused() -> None:
    def many_decimals(value: dict[str, Any]) -> None:
        site_fields(value)["readings"] = {
            "codec": "list",
            "of": {"codec": "decimal"},
            "max_items": 1000,
        }

    schema = Schema.of([reef(change=many_decimals)])
    readings = ["1e39"] * 400  # 2,800 bytes as written, 17,200 in canonical form
    big = record("site:a", {"site_name": "a", "readings": readings})
    assert len(canonical_text(big.fields)) < MAX_FIELDS_BYTES
    assert refusal(lambda: schema.check(big)).details["rule"] == "record.fields_size"


def test_notes_and_reviewed_records_are_both_checked(tmp_path: Path, profiles: Profiles) -> None:
    profiles.install("ann", reef())
    bad = {"site_name": "Lizard Island", "depth": {"value": "6", "unit": "ft"}}
    # A note, as remember parses it.
    (change,) = parse_changes(
        [{"op": "add", "record": {"name": "site:a", "text": "t", "fields": bad}}]
    )
    assert isinstance(change, Add)
    assert refusal(lambda: profiles.check("ann", change.record)).details["rule"] == (
        "quantity.allowed"
    )
    # A reviewed record, as review holds it: proposed, then checked before it is accepted.
    memory = SqliteMemoryStore(tmp_path / "memory.db")
    try:
        proposal = Knowledge(profiles.store, memory, clock=FakeClock()).propose(
            "ann", source=SOURCE, record={"name": "site:a", "text": "t", "fields": bad}
        )
    finally:
        memory.close()
    reviewed = Record.parse(proposal.verified_record())
    error = refusal(lambda: profiles.check("ann", reviewed, reviewed=True))
    assert error.details == {
        "field": "fields.depth.unit",
        "rule": "quantity.allowed",
        "name": "site:a",
    }
    good = {"site_name": "Lizard Island", "depth": {"value": "6.00", "unit": "m"}}
    for checked in (
        profiles.check("ann", record("site:a", good)),
        profiles.check("ann", record("site:a", good), reviewed=True),
    ):
        assert checked.fields["depth"] == {"value": "6", "unit": "m"}


def test_the_schema_is_cached_by_the_installed_digests(profiles: Profiles) -> None:
    empty = profiles.schema("ann")
    assert profiles.schema("ann") is empty
    profiles.install("ann", reef())
    installed = profiles.schema("ann")
    assert installed is not empty and installed is profiles.schema("ann")
    profiles.install("bob", reef())
    assert profiles.schema("bob") is installed  # same packs, same schema


# -- preview and install ---------------------------------------------------------------------------


def test_preview_shows_new_kinds_and_changes_nothing(
    profiles: Profiles, store: SqliteKnowledgeStore
) -> None:
    preview = profiles.preview("ann", reef())
    assert preview.action == "install" and preview.installed is None
    assert [(c.change, c.kind) for c in preview.changes] == [
        ("kind_added", "bleaching_observation"),
        ("kind_added", "site"),
    ]
    assert (preview.needs_force, preview.can_install) == (False, True)
    assert store.latest_revision("ann") == 0 and profiles.installed("ann") == []
    assert json.loads(json.dumps(preview.to_json()))["action"] == "install"


def _accept(store: SqliteKnowledgeStore, tmp_path: Path, owner: str, value: dict[str, Any]) -> int:
    memory = SqliteMemoryStore(tmp_path / "memory.db")
    try:
        knowledge = Knowledge(store, memory, clock=FakeClock())
        proposal = knowledge.propose(owner, source=SOURCE, record=value)
        decided = knowledge.decide(owner, proposal.id, decision="accept", reason="cited")
    finally:
        memory.close()
    assert decided.record is not None
    return decided.record.revision


def test_an_install_is_a_new_revision_hash_chained_like_a_decision(
    profiles: Profiles, store: SqliteKnowledgeStore, tmp_path: Path
) -> None:
    assert _accept(store, tmp_path, "ann", {"name": "lead:a", "text": "t"}) == 1
    result = profiles.install("ann", reef())
    assert (result.changed, result.installed.revision) == (True, 2)
    assert _accept(store, tmp_path, "ann", {"name": "lead:b", "text": "t"}) == 3
    entries = store.revisions("ann")
    pack_entry = entries[1]
    assert (pack_entry.what, pack_entry.name, pack_entry.digest, pack_entry.made_by) == (
        "pack",
        "reef-monitoring",
        reef().digest,
        "ann",
    )
    assert pack_entry.prev_hash == entries[0].hash and entries[2].prev_hash == pack_entry.hash
    assert all(revision_hash(entry) == entry.hash for entry in entries)
    assert store.head("ann") == (3, entries[2].hash)
    report = verify_knowledge(store)
    assert report.ok and report.entries == 3


def test_the_installed_pack_is_stored_with_its_canonical_content(
    profiles: Profiles, store: SqliteKnowledgeStore
) -> None:
    pack = reef()
    profiles.install("ann", pack, by="curator")
    (row,) = store.installed_packs("ann")
    assert row == PackInstall(
        "ann", pack.name, "1.0.0", pack.digest, pack.content, 1, "curator", row.installed_at
    )
    assert sha256_hex(row.content) == row.digest
    assert row.installed_at == utc_text(T0)


def test_reinstalling_the_same_digest_makes_no_revision(
    profiles: Profiles, store: SqliteKnowledgeStore
) -> None:
    first = profiles.install("ann", reef())
    again = profiles.install("ann", reef(), force=True)
    assert (again.changed, again.preview.action) == (False, "none")
    assert again.installed.revision == first.installed.revision == 1
    assert store.latest_revision("ann") == 1 and len(store.pack_history("ann")) == 1


def test_a_compatible_upgrade_installs_without_force(profiles: Profiles) -> None:
    profiles.install("ann", reef())

    def widen(value: dict[str, Any]) -> None:
        fields = site_fields(value)
        fields["habitat"]["values"].append("atoll")
        fields["site_name"]["max_length"] = 400
        fields["depth"]["required"] = False
        fields["notes"] = {"codec": "text"}
        value["kinds"]["survey"] = {"fields": {"site": {"codec": "reference"}}}

    preview = profiles.preview("ann", reef("1.1.0", widen))
    assert preview.action == "upgrade"
    assert {(c.change, c.field) for c in preview.changes} == {
        ("kind_added", None),
        ("field_added", "notes"),
        ("codec_changed", "habitat"),
        ("codec_changed", "site_name"),
    }
    assert all(change.compatible for change in preview.changes)
    result = profiles.install("ann", reef("1.1.0", widen))
    assert result.changed and str(profiles.installed("ann")[0].pack.version) == "1.1.0"


def _required(value: dict[str, Any]) -> None:
    site_fields(value)["depth"]["required"] = True


def _new_required(value: dict[str, Any]) -> None:
    site_fields(value)["reef_zone"] = {"codec": "text", "required": True}


def _narrowed(value: dict[str, Any]) -> None:
    site_fields(value)["habitat"]["values"] = ["fringing"]


def _codec_swapped(value: dict[str, Any]) -> None:
    site_fields(value)["depth"] = {"codec": "decimal"}


INCOMPATIBLE = [
    ("kind_removed", _drop("kinds/bleaching_observation")),
    ("field_removed", _drop("kinds/site/fields/habitat")),
    ("field_added", _new_required),
    ("field_required", _required),
    ("codec_changed", _narrowed),
    ("codec_changed", _codec_swapped),
]


@pytest.mark.parametrize(
    ("change", "edit"),
    INCOMPATIBLE,
    ids=[
        "kind-removed",
        "field-removed",
        "required-field-added",
        "made-required",
        "enum-narrowed",
        "codec-swapped",
    ],
)
def test_an_incompatible_upgrade_is_refused_unless_forced(
    profiles: Profiles, change: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    profiles.install("ann", reef())
    newer = reef("2.0.0", edit)
    preview = profiles.preview("ann", newer)
    assert [c.change for c in preview.changes if not c.compatible] == [change]
    assert preview.needs_force and preview.can_install
    with pytest.raises(AlreadyExists, match="needs force") as caught:
        profiles.install("ann", newer)
    assert caught.value.details["incompatible"] == list(preview.incompatible)
    assert profiles.installed("ann")[0].pack.digest == reef().digest
    assert profiles.install("ann", newer, force=True).installed.revision == 2


def test_a_downgrade_needs_force(profiles: Profiles) -> None:
    profiles.install("ann", reef("1.2.0"))
    older = reef("1.1.0")
    preview = profiles.preview("ann", older)
    assert preview.action == "downgrade" and preview.changes == ()
    assert preview.incompatible == ("1.2.0 is newer than 1.1.0",)
    with pytest.raises(AlreadyExists):
        profiles.install("ann", older)
    assert profiles.install("ann", older, force=True).changed


def test_the_same_version_with_other_content_needs_force(profiles: Profiles) -> None:
    profiles.install("ann", reef())
    edited = reef(change=_set("description", "Edited without a new version."))
    assert profiles.preview("ann", edited).action == "replace"
    with pytest.raises(AlreadyExists):
        profiles.install("ann", edited)


def test_a_kind_another_pack_defines_differently_is_refused_even_with_force(
    profiles: Profiles,
) -> None:
    profiles.install("ann", shipped_pack("research"))

    def own_correction(value: dict[str, Any]) -> None:
        value["name"] = "reef-corrections"
        value["kinds"]["correction"] = {"fields": {"note": {"codec": "text"}}}

    rival = reef(change=own_correction)
    preview = profiles.preview("ann", rival)
    assert not preview.can_install
    assert preview.conflicts == (
        "correction is defined differently by the installed pack research 1.0.0",
    )
    with pytest.raises(AlreadyExists, match="conflicts"):
        profiles.install("ann", rival, force=True)
    assert profiles.install("ann", shipped_pack("finance")).changed  # same correction: fine


def test_reviewed_records_that_would_not_fit_make_an_install_need_force(
    profiles: Profiles, store: SqliteKnowledgeStore, tmp_path: Path
) -> None:
    _accept(store, tmp_path, "ann", {"name": "site:a", "text": "t", "fields": {"depth": 6}})
    _accept(store, tmp_path, "ann", {"name": "site:b", "text": "t", "fields": {"site_name": "b"}})
    preview = profiles.preview("ann", reef())
    assert preview.records_checked == 2
    assert [name for name, _ in preview.records_invalid] == ["site:a"]
    assert preview.records_invalid[0][1].endswith("(rule kind.required)")
    assert preview.needs_force
    with pytest.raises(AlreadyExists):
        profiles.install("ann", reef())
    assert profiles.install("ann", reef(), force=True).installed.revision == 3


@dataclass
class Pending:
    """An owner's work in progress before an install: notes in an open notebook (and in a
    forgotten one, and another owner's), and pending proposals."""

    memory: SqliteMemoryStore
    knowledge: Knowledge
    notebook: str
    proposals: dict[str, str]  # name -> proposal id


@pytest.fixture
def pending(tmp_path: Path, store: SqliteKnowledgeStore) -> Iterator[Pending]:
    clock = FakeClock()
    memory = SqliteMemoryStore(tmp_path / "memory.db")
    notebooks = Notebooks(memory, clock=clock, knowledge=store)
    knowledge = Knowledge(store, memory, clock=clock, profiles=Profiles(store, clock=clock))
    notebook = notebooks.open("ann", "reef.pdf", "run-1")
    write(
        memory,
        notebook.id,
        0,
        "r-1",
        add("lead:survey", "methods section missing"),
        add("site:lizard", "Lizard Island", fields={"depth": 6}),
        add("site:heron", "Heron", fields={"site_name": "Heron Island"}),
        now=clock(),
    )
    gone = notebooks.open("ann", "reef.pdf", "run-0")
    write(memory, gone.id, 0, "r-1", add("lead:forgotten", "gone"), now=clock())
    notebooks.forget(gone.id, "ann")
    bobs = notebooks.open("bob", "reef.pdf", "run-1")
    write(memory, bobs.id, 0, "r-1", add("lead:bobs", "bob's"), now=clock())
    proposals = {
        name: knowledge.propose("ann", source=SOURCE, record=value).id
        for name, value in (
            ("lead:guess", {"name": "lead:guess", "text": "maybe revised"}),
            ("site:orpheus", {"name": "site:orpheus", "text": "Orpheus", "fields": {"depth": 4}}),
            ("site:one-tree", {"name": "site:one-tree", "text": "t", "fields": {"site_name": "x"}}),
        )
    }
    knowledge.propose("bob", source=SOURCE, record={"name": "lead:bob", "text": "bob's"})
    yield Pending(memory, knowledge, notebook.id, proposals)
    memory.close()


def test_preview_lists_the_pending_proposals_and_notes_the_install_would_leave_unreviewable(
    profiles: Profiles, store: SqliteKnowledgeStore, pending: Pending
) -> None:
    preview = profiles.preview("ann", reef(), memory=pending.memory)
    stranded = {(item.where, item.name): item.reason for item in preview.proposals_invalid}
    assert set(stranded) == {
        (pending.proposals["lead:guess"], "lead:guess"),
        (pending.proposals["site:orpheus"], "site:orpheus"),
    }
    assert stranded[(pending.proposals["lead:guess"], "lead:guess")].endswith("(rule profile.kind)")
    assert stranded[(pending.proposals["site:orpheus"], "site:orpheus")].endswith(
        "(rule kind.required)"
    )
    unproposable = {(item.where, item.name) for item in preview.notes_invalid}
    assert unproposable == {(pending.notebook, "lead:survey"), (pending.notebook, "site:lizard")}
    body = json.loads(json.dumps(preview.to_json()))
    assert (body["proposals_invalid_count"], body["notes_invalid_count"]) == (2, 2)
    assert {item["proposal_id"] for item in body["proposals_invalid"]} == {
        pending.proposals["lead:guess"],
        pending.proposals["site:orpheus"],
    }
    assert {item["notebook"] for item in body["notes_invalid"]} == {pending.notebook}
    # They are not knowledge yet, so they warn and do not stop the install.
    assert (preview.needs_force, preview.can_install) == (False, True)
    assert store.latest_revision("ann") == 0 and profiles.installed("ann") == []
    without_notes = profiles.preview("ann", reef())
    assert without_notes.notes_invalid == () and len(without_notes.proposals_invalid) == 2
    result = profiles.install("ann", reef(), memory=pending.memory)
    assert result.changed and result.preview.proposals_invalid == preview.proposals_invalid
    assert result.preview.notes_invalid == preview.notes_invalid
    # What was unreviewable before an install is not the install's doing: not listed again.
    after = profiles.preview("ann", shipped_pack("language"), memory=pending.memory)
    assert (after.proposals_invalid, after.notes_invalid) == ((), ())


def test_after_an_install_a_stranded_proposal_can_be_rejected_or_accepted_with_edits_that_fit(
    profiles: Profiles, store: SqliteKnowledgeStore, pending: Pending
) -> None:
    profiles.install("ann", reef(), memory=pending.memory)
    review = pending.knowledge
    orpheus = pending.proposals["site:orpheus"]
    assert (
        refusal(
            lambda: review.decide("ann", orpheus, decision="accept", reason="as proposed")
        ).details["rule"]
        == "kind.required"
    )
    fitted = {
        "name": "site:orpheus",
        "text": "Orpheus",
        "fields": {"site_name": "Orpheus Island", "depth": {"value": "4", "unit": "m"}},
    }
    decided = review.decide("ann", orpheus, decision="accept", reason="named", record=fitted)
    assert decided.record is not None and decided.record.decision.decision == "accept_with_edits"
    guess = pending.proposals["lead:guess"]
    assert (
        refusal(
            lambda: review.decide("ann", guess, decision="accept", reason="as proposed")
        ).details["rule"]
        == "profile.kind"
    )
    assert review.decide("ann", guess, decision="reject", reason="no lead kind").record is None
    assert store.proposal(pending.proposals["site:one-tree"]).state == "pending"


def test_installed_profiles_are_per_owner(profiles: Profiles) -> None:
    profiles.install("ann", reef())
    assert profiles.installed("bob") == []
    loose = record("site:a", {"depth": "deep"})
    assert profiles.check("bob", loose) is loose
    with pytest.raises(InvalidArgument):
        profiles.check("ann", loose)


def test_the_installed_packs_can_be_read_at_any_revision(profiles: Profiles) -> None:
    profiles.install("ann", reef())
    profiles.install("ann", shipped_pack("language"))
    profiles.install("ann", reef("1.1.0"))
    at = {revision: profiles.installed("ann", revision) for revision in range(4)}
    assert at[0] == []
    assert [(i.pack.name, str(i.pack.version)) for i in at[1]] == [("reef-monitoring", "1.0.0")]
    assert [(i.pack.name, i.revision) for i in at[3]] == [("language", 2), ("reef-monitoring", 3)]
    with pytest.raises(NotFound):
        profiles.installed("ann", 4)


def test_an_install_commits_only_against_the_packs_it_planned_with(
    store: SqliteKnowledgeStore,
) -> None:
    pack = reef()
    arguments = {
        "name": pack.name,
        "version": "1.0.0",
        "digest": pack.digest,
        "content": pack.content,
        "made_by": "ann",
        "made_at": "2026-01-01T00:00:00.000000Z",
    }
    assert store.install_pack("ann", expected={"research": "0" * 64}, **arguments) is None
    assert store.latest_revision("ann") == 0 and store.pack_history("ann") == []
    assert store.owners() == []  # not even the knowledge-base row the install locked
    installed = store.install_pack("ann", expected={}, **arguments)
    assert installed is not None and installed.revision == 1
    assert store.install_pack("ann", expected={}, **arguments) is None


def test_an_install_plans_again_when_the_installed_packs_change_underneath(
    profiles: Profiles, store: SqliteKnowledgeStore
) -> None:
    real = store.install_pack
    raced: list[str] = []

    def racing_install(owner: str, **arguments: Any) -> PackInstall | None:
        if not raced:  # another process installs the same pack first
            raced.append("once")
            real(owner, **arguments)
        return real(owner, **arguments)

    store.install_pack = racing_install  # type: ignore[method-assign]
    result = profiles.install("ann", reef())
    assert raced and result.changed is False and result.preview.action == "none"
    assert store.latest_revision("ann") == 1


def _tamper(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def test_installed_packs_are_append_only(profiles: Profiles, store: SqliteKnowledgeStore) -> None:
    profiles.install("ann", reef())
    for statement in ("UPDATE packs SET version = '9.9.9'", "DELETE FROM packs"):
        with pytest.raises(sqlite3.Error, match="append-only"):
            _tamper(store.path, statement)


def test_a_damaged_installed_pack_is_an_integrity_error(
    store: SqliteKnowledgeStore, tmp_path: Path
) -> None:
    Profiles(store, clock=FakeClock()).install("ann", reef())
    _tamper(
        store.path,
        "DROP TRIGGER packs_are_append_only_update",
        "UPDATE packs SET content = replace(content, 'fringing', 'fringe')",
    )
    fresh = Profiles(store, clock=FakeClock())  # no cached copy
    with pytest.raises(IntegrityError):
        fresh.check("ann", record("site:a", {"site_name": "a"}))


def test_the_packs_migration_applies_to_an_existing_knowledge_base(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.db"
    SqliteKnowledgeStore(path).close()
    _tamper(path, "DROP TABLE packs", "DELETE FROM schema_migrations WHERE version = 2")
    reopened = SqliteKnowledgeStore(path)
    try:
        assert Profiles(reopened, clock=FakeClock()).install("ann", reef()).changed
    finally:
        reopened.close()


def test_owner_names_are_checked(profiles: Profiles) -> None:
    for owner in ("", "x" * 201, "ann\n"):
        with pytest.raises(InvalidArgument):
            profiles.installed(owner)


@dataclass(frozen=True)
class Colour(Codec):
    """An extension codec: a #rrggbb colour, canonical in lowercase."""

    name: ClassVar[str] = "colour"

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Colour:
        return cls()

    def canonical(self, value: Any, where: str) -> Any:
        if type(value) is not str or not re.fullmatch(r"#[0-9a-fA-F]{6}", value):
            raise reject(where, "colour.format", f"{value!r} is not a #rrggbb colour")
        return value.lower()


def test_an_installed_pack_needs_its_codecs_registered(store: SqliteKnowledgeStore) -> None:
    codecs = default_codecs()
    codecs.register(Colour)
    value = copy.deepcopy(REEF)
    site_fields(value)["marker"] = {"codec": "colour"}
    pack = parse_pack(seal(value, codecs=codecs), codecs=codecs)
    extended = Profiles(store, codecs=codecs, clock=FakeClock())
    extended.install("ann", pack)
    checked = extended.check("ann", record("site:a", {"site_name": "a", "marker": "#FFAA00"}))
    assert checked.fields["marker"] == "#ffaa00"
    error = refusal(
        lambda: extended.check("ann", record("site:a", {"site_name": "a", "marker": "red"}))
    )
    assert error.details["rule"] == "colour.format"
    # A process without the codec cannot read the pack: refused, not mistaken for damage.
    assert (
        refusal(lambda: Profiles(store, clock=FakeClock()).schema("ann")).details["rule"]
        == "codec.unknown"
    )


# -- the command line ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oh")
    common = argparse.ArgumentParser(add_help=False)
    for option in ("--data", "--memory-url", "--knowledge-url"):
        common.add_argument(option)
    register(parser.add_subparsers(dest="command", required=True), common)
    return parser


def oh(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    args = _parser().parse_args(argv)
    status = args.handler(args)
    return status, capsys.readouterr().out


def test_oh_profile_preview_shows_the_kinds_and_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out = oh(capsys, "profile", "preview", "research")
    assert status == 0
    assert "research 1.0.0" in out and "+ kind finding: statement*, effect_size" in out
    assert "verdict: can be installed" in out


def test_oh_profile_install_then_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = str(tmp_path)
    status, out = oh(capsys, "profile", "install", "finance", "--owner", "ann", "--data", data)
    assert (status, out.strip()) == (0, "installed finance 1.0.0 for ann at revision 1")
    status, out = oh(capsys, "profile", "install", "finance", "--owner", "ann", "--data", data)
    assert "nothing changed" in out
    status, out = oh(capsys, "profile", "list", "--owner", "ann", "--data", data, "--json")
    listed = json.loads(out)
    assert [p["name"] for p in listed["packs"]] == ["finance"] and listed["owner"] == "ann"
    status, out = oh(capsys, "profile", "preview", "finance", "--owner", "ann", "--data", data)
    assert status == 0 and "nothing would change" in out


def test_oh_profile_preview_exits_1_and_install_refuses_when_force_is_needed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = str(tmp_path)  # an existing data directory: the CLI does not start one here
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(seal({**REEF, "version": "2.0.0"})))
    new.write_text(json.dumps(seal(REEF)))
    assert oh(capsys, "profile", "install", str(old), "--owner", "ann", "--data", data)[0] == 0
    status, out = oh(capsys, "profile", "preview", str(new), "--owner", "ann", "--data", data)
    assert status == 1 and "needs --force: 2.0.0 is newer than 1.0.0" in out
    status, out = oh(
        capsys, "profile", "preview", str(new), "--owner", "ann", "--data", data, "--json"
    )
    assert json.loads(out)["action"] == "downgrade"
    with pytest.raises(AlreadyExists):
        oh(capsys, "profile", "install", str(new), "--owner", "ann", "--data", data)
    status, out = oh(
        capsys,
        "profile",
        "install",
        str(new),
        "--owner",
        "ann",
        "--data",
        data,
        "--force",
        "--json",
    )
    assert json.loads(out)["revision"] == 2


def test_oh_profile_preview_and_install_name_the_proposals_and_notes_left_unreviewable(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    host = open_host(Locations(tmp_path), clock=FakeClock())
    try:
        host.register_document("ann", "reef.pdf")
        notebook, _ = host.open_notebook("ann", "reef.pdf", "run-1")
        write(host._memory, notebook.id, 0, "r-1", add("lead:survey", "methods missing"))
        guess = host._review.propose(
            "ann", source=SOURCE, record={"name": "lead:guess", "text": "maybe revised"}
        )
    finally:
        for opened in (host._memory, host._knowledge, host._registry):
            opened.close()
    data = str(tmp_path)
    status, out = oh(capsys, "profile", "preview", "research", "--owner", "ann", "--data", data)
    assert status == 0 and "verdict: can be installed" in out
    assert "pending proposals that could no longer be accepted as proposed: 1" in out
    assert f"  {guess.id} lead:guess: lead:guess: reviewed records use the kinds" in out
    assert "current notes that could no longer be proposed for review: 1" in out
    assert f"  {notebook.id} lead:survey: lead:survey: reviewed records use the kinds" in out
    status, out = oh(
        capsys, "profile", "preview", "research", "--owner", "ann", "--data", data, "--json"
    )
    body = json.loads(out)
    assert [item["proposal_id"] for item in body["proposals_invalid"]] == [guess.id]
    assert [item["notebook"] for item in body["notes_invalid"]] == [notebook.id]
    status, out = oh(capsys, "profile", "install", "research", "--owner", "ann", "--data", data)
    assert status == 0 and out.startswith("installed research 1.0.0 for ann at revision 1\n")
    assert f"  {guess.id} lead:guess:" in out and f"  {notebook.id} lead:survey:" in out


def test_oh_profile_reports_a_damaged_pack_file_as_a_typed_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps({**seal(REEF), "description": "changed"}))
    with pytest.raises(OhError) as caught:
        oh(capsys, "profile", "preview", str(path))
    assert caught.value.code == "invalid_argument"
    assert caught.value.details["rule"] == "pack.digest"


# -- the docs --------------------------------------------------------------------------------------

EXAMPLES = re.findall(r"<!-- example: (\w+) -->\n```json\n(.*?)```", DOCS, re.S)
REFUSED = re.findall(
    r"<!-- refused: (\w+) -->\n```json\n(.*?)```\n\n```text\n(.*?)\n```", DOCS, re.S
)


def test_the_docs_have_examples_for_every_shipped_kind() -> None:
    shown = {(pack, json.loads(block)["name"].split(":")[0]) for pack, block in EXAMPLES}
    for name in SHIPPED_PACKS:
        missing = set(shipped_pack(name).kinds) - {kind for pack, kind in shown if pack == name}
        assert missing == set(), (name, missing)


@pytest.mark.parametrize(
    ("pack", "block"), EXAMPLES, ids=[json.loads(block)["name"] for _, block in EXAMPLES]
)
def test_every_example_record_in_the_docs_validates(pack: str, block: str) -> None:
    schema = Schema.of([shipped_pack(pack)])
    checked = schema.check(Record.parse(json.loads(block)), reviewed=True)
    assert schema.check(checked) == checked


def test_the_refused_example_in_the_docs_is_refused_with_the_documented_message() -> None:
    assert REFUSED
    for pack, block, message in REFUSED:
        refused = Record.parse(json.loads(block))
        schema = Schema.of([shipped_pack(pack)])
        assert refusal(lambda s=schema, r=refused: s.check(r)).message == message


def test_the_example_pack_in_the_docs_loads() -> None:
    (block,) = re.findall(r"<!-- pack -->\n```json\n(.*?)```", DOCS, re.S)
    pack = load_pack(block)
    assert pack.name == "reef-monitoring"
    assert "9ee722fd91f7" in DOCS and pack.digest.startswith("9ee722fd91f7")


def test_the_seal_command_in_the_docs_reseals_an_edited_pack(tmp_path: Path) -> None:
    (command,) = re.findall(r"```sh\n(\.venv/bin/python -c .*?)\n```", DOCS, re.S)
    path = tmp_path / "my-pack.json"
    path.write_text(json.dumps({**seal(REEF), "version": "1.0.1"}))
    # As in a checkout after the README's install: the project's Python is .venv/bin/python.
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    subprocess.run(["sh", "-c", command], cwd=tmp_path, check=True)
    assert str(read_pack(path).version) == "1.0.1"
    # Again, as an author does after the next edit.
    path.write_text(json.dumps({**json.loads(path.read_text()), "version": "1.0.2"}))
    subprocess.run(["sh", "-c", command], cwd=tmp_path, check=True)
    assert str(read_pack(path).version) == "1.0.2"


def test_the_extension_codec_example_in_the_docs_runs(store: SqliteKnowledgeStore) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", DOCS, re.S)
    namespace: dict[str, Any] = {"store": store}
    exec(compile(block, "docs/packs.md", "exec"), namespace)
    exec(compile(block, "docs/packs.md", "exec"), namespace)  # twice: nothing it does is kept
    codecs: Codecs = namespace["codecs"]
    assert "postcode" in codecs and isinstance(namespace["profiles"], Profiles)
    assert codecs.build({"codec": "postcode"}, "f").canonical("sw1a 1aa", "f") == "SW1A1AA"


def test_every_shipped_kind_and_field_is_documented() -> None:
    for name in SHIPPED_PACKS:
        section = DOCS.split(f"\n## {name.title()}\n", 1)[1].split("\n## ", 1)[0]
        for kind_name, kind in shipped_pack(name).kinds.items():
            assert f"#### `{kind_name}`" in section, (name, kind_name)
            table = section.split(f"#### `{kind_name}`", 1)[1].split("####", 1)[0]
            if name == "finance" and kind_name == "correction":
                table = DOCS.split("#### `correction`", 1)[1].split("###", 1)[0]
            for field_name, field in kind.fields.items():
                row = re.search(rf"^\| `{field_name}` \|.*$", table, re.M)
                assert row is not None, (name, kind_name, field_name)
                assert ("| yes |" in row.group()) is field.required, row.group()


def test_every_codec_is_documented() -> None:
    documented = set(re.findall(r"^\| `([a-z]+)` \|", DOCS.split("## Codecs", 1)[1], re.M))
    assert set(default_codecs().names()) <= documented


def test_every_profile_action_is_documented() -> None:
    profile = _parser()._subparsers._group_actions[0].choices["profile"]  # type: ignore[union-attr]
    actions = set(profile._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    cli_docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "\n## `oh profile`\n" in cli_docs
    documented = set(re.findall(r"^### `oh profile ([a-z]+)", cli_docs, re.M))
    assert documented == actions == {"preview", "install", "list"}
