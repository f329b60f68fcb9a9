"""read: one record, a working note or reviewed knowledge, exactly as digested."""

from __future__ import annotations

from typing import Any, NamedTuple

from oh.core.notebook import check_writable
from oh.errors import NotFound
from oh.tools import reef
from oh.tools.json_schema import (
    DIGEST,
    NAME,
    ORIGIN,
    check_schema,
    compile_schema,
    object_of,
    published,
    whole_name,
)
from oh.tools.spec import Caller, Example, Service, Tool

__all__ = ["TOOL", "Read"]


class Read(NamedTuple):
    name: str
    digest: str | None
    origin: str | None


ARGUMENTS = published(object_of({"name": NAME, "digest": DIGEST, "origin": ORIGIN}, ["name"]))

SOURCE = {
    "type": "object",
    "properties": {
        "document": {"type": "string"},
        "passage": {"type": "string"},
        "locator": {"type": ["string", "object"]},
    },
    "required": ["document", "passage", "locator"],
}
DECISION = {
    "type": "object",
    "properties": {
        "decision": {"enum": ["accept", "accept_with_edits"]},
        "by": {"type": "string"},
        "at": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["decision", "by", "at", "reason"],
}
_LINKS = {"type": "array", "items": NAME}
RESULT = published(
    object_of(
        {
            "origin": ORIGIN,
            "kind": {"type": "string"},
            "name": NAME,
            "digest": DIGEST,
            "text": {"type": "string"},
            "fields": {"type": "object"},
            "depends_on": _LINKS,
            "supports": _LINKS,
            "contradicts": _LINKS,
            "author": {"type": "string"},
            "written_at": {"type": "string"},
            "version": {"type": "integer"},
            "revision": {"type": "integer"},
            "source": SOURCE,
            "decision": DECISION,
            "changed": {"type": "boolean"},
            "also_reviewed": {"const": True},
        },
        [
            "origin",
            "kind",
            "name",
            "digest",
            "text",
            "fields",
            "depends_on",
            "supports",
            "contradicts",
            "author",
            "written_at",
        ],
    )
)

_validate = compile_schema(ARGUMENTS)


def parse(arguments: Any) -> Read:
    # The common call, ``{"name": <a record name>}``, is one the schema accepts whole: a name that
    # matches its pattern from end to end, and nothing else. Anything else is checked in full.
    if type(arguments) is dict and len(arguments) == 1:
        name = arguments.get("name")
        if type(name) is str and whole_name(name) is not None:
            return Read(name, None, None)
    check_schema(_validate, "read", arguments)
    return Read(arguments["name"], arguments.get("digest"), arguments.get("origin"))


def run(tools: Service, caller: Caller, arguments: Read) -> dict[str, Any]:
    name = arguments.name
    origin = arguments.origin
    notebook, stored = tools.memory.read_record(caller.notebook_id, name)
    check_writable(notebook.id, notebook.state, notebook.forgets_at, tools.clock())
    body: dict[str, Any] | None = None
    reviewed_names = tools.views.reviewed(notebook.owner, notebook.pinned_revision)
    if origin != "reviewed" and stored is not None:
        body = {
            "origin": "note",
            **stored.verified_content(),
            "digest": stored.digest,
            "author": stored.author,
            "written_at": stored.written_at,
            "version": stored.version,
        }
        if origin is None and name in reviewed_names:
            body["also_reviewed"] = True
    if body is None and origin != "note" and name in reviewed_names:
        assert tools.knowledge is not None and notebook.pinned_revision is not None
        reviewed = tools.knowledge.record_at(notebook.owner, name, notebook.pinned_revision)
        if reviewed is not None:
            body = reviewed.to_json()
    if body is None:
        where = {"note": " as a note", "reviewed": " as reviewed knowledge"}.get(origin or "", "")
        raise NotFound(f"{name} is not in view{where}", name=name)
    if arguments.digest is not None:
        body["changed"] = arguments.digest != body["digest"]
    return body


TOOL = Tool(
    name="read",
    description=(
        "Read one record: name, kind, text, fields, depends_on, supports, contradicts exactly as "
        "digested, with origin, digest, author, written_at and version (notes) or revision, "
        "source, decision (reviewed knowledge, which you cannot change). Without origin a note "
        "wins over a reviewed record of the same name (also_reviewed: true). Pass the digest you "
        "know to learn whether the record changed."
    ),
    arguments=ARGUMENTS,
    result=RESULT,
    parse=parse,
    run=run,
    inline=True,
    requests=(Example("", "", {"name": "todo:check-figure-3"}),),
    results=(Example("", "", reef.note(reef.FIGURE, reef.FIGURE_DIGEST)),),
)
