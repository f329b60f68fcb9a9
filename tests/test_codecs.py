"""Value codecs (SPEC §8): one canonical JSON form per value, and a typed refusal naming the
field and the rule for everything that does not fit."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oh.core.canonical import MAX_SAFE_INTEGER, canonical_text, check_json
from oh.errors import InvalidArgument
from oh.profiles import codecs as codecs_module
from oh.profiles.codecs import CURRENCIES, Codec, Codecs, Params, default_codecs, reject

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CODECS = default_codecs()


def build(spec: dict[str, Any]) -> Codec:
    return CODECS.build(spec, "spec")


def canonical(spec: dict[str, Any], value: Any) -> Any:
    return build(spec).canonical(value, "fields.x")


# -- the registry --------------------------------------------------------------------------------

BUILTIN_NAMES = {
    "boolean",
    "currency",
    "date",
    "datetime",
    "decimal",
    "doi",
    "enum",
    "integer",
    "interval",
    "isbn",
    "isin",
    "language",
    "lei",
    "list",
    "money",
    "orcid",
    "percent",
    "quantity",
    "reference",
    "text",
    "ticker",
    "url",
}


def test_the_builtin_codecs_are_registered_like_an_extension() -> None:
    assert set(CODECS.names()) == BUILTIN_NAMES
    # Every built-in is a Codec subclass that went through Codecs.register.
    fresh = Codecs()
    for name in CODECS.names():
        codec_type = type(build(_SPECS[name]))
        assert issubclass(codec_type, Codec)
        fresh.register(codec_type)
    assert fresh.names() == CODECS.names()


@dataclass(frozen=True)
class Postcode(Codec):
    """A UK-style postcode, canonical in uppercase with one space: an extension codec."""

    name: ClassVar[str] = "postcode"

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Postcode:
        return cls()

    def canonical(self, value: Any, where: str) -> Any:
        if type(value) is not str:
            raise reject(where, "postcode.type", "a postcode is text")
        compact = value.replace(" ", "").upper()
        if not re.fullmatch(r"[A-Z]{1,2}[0-9][A-Z0-9]?[0-9][A-Z]{2}", compact):
            raise reject(where, "postcode.format", f"{value!r} is not a postcode")
        return compact[:-3] + " " + compact[-3:]


def test_an_extension_codec_registers_and_builds_like_a_builtin() -> None:
    codecs = default_codecs()
    codecs.register(Postcode)
    codec = codecs.build({"codec": "list", "of": {"codec": "postcode"}}, "spec")
    assert codec.canonical(["sw1a1aa", "EC1A 1BB"], "fields.x") == ["SW1A 1AA", "EC1A 1BB"]
    assert "postcode" not in CODECS  # registries are independent: the default is untouched


def test_a_codec_name_is_registered_once() -> None:
    codecs = default_codecs()
    with pytest.raises(InvalidArgument, match="already registered"):
        codecs.register(type(build({"codec": "text"})))


def test_an_unknown_codec_is_refused_with_rule_codec_unknown() -> None:
    with pytest.raises(InvalidArgument) as caught:
        build({"codec": "colour"})
    assert caught.value.details == {"field": "spec.codec", "rule": "codec.unknown"}


def test_a_codec_spec_must_be_an_object_rule_codec_spec() -> None:
    with pytest.raises(InvalidArgument) as caught:
        build("text")
    assert caught.value.details["rule"] == "codec.spec"


@pytest.mark.parametrize(
    "spec",
    [
        {"codec": "text", "colour": "red"},
        {"codec": "text", "max_length": 0},
        {"codec": "text", "min_length": 5, "max_length": 4},
        {"codec": "text", "single_line": "yes"},
        {"codec": "integer", "minimum": 1.5},
        {"codec": "integer", "minimum": 3, "maximum": 2},
        {"codec": "decimal", "minimum": "2", "maximum": "1"},
        {"codec": "decimal", "minimum": "one"},
        {"codec": "enum"},
        {"codec": "enum", "values": []},
        {"codec": "enum", "values": ["a", "a"]},
        {"codec": "enum", "values": [1]},
        {"codec": "list"},
        {"codec": "list", "of": {"codec": "text"}, "min_items": 3, "max_items": 2},
        {"codec": "interval", "of": {"codec": "text"}},
        {"codec": "reference", "kinds": ["Not A Kind"]},
        {"codec": "money", "currencies": ["EURO"]},
        {"codec": "url", "schemes": ["not a scheme"]},
        {"codec": "quantity", "units": [" m"]},
    ],
    ids=lambda spec: canonical_text(spec),
)
def test_codec_parameters_that_do_not_fit_are_refused_rule_codec_params(
    spec: dict[str, Any],
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        build(spec)
    assert caught.value.details["rule"] in ("codec.params", "decimal.format")
    assert caught.value.details["field"].startswith("spec.")


# -- canonical forms, one example per codec and spelling ---------------------------------------

CANONICAL = [
    ({"codec": "text"}, "Bleaching began in March.", "Bleaching began in March."),
    ({"codec": "text"}, "e\u0301", "e\u0301"),  # kept exactly: no Unicode normalization
    ({"codec": "integer"}, 42, 42),
    ({"codec": "integer"}, 2.0, 2),
    ({"codec": "integer"}, -(2**53 - 1), -(2**53 - 1)),
    ({"codec": "decimal"}, "+01.50", "1.5"),
    ({"codec": "decimal"}, "15e-1", "1.5"),
    ({"codec": "decimal"}, "-0.000", "0"),
    ({"codec": "decimal"}, "1.2E3", "1200"),
    ({"codec": "decimal"}, "0.000120", "0.00012"),
    ({"codec": "decimal"}, 7, "7"),
    ({"codec": "decimal"}, "0.1", "0.1"),
    ({"codec": "boolean"}, True, True),
    ({"codec": "date"}, "2016-03-29", "2016-03-29"),
    ({"codec": "date", "partial": True}, "2016", "2016"),
    ({"codec": "date", "partial": True}, "2016-03", "2016-03"),
    ({"codec": "datetime"}, "2024-03-01T10:00:00+02:00", "2024-03-01T08:00:00Z"),
    ({"codec": "datetime"}, "2024-03-01t01:00:00.500-00:30", "2024-03-01T01:30:00.5Z"),
    ({"codec": "datetime"}, "2024-03-01 00:30:00.000000000+01:00", "2024-02-29T23:30:00Z"),
    (
        {"codec": "url"},
        "HTTP://Example.COM:80/a/./b/../c/%7euser?q=%2f#Frag",
        "http://example.com/a/c/~user?q=%2F#Frag",
    ),
    ({"codec": "url"}, "https://example.org", "https://example.org/"),
    ({"codec": "url"}, "https://[2001:DB8::1]:8443/x", "https://[2001:db8::1]:8443/x"),
    ({"codec": "doi"}, "https://doi.org/10.1126/SCIENCE.AAN8048", "10.1126/science.aan8048"),
    ({"codec": "doi"}, "doi:10.1126/science.aan8048", "10.1126/science.aan8048"),
    ({"codec": "doi"}, "https://dx.doi.org/10.1000/a%2Fb", "10.1000/a/b"),
    ({"codec": "isbn"}, "ISBN 0-306-40615-2", "9780306406157"),
    ({"codec": "isbn"}, "978-0-306-40615-7", "9780306406157"),
    ({"codec": "isbn"}, "ISBN-10: 0-8044-2957-X", "9780804429573"),
    ({"codec": "orcid"}, "https://orcid.org/0000-0002-1825-0097", "0000-0002-1825-0097"),
    ({"codec": "orcid"}, "000000021694233x", "0000-0002-1694-233X"),
    ({"codec": "language"}, "ZH-hant-tw", "zh-Hant-TW"),
    ({"codec": "language"}, "EN-gb-OED", "en-GB-oed"),
    ({"codec": "language"}, "sr-latn-rs", "sr-Latn-RS"),
    ({"codec": "language"}, "de-CH-1996-x-Foo", "de-CH-1996-x-foo"),
    ({"codec": "language"}, "es-419", "es-419"),
    ({"codec": "language"}, "en-a-bb-x-cc", "en-a-bb-x-cc"),
    (
        {"codec": "money"},
        {"amount": "12.50", "currency": "eur"},
        {"amount": "12.5", "currency": "EUR"},
    ),
    ({"codec": "money"}, {"amount": 3, "currency": "JPY"}, {"amount": "3", "currency": "JPY"}),
    (
        {"codec": "quantity"},
        {"value": "1.50", "unit": "°C"},
        {"value": "1.5", "unit": "°C"},
    ),
    ({"codec": "percent"}, "12.5%", "12.5"),
    ({"codec": "percent"}, 95, "95"),
    (
        {"codec": "interval", "of": {"codec": "decimal"}},
        {"low": "0.20", "high": "6e-1"},
        {"low": "0.2", "high": "0.6"},
    ),
    (
        {"codec": "interval", "of": {"codec": "date", "partial": True}},
        {"low": "2016", "high": "2016-12-31"},
        {"low": "2016", "high": "2016-12-31"},
    ),
    (
        {"codec": "interval", "of": {"codec": "datetime"}},
        {"low": "2024-01-01T00:00:00.5Z", "high": "2024-01-01T00:00:01Z"},
        {"low": "2024-01-01T00:00:00.5Z", "high": "2024-01-01T00:00:01Z"},
    ),
    ({"codec": "enum", "values": ["a", "b"]}, "b", "b"),
    ({"codec": "reference", "kinds": ["sample"]}, "sample:reef-2016", "sample:reef-2016"),
    (
        {"codec": "list", "of": {"codec": "doi"}},
        ["doi:10.1000/X", "10.1000/y"],
        ["10.1000/x", "10.1000/y"],
    ),
    ({"codec": "isin"}, "us0378331005", "US0378331005"),
    ({"codec": "lei"}, "hwupkr0mpou8fgxbt394", "HWUPKR0MPOU8FGXBT394"),
    ({"codec": "ticker"}, "brk.b", "BRK.B"),
    ({"codec": "currency"}, "chf", "CHF"),
]


@pytest.mark.parametrize(
    ("spec", "value", "expected"),
    CANONICAL,
    ids=[f"{spec['codec']}:{value!r:.40}" for spec, value, _ in CANONICAL],
)
def test_each_value_has_one_canonical_form(spec: dict[str, Any], value: Any, expected: Any) -> None:
    result = canonical(spec, value)
    assert result == expected and type(result) is type(expected)
    assert canonical(spec, result) == result


# -- refusals: one per rule ----------------------------------------------------------------------

REFUSALS: list[tuple[str, dict[str, Any], Any]] = [
    ("text.type", {"codec": "text"}, 12),
    ("text.encoding", {"codec": "text"}, "\ud800"),
    ("text.min_length", {"codec": "text"}, ""),
    ("text.max_length", {"codec": "text", "max_length": 5}, "coral reef"),
    ("text.single_line", {"codec": "text", "single_line": True}, "two\nlines"),
    ("integer.type", {"codec": "integer"}, "12"),
    ("integer.range", {"codec": "integer"}, 2**53),
    ("integer.minimum", {"codec": "integer", "minimum": 1}, 0),
    ("integer.maximum", {"codec": "integer", "maximum": 10}, 11),
    ("boolean.type", {"codec": "boolean"}, "true"),
    ("enum.type", {"codec": "enum", "values": ["a"]}, None),
    ("enum.value", {"codec": "enum", "values": ["preprint", "version_of_record"]}, "draft"),
    ("decimal.type", {"codec": "decimal"}, [1]),
    ("decimal.string", {"codec": "decimal"}, 0.1),
    ("decimal.format", {"codec": "decimal"}, "1,5"),
    ("decimal.size", {"codec": "decimal"}, "1e41"),
    ("decimal.minimum", {"codec": "decimal", "minimum": "0"}, "-0.5"),
    ("decimal.maximum", {"codec": "decimal", "maximum": "1"}, "1.01"),
    ("percent.type", {"codec": "percent"}, None),
    ("percent.string", {"codec": "percent"}, 12.5),
    ("percent.format", {"codec": "percent"}, "12.5 %"),
    ("percent.size", {"codec": "percent"}, "1e-41"),
    ("percent.minimum", {"codec": "percent", "minimum": "0"}, "-1"),
    ("percent.maximum", {"codec": "percent", "maximum": "100"}, "100.5%"),
    ("date.type", {"codec": "date"}, 20160329),
    ("date.format", {"codec": "date"}, "29/03/2016"),
    ("date.partial", {"codec": "date"}, "2016-03"),
    ("date.calendar", {"codec": "date"}, "2015-02-29"),
    ("datetime.type", {"codec": "datetime"}, 1709280000),
    ("datetime.format", {"codec": "datetime"}, "2024-03-01T10:00:00"),
    ("datetime.leap_second", {"codec": "datetime"}, "2016-12-31T23:59:60Z"),
    ("datetime.calendar", {"codec": "datetime"}, "2024-02-30T10:00:00Z"),
    ("datetime.offset", {"codec": "datetime"}, "2024-03-01T10:00:00+24:00"),
    ("datetime.range", {"codec": "datetime"}, "9999-12-31T23:30:00-01:00"),
    ("url.type", {"codec": "url"}, {"href": "https://example.org"}),
    ("url.length", {"codec": "url"}, "https://example.org/" + "a" * 2048),
    ("url.characters", {"codec": "url"}, "https://example.org/reef survey"),
    ("url.format", {"codec": "url"}, "mailto:someone@example.org"),
    ("url.scheme", {"codec": "url"}, "ftp://example.org/data.csv"),
    ("url.userinfo", {"codec": "url"}, "https://ann:secret@example.org/"),
    ("url.host", {"codec": "url"}, "https://exa_mple.org/"),
    ("url.port", {"codec": "url"}, "https://example.org:70000/"),
    ("doi.type", {"codec": "doi"}, 10.1126),
    ("doi.format", {"codec": "doi"}, "10.11/short-registrant"),
    ("isbn.type", {"codec": "isbn"}, 9780306406157),
    ("isbn.format", {"codec": "isbn"}, "978-0-306-40615"),
    ("isbn.checksum", {"codec": "isbn"}, "978-0-306-40615-8"),
    ("orcid.type", {"codec": "orcid"}, None),
    ("orcid.format", {"codec": "orcid"}, "0000-0002-1825"),
    ("orcid.checksum", {"codec": "orcid"}, "0000-0002-1825-0098"),
    ("isin.type", {"codec": "isin"}, False),
    ("isin.format", {"codec": "isin"}, "US037833100"),
    ("isin.checksum", {"codec": "isin"}, "US0378331006"),
    ("lei.type", {"codec": "lei"}, 1),
    ("lei.format", {"codec": "lei"}, "HWUPKR0MPOU8FGXBT3"),
    ("lei.checksum", {"codec": "lei"}, "HWUPKR0MPOU8FGXBT395"),
    ("ticker.type", {"codec": "ticker"}, ["AAPL"]),
    ("ticker.format", {"codec": "ticker"}, "AAPL US"),
    ("language.type", {"codec": "language"}, None),
    ("language.format", {"codec": "language"}, "en_US"),
    ("currency.type", {"codec": "currency"}, 978),
    ("currency.code", {"codec": "currency"}, "EURO"),
    ("currency.allowed", {"codec": "currency", "currencies": ["EUR"]}, "USD"),
    ("money.type", {"codec": "money"}, None),
    ("money.shape", {"codec": "money"}, {"amount": "1", "currency": "EUR", "note": "x"}),
    ("quantity.type", {"codec": "quantity"}, None),
    ("quantity.shape", {"codec": "quantity"}, {"value": "1"}),
    ("quantity.unit", {"codec": "quantity"}, {"value": "1", "unit": " m"}),
    ("quantity.allowed", {"codec": "quantity", "units": ["m"]}, {"value": "1", "unit": "ft"}),
    ("interval.type", {"codec": "interval", "of": {"codec": "integer"}}, None),
    ("interval.shape", {"codec": "interval", "of": {"codec": "integer"}}, [1, 2]),
    ("interval.order", {"codec": "interval", "of": {"codec": "decimal"}}, {"low": 2, "high": 1}),
    (
        "interval.dimension",
        {"codec": "interval", "of": {"codec": "money"}},
        {"low": {"amount": 1, "currency": "EUR"}, "high": {"amount": 2, "currency": "USD"}},
    ),
    ("reference.type", {"codec": "reference"}, 7),
    ("reference.format", {"codec": "reference"}, "Finding: Bleaching"),
    ("reference.kind", {"codec": "reference", "kinds": ["sample"]}, "study:reef-2016"),
    ("list.type", {"codec": "list", "of": {"codec": "text"}}, "one"),
    ("list.min_items", {"codec": "list", "of": {"codec": "text"}, "min_items": 1}, []),
    ("list.max_items", {"codec": "list", "of": {"codec": "text"}, "max_items": 1}, ["a", "b"]),
    (
        "list.unique",
        {"codec": "list", "of": {"codec": "isbn"}, "unique": True},
        ["0-306-40615-2", "9780306406157"],
    ),
]


@pytest.mark.parametrize(("rule", "spec", "value"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_value_that_does_not_fit_is_refused_naming_the_field_and_the_rule(
    rule: str, spec: dict[str, Any], value: Any
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        canonical(spec, value)
    error = caught.value
    assert error.code == "invalid_argument"
    assert error.details["rule"] == rule
    assert error.details["field"].startswith("fields.x")
    assert error.message.startswith(error.details["field"] + ": ")
    assert f"(rule {rule})" in error.message


NOTATIONS = {"date", "datetime", "url", "doi", "isbn", "orcid", "isin", "lei", "ticker"}
NOTATIONS |= {"language", "reference"}

# The rules built at run time from a codec's name by the code codecs share, and the codecs
# each one serves: a null or a JSON type that does not fit, the objects' shape, the decimal
# rules (percent shares them under its own name), the bounds of the bounded numbers, and the
# notations' malformed strings and failed check digits.
SHARED_RULES = {
    "type": BUILTIN_NAMES,
    "shape": {"money", "quantity", "interval"},
    "string": {"decimal", "percent"},
    "format": {"decimal", "percent"} | NOTATIONS,
    "size": {"decimal", "percent"},
    "minimum": {"integer", "decimal", "percent"},
    "maximum": {"integer", "decimal", "percent"},
    "checksum": {"isbn", "orcid", "isin", "lei"},
}


def _rules_in_source() -> set[str]:
    """Every value rule the codecs module can raise: the literal rule names, and the rules of
    ``SHARED_RULES``, the only ones built at run time (``f"{codec}.…"``, ``f"{self.name}.…"``)."""
    source = inspect.getsource(codecs_module)
    literal = set(re.findall(r'"([a-z]+\.[a-z_]+)"', source))
    literal -= {"codec.params", "codec.spec", "codec.unknown"}  # rules of specs, not values
    dynamic = set(re.findall(r'f"\{(?:codec|self\.name)\}\.([a-z_]+)"', source))
    assert dynamic == set(SHARED_RULES), dynamic
    shared = {f"{codec}.{rule}" for rule, codecs in SHARED_RULES.items() for codec in codecs}
    return literal | shared


def test_every_codec_rule_has_a_refusal_test() -> None:
    assert _rules_in_source() == {rule for rule, _, _ in REFUSALS}


# -- the wording of refusals that codecs share -------------------------------------------------

# One case for each codec a shared refusal serves, so that a change to the shared code cannot
# change what one codec says unnoticed.
WORDING: list[tuple[dict[str, Any], Any, str]] = [
    (
        {"codec": "integer", "minimum": 1},
        0,
        "fields.x: 0 is below the minimum 1 (rule integer.minimum)",
    ),
    (
        {"codec": "integer", "maximum": 10},
        11.0,
        "fields.x: 11 is above the maximum 10 (rule integer.maximum)",
    ),
    (
        {"codec": "decimal", "minimum": "0"},
        "-0.50",
        "fields.x: -0.5 is below the minimum 0 (rule decimal.minimum)",
    ),
    (
        {"codec": "decimal", "maximum": "1e3"},
        1001,
        "fields.x: 1001 is above the maximum 1000 (rule decimal.maximum)",
    ),
    (
        {"codec": "percent", "minimum": "0"},
        "-1%",
        "fields.x: -1 is below the minimum 0 (rule percent.minimum)",
    ),
    (
        {"codec": "percent", "maximum": "100"},
        "100.5%",
        "fields.x: 100.5 is above the maximum 100 (rule percent.maximum)",
    ),
    (
        {"codec": "interval", "of": {"codec": "integer", "minimum": 0}},
        {"low": -1, "high": 1},
        "fields.x.low: -1 is below the minimum 0 (rule integer.minimum)",
    ),
    (
        {"codec": "percent"},
        12.5,
        (
            'fields.x: 12.5 is a binary float; write exact decimals as strings, e.g. "0.25", so '
            "that no rounding can change them (rule percent.string)"
        ),
    ),
    (
        {"codec": "percent"},
        "12.5 %",
        (
            'fields.x: \'12.5 \' is not a decimal number such as "-12.50" or "1.2e3" (rule '
            "percent.format)"
        ),
    ),
    (
        {"codec": "date"},
        None,
        "fields.x: null is not a date value; omit the field instead (rule date.type)",
    ),
    ({"codec": "date"}, 20160329, "fields.x: 20160329 is not a date (rule date.type)"),
    (
        {"codec": "date"},
        "29/03/2016",
        "fields.x: '29/03/2016' is not a date (YYYY-MM-DD) (rule date.format)",
    ),
    (
        {"codec": "date", "partial": True},
        "2016-3",
        "fields.x: '2016-3' is not a date (YYYY, YYYY-MM or YYYY-MM-DD) (rule date.format)",
    ),
    (
        {"codec": "datetime"},
        1709280000,
        "fields.x: 1709280000 is not a date-time (rule datetime.type)",
    ),
    (
        {"codec": "datetime"},
        "2024-03-01T10:00:00",
        (
            "fields.x: '2024-03-01T10:00:00' is not an RFC 3339 date-time with an offset (e.g. "
            "2024-03-01T10:00:00Z) (rule datetime.format)"
        ),
    ),
    (
        {"codec": "url"},
        {"href": "https://example.org"},
        "fields.x: {'href': 'https://example.org'} is not a URL (rule url.type)",
    ),
    (
        {"codec": "url"},
        "mailto:someone@example.org",
        (
            "fields.x: 'mailto:someone@example.org' is not an absolute URL (scheme://host/...) "
            "(rule url.format)"
        ),
    ),
    (
        {"codec": "url"},
        "ftp://example.org/data.csv",
        "fields.x: the scheme ftp is not allowed here (http, https) (rule url.scheme)",
    ),
    ({"codec": "doi"}, 10.1126, "fields.x: 10.1126 is not a DOI (rule doi.type)"),
    (
        {"codec": "doi"},
        "10.11/short-registrant",
        (
            "fields.x: '10.11/short-registrant' is not a DOI (10.<registrant>/<suffix>, e.g. "
            "10.1038/nature21707) (rule doi.format)"
        ),
    ),
    (
        {"codec": "doi"},
        "https://doi.org/10.1000/%ff",
        "fields.x: the DOI URL is not valid UTF-8 (rule doi.format)",
    ),
    ({"codec": "isbn"}, 9780306406157, "fields.x: 9780306406157 is not an ISBN (rule isbn.type)"),
    (
        {"codec": "isbn"},
        "978-0-306-40615",
        "fields.x: '978-0-306-40615' is not an ISBN-10 or ISBN-13 (rule isbn.format)",
    ),
    (
        {"codec": "isbn"},
        "0-306-40615-3",
        "fields.x: '0-306-40615-3' fails the ISBN-10 check digit (rule isbn.checksum)",
    ),
    (
        {"codec": "isbn"},
        "978-0-306-40615-8",
        "fields.x: '978-0-306-40615-8' fails the ISBN-13 check digit (rule isbn.checksum)",
    ),
    (
        {"codec": "orcid"},
        None,
        "fields.x: null is not a orcid value; omit the field instead (rule orcid.type)",
    ),
    (
        {"codec": "orcid"},
        "0000-0002-1825",
        "fields.x: '0000-0002-1825' is not an ORCID iD (0000-0002-1825-0097) (rule orcid.format)",
    ),
    (
        {"codec": "orcid"},
        "0000-0002-1825-0098",
        "fields.x: '0000-0002-1825-0098' fails the ORCID check character (rule orcid.checksum)",
    ),
    ({"codec": "isin"}, False, "fields.x: False is not an ISIN (rule isin.type)"),
    (
        {"codec": "isin"},
        "US037833100",
        "fields.x: 'US037833100' is not an ISIN (US0378331005) (rule isin.format)",
    ),
    (
        {"codec": "isin"},
        "us0378331006",
        "fields.x: 'us0378331006' fails the ISIN check digit (rule isin.checksum)",
    ),
    ({"codec": "lei"}, 1, "fields.x: 1 is not an LEI (rule lei.type)"),
    (
        {"codec": "lei"},
        "HWUPKR0MPOU8FGXBT3",
        "fields.x: 'HWUPKR0MPOU8FGXBT3' is not an LEI (20 letters and digits) (rule lei.format)",
    ),
    (
        {"codec": "lei"},
        "HWUPKR0MPOU8FGXBT395",
        "fields.x: 'HWUPKR0MPOU8FGXBT395' fails the LEI check digits (rule lei.checksum)",
    ),
    ({"codec": "ticker"}, ["AAPL"], "fields.x: ['AAPL'] is not a ticker (rule ticker.type)"),
    (
        {"codec": "ticker"},
        "AAPL US",
        "fields.x: 'AAPL US' is not a ticker symbol (rule ticker.format)",
    ),
    (
        {"codec": "ticker"},
        "AAAAAAAAAAAAAAAAA",
        "fields.x: 'AAAAAAAAAAAAAAAAA' is not a ticker symbol (rule ticker.format)",
    ),
    (
        {"codec": "language"},
        None,
        "fields.x: null is not a language value; omit the field instead (rule language.type)",
    ),
    (
        {"codec": "language"},
        "en_US",
        (
            "fields.x: 'en_US' is not a well-formed BCP 47 language tag (e.g. en, pt-BR) (rule "
            "language.format)"
        ),
    ),
    ({"codec": "reference"}, 7, "fields.x: 7 is not a record name (rule reference.type)"),
    (
        {"codec": "reference"},
        "Finding: Bleaching",
        (
            "fields.x: 'Finding: Bleaching' is not a record name (<kind>:<slug>) (rule "
            "reference.format)"
        ),
    ),
    (
        {"codec": "currency"},
        978,
        "fields.x: 978 is not an ISO 4217 currency code (rule currency.type)",
    ),
    (
        {"codec": "currency"},
        "EURO",
        "fields.x: 'EURO' is not an ISO 4217 currency code (rule currency.code)",
    ),
    (
        {"codec": "currency", "currencies": ["EUR", "chf"]},
        "usd",
        "fields.x: USD is not allowed here (EUR, CHF) (rule currency.allowed)",
    ),
    (
        {"codec": "money", "currencies": ["EUR"]},
        {"amount": "1", "currency": "USD"},
        "fields.x.currency: USD is not allowed here (EUR) (rule currency.allowed)",
    ),
    (
        {"codec": "money"},
        {"amount": "1", "currency": "EURO"},
        "fields.x.currency: 'EURO' is not an ISO 4217 currency code (rule currency.code)",
    ),
    (
        {"codec": "quantity", "units": ["m", "km"]},
        {"value": "1", "unit": "ft"},
        "fields.x.unit: 'ft' is not allowed here (m, km) (rule quantity.allowed)",
    ),
]


@pytest.mark.parametrize(
    ("spec", "value", "message"),
    WORDING,
    ids=[f"{spec['codec']}:{value!r:.40}" for spec, value, _ in WORDING],
)
def test_a_shared_refusal_says_the_same_for_every_codec_it_serves(
    spec: dict[str, Any], value: Any, message: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        canonical(spec, value)
    assert caught.value.message == message


PARAMETER_WORDING: list[tuple[dict[str, Any], str]] = [
    (
        {"codec": "integer", "minimum": 3, "maximum": 2},
        "spec.minimum: must not exceed maximum (rule codec.params)",
    ),
    (
        {"codec": "integer", "maximum": 1.5},
        "spec.maximum: must be an integer within ±(2^53-1) (rule codec.params)",
    ),
    (
        {"codec": "decimal", "minimum": "2", "maximum": "1.5"},
        "spec.minimum: must not exceed maximum (rule codec.params)",
    ),
    (
        {"codec": "decimal", "minimum": "one"},
        (
            'spec.minimum: \'one\' is not a decimal number such as "-12.50" or "1.2e3" (rule '
            "decimal.format)"
        ),
    ),
    (
        {"codec": "percent", "minimum": "100", "maximum": "0"},
        "spec.minimum: must not exceed maximum (rule codec.params)",
    ),
    (
        {"codec": "text", "min_length": 5, "max_length": 4},
        "spec.min_length: must not exceed max_length (rule codec.params)",
    ),
    (
        {"codec": "text", "max_length": 0},
        "spec.max_length: must be an integer of at least 1 (rule codec.params)",
    ),
    (
        {"codec": "list", "of": {"codec": "text"}, "min_items": 3, "max_items": 2},
        "spec.min_items: must not exceed max_items (rule codec.params)",
    ),
    (
        {"codec": "currency", "currencies": ["EURO"]},
        "spec.currencies: 'EURO' is not an acceptable entry (rule codec.params)",
    ),
    (
        {"codec": "money", "currencies": ["EUR", "eur"]},
        "spec.currencies: lists an entry twice (rule codec.params)",
    ),
]


@pytest.mark.parametrize(
    ("spec", "message"), PARAMETER_WORDING, ids=[canonical_text(s) for s, _ in PARAMETER_WORDING]
)
def test_a_shared_parameter_refusal_says_the_same_for_every_codec_it_serves(
    spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        build(spec)
    assert caught.value.message == message


# -- compatible changes (used by pack previews) --------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "widens"),
    [
        ({"codec": "text", "max_length": 100}, {"codec": "text", "max_length": 200}, True),
        ({"codec": "text", "max_length": 200}, {"codec": "text", "max_length": 100}, False),
        ({"codec": "text"}, {"codec": "text", "single_line": True}, False),
        ({"codec": "enum", "values": ["a"]}, {"codec": "enum", "values": ["a", "b"]}, True),
        ({"codec": "enum", "values": ["a", "b"]}, {"codec": "enum", "values": ["a"]}, False),
        ({"codec": "integer", "minimum": 1}, {"codec": "integer"}, True),
        ({"codec": "integer"}, {"codec": "integer", "maximum": 9}, False),
        ({"codec": "decimal", "maximum": "1"}, {"codec": "decimal", "maximum": "2"}, True),
        ({"codec": "date"}, {"codec": "date", "partial": True}, True),
        ({"codec": "date", "partial": True}, {"codec": "date"}, False),
        ({"codec": "reference", "kinds": ["a"]}, {"codec": "reference"}, True),
        ({"codec": "reference"}, {"codec": "reference", "kinds": ["a"]}, False),
        ({"codec": "money", "currencies": ["EUR"]}, {"codec": "money"}, True),
        ({"codec": "url"}, {"codec": "url", "schemes": ["https"]}, False),
        (
            {"codec": "list", "of": {"codec": "text", "max_length": 9}, "max_items": 3},
            {"codec": "list", "of": {"codec": "text", "max_length": 99}, "max_items": 9},
            True,
        ),
        (
            {"codec": "interval", "of": {"codec": "decimal"}},
            {"codec": "interval", "of": {"codec": "decimal", "minimum": "0"}},
            False,
        ),
        ({"codec": "text"}, {"codec": "enum", "values": ["a"]}, False),
        # Codecs that share a base still widen only their own kind.
        ({"codec": "decimal"}, {"codec": "percent"}, False),
        ({"codec": "percent"}, {"codec": "decimal"}, False),
        ({"codec": "integer"}, {"codec": "decimal"}, False),
        ({"codec": "currency"}, {"codec": "money"}, False),
        ({"codec": "money"}, {"codec": "currency"}, False),
        ({"codec": "isin"}, {"codec": "lei"}, False),
        ({"codec": "percent", "maximum": "100"}, {"codec": "percent", "minimum": "-1"}, False),
        ({"codec": "percent", "minimum": "0"}, {"codec": "percent", "minimum": "-1"}, True),
        ({"codec": "text", "min_length": 2}, {"codec": "text", "min_length": 3}, False),
        (
            {"codec": "list", "of": {"codec": "doi"}},
            {"codec": "list", "of": {"codec": "doi"}, "min_items": 1},
            False,
        ),
        ({"codec": "doi"}, {"codec": "doi"}, True),
    ],
    ids=lambda value: canonical_text(value) if isinstance(value, dict) else str(value),
)
def test_a_codec_widens_another_only_if_it_accepts_all_its_values(
    old: dict[str, Any], new: dict[str, Any], widens: bool
) -> None:
    assert build(new).widens(build(old)) is widens


# -- properties ----------------------------------------------------------------------------------

_SPECS: dict[str, dict[str, Any]] = {
    "text": {"codec": "text", "max_length": 40},
    "integer": {"codec": "integer"},
    "decimal": {"codec": "decimal"},
    "percent": {"codec": "percent"},
    "boolean": {"codec": "boolean"},
    "date": {"codec": "date", "partial": True},
    "datetime": {"codec": "datetime"},
    "url": {"codec": "url"},
    "doi": {"codec": "doi"},
    "isbn": {"codec": "isbn"},
    "orcid": {"codec": "orcid"},
    "language": {"codec": "language"},
    "money": {"codec": "money"},
    "quantity": {"codec": "quantity"},
    "interval": {"codec": "interval", "of": {"codec": "decimal"}},
    "enum": {"codec": "enum", "values": ["erratum", "retraction", "other"]},
    "reference": {"codec": "reference", "kinds": ["sample", "study"]},
    "list": {"codec": "list", "of": {"codec": "doi"}, "max_items": 4},
    "isin": {"codec": "isin"},
    "lei": {"codec": "lei"},
    "ticker": {"codec": "ticker"},
    "currency": {"codec": "currency"},
}


def _random_case(draw: st.DrawFn, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(c.swapcase() if flip else c for c, flip in zip(text, flips, strict=True))


@st.composite
def decimal_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    """Two spellings of one exact decimal: scientific, and plain with padding zeros."""
    coefficient = draw(st.integers(0, 10**18))
    exponent = draw(st.integers(-18, 18))
    sign = draw(st.sampled_from(["", "+", "-"]))
    scientific = f"{sign}{coefficient}e{exponent}"
    plain = format(Decimal(coefficient).scaleb(exponent), "f")
    if "." in plain:
        plain += "0" * draw(st.integers(0, 3))
    padded = sign + "0" * draw(st.integers(0, 3)) + plain
    if exponent >= 0 and coefficient * 10**exponent <= MAX_SAFE_INTEGER and draw(st.booleans()):
        value = coefficient * 10**exponent
        return scientific, -value if sign == "-" else value
    return scientific, padded


@st.composite
def datetime_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """One instant written in UTC and at some offset."""
    instant = draw(st.datetimes(datetime(2, 1, 1), datetime(9998, 12, 31))).replace(microsecond=0)
    fraction = draw(st.text("0123456789", max_size=9))
    minutes = draw(st.integers(-(23 * 60 + 59), 23 * 60 + 59))
    local = instant + timedelta(minutes=minutes)
    sign = "-" if minutes < 0 else "+"
    offset = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    dot = "." + fraction if fraction else ""
    separator = draw(st.sampled_from("Tt "))
    utc = instant.isoformat(timespec="seconds")
    zulu = draw(st.sampled_from("Zz"))
    at_offset = local.isoformat(sep=separator, timespec="seconds") + dot + offset
    return utc + dot + zulu, at_offset


_UNRESERVED_TEXT = st.text("abcXYZ019-._~", min_size=1, max_size=6)


@st.composite
def url_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """One URL, and a spelling of it that differs only in what RFC 3986 says is equivalent."""
    scheme = draw(st.sampled_from(["http", "https"]))
    labels = draw(
        st.lists(
            st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True),
            min_size=1,
            max_size=3,
        )
    )
    host = ".".join(labels)
    port = draw(st.sampled_from(["", ":8080"]))
    segments = draw(st.lists(_UNRESERVED_TEXT.filter(lambda s: s not in (".", "..")), max_size=3))
    query = draw(st.none() | st.text("abc=&", max_size=6))
    fragment = draw(st.none() | _UNRESERVED_TEXT)
    path = "/" + "/".join(segments)
    tail = ("" if query is None else "?" + query) + ("" if fragment is None else "#" + fragment)
    plain = f"{scheme}://{host}{port}{path}{tail}"

    default = {"http": ":80", "https": ":443"}[scheme]
    encoded = "".join(f"%{ord(c):02x}" if draw(st.booleans()) else c for c in path).replace(
        "%2f", "/"
    )
    other = (
        f"{_random_case(draw, scheme)}://{_random_case(draw, host)}"
        f"{port or draw(st.sampled_from(['', default]))}"
        f"{draw(st.sampled_from(['', '/.', '/x/..']))}{encoded}{tail}"
    )
    return plain, other


@st.composite
def doi_pairs(draw: st.DrawFn) -> tuple[str, str]:
    registrant = draw(st.from_regex(r"[0-9]{4,9}", fullmatch=True))
    suffix = draw(st.text("abcdefXYZ0123456789-._;()/:", min_size=1, max_size=20))
    doi = f"10.{registrant}/{suffix}"
    prefix = draw(st.sampled_from(["", "doi:", "DOI:", "https://doi.org/", "http://dx.doi.org/"]))
    return doi, prefix + _random_case(draw, doi)


def _isbn10_check(body: str) -> str:
    total = sum((10 - i) * int(c) for i, c in enumerate(body))
    check = (11 - total % 11) % 11
    return "X" if check == 10 else str(check)


def _isbn13_check(body: str) -> str:
    total = sum((3 if i % 2 else 1) * int(c) for i, c in enumerate(body))
    return str((10 - total % 10) % 10)


@st.composite
def isbn_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """An ISBN-10 and the ISBN-13 of the same book, hyphenated or not."""
    body = draw(st.from_regex(r"[0-9]{9}", fullmatch=True))
    isbn10 = body + _isbn10_check(body)
    isbn13 = "978" + body + _isbn13_check("978" + body)
    hyphenated = f"{isbn13[:3]}-{isbn13[3]}-{isbn13[4:8]}-{isbn13[8:12]}-{isbn13[12]}"
    ten = draw(st.sampled_from([isbn10, isbn10.lower(), "ISBN " + isbn10, f"ISBN-10: {isbn10}"]))
    return ten, draw(st.sampled_from([isbn13, hyphenated]))


@st.composite
def orcid_pairs(draw: st.DrawFn) -> tuple[str, str]:
    digits = draw(st.from_regex(r"[0-9]{15}", fullmatch=True))
    total = 0
    for char in digits:
        total = (total + int(char)) * 2
    check = (12 - total % 11) % 11
    full = digits + ("X" if check == 10 else str(check))
    hyphenated = "-".join(full[i : i + 4] for i in range(0, 16, 4))
    other = draw(st.sampled_from([full.lower(), "https://orcid.org/" + hyphenated, full]))
    return hyphenated, other


_LANGUAGE_TAGS = st.builds(
    lambda language, script, region, variants, private: "-".join(
        part for part in [language, script, region, *variants, private] if part
    ),
    st.from_regex(r"[a-z]{2,3}", fullmatch=True),
    st.sampled_from(["", "latn", "hant", "cyrl"]),
    st.sampled_from(["", "us", "br", "419", "tw"]),
    st.lists(st.sampled_from(["1996", "valencia", "fonipa"]), max_size=2, unique=True),
    st.sampled_from(["", "x-private", "u-co-phonebk"]),
)


@st.composite
def language_pairs(draw: st.DrawFn) -> tuple[str, str]:
    tag = draw(_LANGUAGE_TAGS)
    return _random_case(draw, tag), _random_case(draw, tag)


def _luhn_isin(body: str) -> str:
    digits = "".join(str(int(c, 36)) for c in body)
    for check in "0123456789":
        total = 0
        for index, char in enumerate(reversed(digits + check)):
            number = int(char) * (2 if index % 2 else 1)
            total += number - 9 if number > 9 else number
        if total % 10 == 0:
            return check
    raise AssertionError(body)  # pragma: no cover


@st.composite
def isin_pairs(draw: st.DrawFn) -> tuple[str, str]:
    body = draw(st.from_regex(r"[A-Z]{2}[A-Z0-9]{9}", fullmatch=True))
    isin = body + _luhn_isin(body)
    return isin, _random_case(draw, isin)


@st.composite
def lei_pairs(draw: st.DrawFn) -> tuple[str, str]:
    body = draw(st.from_regex(r"[A-Z0-9]{18}", fullmatch=True))
    number = int("".join(str(int(c, 36)) for c in body) + "00")
    lei = body + f"{98 - number % 97:02d}"
    return lei, _random_case(draw, lei)


def _same(values: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, Any]]:
    return values.map(lambda value: (value, value))


def _cased(values: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str]]:
    @st.composite
    def pairs(draw: st.DrawFn) -> tuple[str, str]:
        value = draw(values)
        return value, _random_case(draw, value)

    return pairs()


@st.composite
def money_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    first, second = draw(decimal_pairs())
    code = draw(st.sampled_from(sorted(CURRENCIES)))
    return (
        {"amount": first, "currency": code},
        {"amount": second, "currency": _random_case(draw, code)},
    )


@st.composite
def quantity_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    first, second = draw(decimal_pairs())
    unit = draw(st.sampled_from(["m", "km", "°C", "mg/L", "ind/m²", "%"]))
    return {"value": first, "unit": unit}, {"value": second, "unit": unit}


@st.composite
def interval_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    low_a, low_b = draw(decimal_pairs())
    high_a, high_b = draw(decimal_pairs())
    if Decimal(str(low_a)) > Decimal(str(high_a)):
        (low_a, low_b), (high_a, high_b) = (high_a, high_b), (low_a, low_b)
    return {"low": low_a, "high": high_a}, {"low": low_b, "high": high_b}


@st.composite
def percent_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    first, second = draw(decimal_pairs())
    return first, (second + "%" if isinstance(second, str) else second)


@st.composite
def list_pairs(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    pairs = draw(st.lists(doi_pairs(), max_size=4))
    return [a for a, _ in pairs], [b for _, b in pairs]


@st.composite
def date_values(draw: st.DrawFn) -> str:
    day = draw(st.dates()).isoformat()
    return day[: draw(st.sampled_from([4, 7, 10]))]


@st.composite
def integer_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    value = draw(st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER))
    return value, float(value) if abs(value) < 2**53 else value


# Each codec: pairs of inputs that are the same value spelled differently (or twice the same).
EQUIVALENT: dict[str, st.SearchStrategy[tuple[Any, Any]]] = {
    "text": _same(st.text(st.characters(codec="utf-8"), min_size=1, max_size=40)),
    "integer": integer_pairs(),
    "decimal": decimal_pairs(),
    "percent": percent_pairs(),
    "boolean": _same(st.booleans()),
    "date": _same(date_values()),
    "datetime": datetime_pairs(),
    "url": url_pairs(),
    "doi": doi_pairs(),
    "isbn": isbn_pairs(),
    "orcid": orcid_pairs(),
    "language": language_pairs(),
    "money": money_pairs(),
    "quantity": quantity_pairs(),
    "interval": interval_pairs(),
    "enum": _same(st.sampled_from(["erratum", "retraction", "other"])),
    "reference": _same(st.from_regex(r"(sample|study):[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)),
    "list": list_pairs(),
    "isin": isin_pairs(),
    "lei": lei_pairs(),
    "ticker": _cased(st.from_regex(r"[A-Z0-9]{1,5}([.\-/][A-Z0-9]{1,3})?", fullmatch=True)),
    "currency": _cased(st.sampled_from(sorted(CURRENCIES))),
}

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.text("0123456789-.:/+eEXx%TZ abc", max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["low", "high", "amount", "currency", "value", "unit", "x"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=6,
)


def test_every_builtin_codec_has_property_strategies() -> None:
    assert set(EQUIVALENT) == set(_SPECS) == BUILTIN_NAMES


@pytest.mark.parametrize("name", sorted(BUILTIN_NAMES))
@PROPERTY
@given(data=st.data())
def test_canonicalizing_twice_changes_nothing(name: str, data: st.DataObject) -> None:
    codec = build(_SPECS[name])
    for value in data.draw(EQUIVALENT[name]):
        once = codec.canonical(value, "fields.x")
        assert codec.canonical(once, "fields.x") == once
        check_json(once)


@pytest.mark.parametrize("name", sorted(BUILTIN_NAMES))
@PROPERTY
@given(data=st.data())
def test_equal_values_have_equal_canonical_forms(name: str, data: st.DataObject) -> None:
    codec = build(_SPECS[name])
    first, second = data.draw(EQUIVALENT[name])
    assert canonical_text(codec.canonical(first, "fields.x")) == canonical_text(
        codec.canonical(second, "fields.x")
    )


@pytest.mark.parametrize("name", sorted(BUILTIN_NAMES))
@PROPERTY
@given(value=JSON_VALUES)
def test_every_refusal_is_a_typed_invalid_argument(name: str, value: Any) -> None:
    codec = build(_SPECS[name])
    try:
        result = codec.canonical(value, "fields.x")
    except InvalidArgument as exc:
        refusal: InvalidArgument | None = exc
    else:
        refusal = None
    if refusal is not None:
        assert refusal.code == "invalid_argument"
        assert refusal.details["field"].startswith("fields.x")
        assert re.fullmatch(r"[a-z]+\.[a-z_]+", refusal.details["rule"])
        return
    check_json(result)
    assert codec.canonical(result, "fields.x") == result


@PROPERTY
@given(pair=decimal_pairs())
def test_exact_decimals_keep_their_exact_value(pair: tuple[Any, Any]) -> None:
    first, _ = pair
    assert Decimal(canonical({"codec": "decimal"}, first)) == Decimal(str(first))


@PROPERTY
@given(pair=datetime_pairs())
def test_datetimes_are_normalized_to_utc(pair: tuple[str, str]) -> None:
    utc, at_offset = pair
    result = canonical({"codec": "datetime"}, at_offset)
    assert result.endswith("Z") and result == canonical({"codec": "datetime"}, utc)


def _ordered(codec: Codec) -> Callable[[Any], Any]:
    def key(value: Any) -> Any:
        order = codec.order_key(value)
        assert order is not None
        return order[1]

    return key


@PROPERTY
@given(pair=datetime_pairs(), other=datetime_pairs())
def test_datetime_order_is_time_order(pair: tuple[str, str], other: tuple[str, str]) -> None:
    codec = build({"codec": "datetime"})
    first, second = codec.canonical(pair[1], "a"), codec.canonical(other[1], "b")
    as_time = [
        (datetime.fromisoformat(value[:19]), Decimal("0." + (value[20:-1] or "0")))
        for value in (first, second)
    ]
    key = _ordered(codec)
    assert (key(first) < key(second)) == (as_time[0] < as_time[1])
    assert (key(first) == key(second)) == (as_time[0] == as_time[1])
