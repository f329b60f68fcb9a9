"""The Memory panel of one notebook (docs/panel.md): the session, its lists, history, links,
conflicts.

Three lists: the working notes, the notes removed from the session (each with its last version,
from the notebook's log), and the reviewed knowledge in view. Each is shown a page at a time
(``PAGE_SIZE`` by default, ``PAGE_SIZES`` to choose from), one compact line per record that opens
in place for its text, fields and links; its history and the form to propose it for review are
pages of their own, which the script loads in place. The lists are filtered by kind and by the
words of a search (in names, texts and field values), and ordered by name, time or versions
(``PanelQuery``, from the page's query string); every link the page draws keeps the filters, the
order, the page size and the other lists' pages.

Anchors: a working note is ``#record-<name>`` (what memory cards link to); a reviewed record in
view is ``#reviewed-<name>``, a removed note ``#removed-<name>``, since the lists may share a name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from oh.core.canonical import matches_digest
from oh.core.identifiers import contains_control
from oh.core.notebook import Notebook
from oh.core.records import CONTENT_KEYS, LINK_KEYS, Record, check_name, kind_of
from oh.core.reviewed import Proposal, find_conflicts
from oh.errors import InvalidArgument, NotFound
from oh.transports.panel.layout import (
    Chrome,
    esc,
    hidden_csrf,
    hidden_warning,
    locator_text,
    page,
    pager,
    remaining,
    time_tag,
)

if TYPE_CHECKING:
    from oh.host import Host

__all__ = [
    "PAGE_SIZE",
    "PAGE_SIZES",
    "SORTS",
    "HistoryItem",
    "NotebookView",
    "PanelQuery",
    "RecordList",
    "RecordView",
    "anchor",
    "find_record",
    "notebook_view",
    "record_url",
    "render_forget_confirmation",
    "render_forget_note",
    "render_history",
    "render_notebook",
    "render_propose",
]

NOTES_CAPTION = "Private notes the agent wrote for itself in this session"
REMOVED_CAPTION = (
    "Notes removed from this session, by the agent or by you, each with its last version"
    " (kept in the session's log until it is forgotten)"
)
REVIEWED_CAPTION = "Reviewed knowledge the agent can read here but not change"
LINK_LABELS = (
    ("depends_on", "Depends on"),
    ("supports", "Supports"),
    ("contradicts", "Contradicts"),
)
# The same links read from the other end: which records name this one.
INCOMING_LABELS = (
    ("depends_on", "Depended on by"),
    ("supports", "Supported by"),
    ("contradicts", "Contradicted by"),
)
ORIGIN_WORDS = {"note": "working note", "reviewed": "reviewed record", "removed": "removed note"}
PAGE_SIZE = 50  # records on one page of each list, unless the owner chooses another size
PAGE_SIZES = (25, 50, 100, 200)
# How a list can be ordered (``sort``), with the words the page shows for each.
SORTS = {
    "name": "Name",
    "newest": "Newest first",
    "oldest": "Oldest first",
    "revised": "Most revised",
}
_WORD = re.compile(r"[^\w]+")  # what separates words in a record and in a search
FIRST_LINE = 160  # characters of a record's text on its compact line
MAX_SEARCH = 120
MAX_PAGE = 1_000_000
PAGE_PARAMS = {"note": "page", "removed": "removed_page", "reviewed": "reviewed_page"}
_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")


def anchor(origin: str, name: str) -> str:
    """The element id of a record in the panel: ``record-``, ``reviewed-`` or ``removed-``
    followed by its name."""
    prefix = {"note": "record-", "reviewed": "reviewed-", "removed": "removed-"}[origin]
    return prefix + name


def words_of(text: str) -> str:
    """``text`` as the search reads it: lower case, every run of characters that are not
    letters or digits one space (``Lead:HERON-gauge`` → ``lead heron gauge``)."""
    return " " + _WORD.sub(" ", text.casefold()).strip() + " "


def searchable(record: Mapping[str, Any]) -> str:
    """What a search looks in: a record's name, text and field values, as ``words_of`` reads
    them."""
    fields = record.get("fields") or {}
    values = json.dumps(list(fields.values()), ensure_ascii=False) if fields else ""
    return words_of(f"{record['name']} {record.get('text') or ''} {values}")


@dataclass(frozen=True, slots=True)
class PanelQuery:
    """What the owner asked the panel to show, read once from the query string: a kind, the
    words of a search (``q``), an order (``sort``), a page of each list and how many records a
    page holds (``size``), a record to show (``at``: the pages holding it, opened), a proposal
    just made (``proposed``) and a note just forgotten (``forgot``)."""

    kind: str | None = None
    search: str | None = None
    note_page: int = 1
    removed_page: int = 1
    reviewed_page: int = 1
    at: str | None = None
    proposed: str | None = None
    size: int = PAGE_SIZE
    forgot: str | None = None
    sort: str = "name"

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> PanelQuery:
        """The query of ``params``; ``invalid_argument`` for a value the panel cannot show."""
        kind = (params.get("kind") or "").strip() or None
        if kind is not None and _KIND.fullmatch(kind) is None:
            raise InvalidArgument("kind is the part of a name before the colon, such as lead")
        search = (params.get("q") or "").strip().lower() or None
        if search is not None and (len(search) > MAX_SEARCH or contains_control(search)):
            raise InvalidArgument(f"q is text of at most {MAX_SEARCH} characters")
        pages = {}
        for origin, param in PAGE_PARAMS.items():
            raw = params.get(param) or "1"
            if not (
                raw.isascii() and raw.isdigit() and len(raw) <= 9 and 1 <= int(raw) <= MAX_PAGE
            ):
                raise InvalidArgument(f"{param} is a page number from 1 to {MAX_PAGE}")
            pages[origin] = int(raw)
        at = params.get("at") or None
        if at is not None:
            check_name(at, "at")
        forgot = params.get("forgot") or None
        if forgot is not None:
            check_name(forgot, "forgot")
        size = params.get("size") or str(PAGE_SIZE)
        if size not in {str(choice) for choice in PAGE_SIZES}:
            raise InvalidArgument(f"size is one of {', '.join(map(str, PAGE_SIZES))}")
        sort = params.get("sort") or "name"
        if sort not in SORTS:
            raise InvalidArgument(f"sort is one of {', '.join(SORTS)}")
        return cls(
            kind,
            search,
            pages["note"],
            pages["removed"],
            pages["reviewed"],
            at,
            params.get("proposed") or None,
            int(size),
            forgot,
            sort,
        )

    @property
    def words(self) -> list[str]:
        """The search's words, as ``words_of`` reads them."""
        return [] if self.search is None else words_of(self.search).split()

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` (in the read shape) passes the filters: its kind, and every word
        of the search as the start of a word of its name, text or field values, in any order
        and any case."""
        name = str(record["name"])
        if self.kind is not None and kind_of(name) != self.kind:
            return False
        if self.search is None:
            return True
        found = searchable(record)
        return all(f" {word}" in found for word in self.words)

    @property
    def filtered(self) -> bool:
        return self.kind is not None or self.search is not None

    def page(self, origin: str) -> int:
        return {"note": self.note_page, "removed": self.removed_page}.get(
            origin, self.reviewed_page
        )

    def with_page(self, origin: str, number: int) -> PanelQuery:
        if origin == "note":
            return replace(self, note_page=number)
        if origin == "removed":
            return replace(self, removed_page=number)
        return replace(self, reviewed_page=number)

    def query_string(self) -> str:
        """The filters, page size and pages as a query string ("" when all are the defaults);
        ``at``, ``proposed`` and ``forgot`` are what one page view was asked, not carried on."""
        items = [("kind", self.kind), ("q", self.search)]
        if self.sort != "name":
            items.append(("sort", self.sort))
        if self.size != PAGE_SIZE:
            items.append(("size", str(self.size)))
        items += [
            (param, str(self.page(o))) for o, param in PAGE_PARAMS.items() if self.page(o) > 1
        ]
        return urlencode([(key, value) for key, value in items if value])


@dataclass(frozen=True, slots=True)
class HistoryItem:
    label: str  # e.g. "version 3 · replaced" or "revision 2 · accepted with edits"
    who: str
    when: str
    digest: str | None
    text: str | None
    detail: str = ""


@dataclass(slots=True)
class RecordView:
    origin: str  # note | removed | reviewed
    record: dict[str, Any]  # the read shape of docs/tools.md (a removed note: its last version)
    history: list[HistoryItem] = field(default_factory=list)
    conflicts_with: list[str] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)
    newer_revision: int | None = None  # reviewed: a later version exists outside the pin
    # notes: the pending proposal for this name (from this note or elsewhere), and why review
    # would refuse the note's content now; with either, the panel offers no "Propose"
    pending: Proposal | None = None
    refusal: str | None = None
    removal: HistoryItem | None = None  # removed: the change that removed it
    detail: str = ""  # removed: why its last version's text is not shown

    @property
    def name(self) -> str:
        return str(self.record["name"])


@dataclass(slots=True)
class RecordList:
    """One list as the page shows it: the names that pass the filters (in order), the page
    shown and its records, and how many the list holds before filtering."""

    origin: str
    names: list[str]
    page: int
    items: list[RecordView]
    total: int
    size: int = PAGE_SIZE
    positions: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.positions = {name: index for index, name in enumerate(self.names)}

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.names) // self.size))

    def page_of(self, name: str) -> int | None:
        index = self.positions.get(name)
        return None if index is None else index // self.size + 1


@dataclass(slots=True)
class NotebookView:
    notebook: Notebook
    notes: RecordList
    reviewed: RecordList
    now: datetime
    proposed: Proposal | None = None
    removed: RecordList | None = None
    query: PanelQuery = PanelQuery()
    latest_revision: int | None = None
    kinds: dict[str, int] = field(default_factory=dict)
    # (origin, name) -> link key -> [(origin, name)] of the records whose link names it
    incoming: dict[tuple[str, str], dict[str, list[tuple[str, str]]]] = field(default_factory=dict)
    present: dict[str, set[str]] = field(default_factory=dict)  # every name of each list
    opened: tuple[str, str] | None = None  # the record ``at`` named, shown open

    @property
    def gone(self) -> bool:
        return self.notebook.state in ("purged", "empty")

    @property
    def closed(self) -> bool:
        """Gone, or past its forget time: its notes are never shown again (an expired notebook
        waits only for the purge's next pass, which ``oh serve`` runs every minute)."""
        return self.gone or self.notebook.state == "expired"

    @property
    def pinned_before_latest(self) -> bool:
        pinned = self.notebook.pinned_revision
        return (
            pinned is not None
            and self.latest_revision is not None
            and (pinned < self.latest_revision)
        )

    def lists(self) -> dict[str, RecordList]:
        found = {"note": self.notes, "reviewed": self.reviewed}
        if self.removed is not None:
            found["removed"] = self.removed
        return found

    def locate(self, name: str, prefer: str) -> tuple[str, str] | None:
        """The record a link to ``name`` goes to: the same list first, then the other one,
        then a removed note of that name; None when no list holds it."""
        order = {"note": ("note", "reviewed"), "reviewed": ("reviewed", "note")}.get(
            prefer, ("note", "reviewed")
        )
        for origin in (*order, "removed"):
            if name in self.present.get(origin, ()):
                return origin, name
        return None

    def url(self, query: PanelQuery | None = None, base: str = "") -> str:
        query = self.query if query is None else query
        text = query.query_string()
        return f"{base}/panel/notebooks/{self.notebook.id}" + (f"?{text}" if text else "")

    def href(self, origin: str, name: str, base: str) -> str:
        """Where a link to a record goes: its anchor on this page, or the page of its list that
        holds it (filters kept), or — filtered out — the unfiltered page that holds it."""
        key = anchor(origin, name)
        listed = self.lists().get(origin)
        number = None if listed is None else listed.page_of(name)
        if number is None:
            return f"{base}/panel/notebooks/{self.notebook.id}?{urlencode({'at': name})}#{key}"
        if number == self.query.page(origin):
            return f"#{key}"
        return f"{self.url(self.query.with_page(origin, number), base)}#{key}"


_OPS = {"add": "added", "replace": "replaced", "remove": "removed"}
_DECISIONS = {"accept": "accepted", "accept_with_edits": "accepted with edits"}


@dataclass(slots=True)
class _NoteLog:
    """What the log holds about one name: every version, the last one written, its removal."""

    history: list[HistoryItem] = field(default_factory=list)
    last: dict[str, Any] | None = None  # the last version written, in the read shape
    removal: HistoryItem | None = None  # the change that removed it, if that came last


def _note_logs(host: Host, owner: str, notebook_id: str) -> dict[str, _NoteLog]:
    logs: dict[str, _NoteLog] = {}
    for entry in host.notebook_log(owner, notebook_id):
        for change in entry.changes:
            note = logs.setdefault(change.name, _NoteLog())
            text = None
            detail = ""
            content: dict[str, Any] | None = None
            if change.content is not None:
                if not matches_digest(change.content, change.digest):
                    detail = "this version does not match its digest"
                else:
                    content = json.loads(change.content)
                    text = content.get("text") if content is not None else None
            item = HistoryItem(
                f"version {entry.version} · {_OPS.get(change.op, change.op)}",
                entry.author,
                entry.written_at,
                change.digest,
                text,
                detail,
            )
            note.history.append(item)
            if change.op == "remove":
                note.removal = item
                continue
            note.removal = None
            note.last = {
                "origin": "note",
                **(content or {"name": change.name, "kind": kind_of(change.name)}),
                "digest": change.digest,
                "author": entry.author,
                "written_at": entry.written_at,
                "version": entry.version,
                "verified": content is not None,
            }
    return logs


def _written(record: Mapping[str, Any]) -> str:
    """When a record was last written: a note's last version, a reviewed record's decision."""
    decision = record.get("decision") or {}
    return str(record.get("written_at") or decision.get("at") or "")


def _ordered(
    records: list[dict[str, Any]], sort: str, versions: Mapping[str, int]
) -> list[dict[str, Any]]:
    """``records`` in the order ``sort`` asks for, by name among equals. ``versions``: how
    many versions each name has (a reviewed record's revision stands in for it)."""
    by_name = sorted(records, key=lambda record: str(record["name"]))
    if sort == "newest":
        return sorted(by_name, key=_written, reverse=True)
    if sort == "oldest":
        return sorted(by_name, key=_written)
    if sort == "revised":

        def revised(record: dict[str, Any]) -> int:
            name = str(record["name"])
            return versions.get(name, int(record.get("revision") or 1))

        return sorted(by_name, key=revised, reverse=True)
    return by_name


def _paged(
    origin: str,
    records: list[dict[str, Any]],
    query: PanelQuery,
    versions: Mapping[str, int] | None = None,
) -> tuple[list[str], int, list[dict[str, Any]]]:
    """The names passing the filters, in the order asked for, the page to show (the one holding
    ``at`` if any, else the one asked for, at most the last) and that page's records."""
    passing = [record for record in records if query.matches(record)]
    shown = _ordered(passing, query.sort, versions or {})
    names = [str(record["name"]) for record in shown]
    size = query.size
    last = max(1, -(-len(names) // size))
    number = min(query.page(origin), last)
    if query.at is not None and query.at in names:
        number = names.index(query.at) // size + 1
    return names, number, shown[(number - 1) * size : number * size]


def notebook_view(
    host: Host, owner: str, notebook_id: str, query: PanelQuery | None = None
) -> NotebookView:
    """Everything the panel shows for one notebook, as its owner (another owner: not_found):
    the pages of its lists ``query`` asks for, with the filters it gives."""
    query = PanelQuery() if query is None else query
    notebook = host.notebook(owner, notebook_id)
    now = host.clock()
    proposals = host.proposals(owner)
    proposed = next((p for p in proposals if p.id == query.proposed), None)
    if notebook.state in ("purged", "empty", "expired"):
        empty = RecordList("note", [], 1, [], 0)
        return NotebookView(
            notebook, empty, replace(empty, origin="reviewed"), now, proposed, query=query
        )
    records = host.records(owner, notebook_id)
    logs = _note_logs(host, owner, notebook_id)
    current = {str(record["name"]) for record in records["notes"]}
    removed_records = sorted(
        (
            log.last
            for name, log in logs.items()
            if log.removal is not None and log.last is not None and name not in current
        ),
        key=lambda record: str(record["name"]),
    )
    view = NotebookView(
        notebook,
        RecordList("note", [], 1, [], len(records["notes"])),
        RecordList("reviewed", [], 1, [], len(records["reviewed"])),
        now,
        proposed,
        RecordList("removed", [], 1, [], len(removed_records)) if removed_records else None,
        query,
        host.latest_revision(owner) if notebook.pinned_revision is not None else None,
    )
    view.present = {
        "note": current,
        "reviewed": {str(record["name"]) for record in records["reviewed"]},
        "removed": {str(record["name"]) for record in removed_records},
    }
    for record in (*records["notes"], *removed_records, *records["reviewed"]):
        kind = str(record["kind"])
        view.kinds[kind] = view.kinds.get(kind, 0) + 1
    view.incoming = _incoming(view, records["notes"], records["reviewed"])
    conflicts = find_conflicts(
        {r["name"]: (r["digest"], r["contradicts"]) for r in records["notes"]},
        {r["name"]: (r["digest"], r["contradicts"]) for r in records["reviewed"]},
    )

    # Only the records on the pages shown are checked and looked up any further.
    by_note: dict[str, list[Proposal]] = {}
    for proposal in proposals:
        if proposal.note is not None and proposal.note.get("notebook") == notebook_id:
            by_note.setdefault(str(proposal.note.get("name")), []).append(proposal)
    pending = {p.name: p for p in proposals if p.state == "pending"}
    check = host.reviewable(owner)  # what proposing would check, profiles read once
    versions = {name: len(log.history) for name, log in logs.items()}
    names, number, shown = _paged("note", records["notes"], query, versions)
    notes = []
    for record in shown:
        item = RecordView(
            "note",
            record,
            logs.get(record["name"], _NoteLog()).history,
            proposals=by_note.get(record["name"], []),
            pending=pending.get(record["name"]),
        )
        try:
            check(Record.parse({key: record[key] for key in CONTENT_KEYS}))
        except InvalidArgument as exc:
            item.refusal = exc.message
        notes.append(item)
    view.notes = RecordList("note", names, number, notes, len(records["notes"]), query.size)

    if view.removed is not None:
        names, number, shown = _paged("removed", removed_records, query, versions)
        removed = []
        for record in shown:
            log = logs[record["name"]]
            removed.append(
                RecordView(
                    "removed",
                    record,
                    log.history,
                    proposals=by_note.get(record["name"], []),
                    removal=log.removal,
                    detail=""
                    if record["verified"]
                    else "its last version does not match its digest, so its text is not shown",
                )
            )
        view.removed = RecordList(
            "removed", names, number, removed, len(removed_records), query.size
        )

    names, number, shown = _paged("reviewed", records["reviewed"], query)
    reviewed = []
    for record in shown:
        item = RecordView("reviewed", record)
        for version in host.history(owner, record["name"]):
            if notebook.pinned_revision is not None and version.revision > notebook.pinned_revision:
                item.newer_revision = version.revision
                continue
            decision = version.decision
            item.history.append(
                HistoryItem(
                    f"revision {version.revision} · "
                    f"{_DECISIONS.get(decision.decision, decision.decision)}",
                    decision.by,
                    decision.at,
                    version.digest,
                    version.verified_content().get("text"),
                    f"Reason: {decision.reason}",
                )
            )
        reviewed.append(item)
    view.reviewed = RecordList(
        "reviewed", names, number, reviewed, len(records["reviewed"]), query.size
    )
    for listed in (view.notes, view.reviewed):
        for item in listed.items:
            item.conflicts_with = conflicts.get((item.origin, item.name), [])
    if query.at is not None:
        view.opened = view.locate(query.at, "note")
    # From here on the query says what is shown: the pages ``at`` picked or the last ones.
    view.query = replace(
        query,
        note_page=view.notes.page,
        removed_page=1 if view.removed is None else view.removed.page,
        reviewed_page=view.reviewed.page,
        at=None,
    )
    return view


def _incoming(
    view: NotebookView, notes: list[dict[str, Any]], reviewed: list[dict[str, Any]]
) -> dict[tuple[str, str], dict[str, list[tuple[str, str]]]]:
    """For every record some link in view names: which records name it, by which key. A link
    goes where the panel's outgoing link goes (``NotebookView.locate``); a removed note's links
    no longer hold, so it names nothing."""
    incoming: dict[tuple[str, str], dict[str, list[tuple[str, str]]]] = {}
    for origin, records in (("note", notes), ("reviewed", reviewed)):
        for record in records:
            for key in LINK_KEYS:
                for name in record.get(key) or ():
                    target = view.locate(name, origin)
                    if target is not None:
                        by_key = incoming.setdefault(target, {})
                        by_key.setdefault(key, []).append((origin, str(record["name"])))
    return incoming


# -- rendering -------------------------------------------------------------------------------


def _link_to(chrome: Chrome, view: NotebookView, origin: str, name: str) -> str:
    href = view.href(origin, name, chrome.base)
    removed = ' <span class="removed-flag">(removed)</span>' if origin == "removed" else ""
    return f'<a href="{esc(href)}">{esc(name)}</a>{removed}'


def _link(chrome: Chrome, view: NotebookView, name: str, prefer: str) -> str:
    target = view.locate(name, prefer)
    if target is None:
        return f'<span class="missing" title="not in view">{esc(name)}</span>'
    return _link_to(chrome, view, *target)


def _links(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    rows = []
    for key, label in LINK_LABELS:
        names = record.record.get(key) or []
        if names:
            items = ", ".join(_link(chrome, view, name, record.origin) for name in names)
            rows.append(f"<dt>{label}</dt><dd>{items}</dd>")
    incoming = view.incoming.get((record.origin, record.name), {})
    for key, label in INCOMING_LABELS:
        sources = incoming.get(key) or []
        if sources:
            items = ", ".join(_link_to(chrome, view, *source) for source in sources)
            rows.append(f'<dt class="incoming">{label}</dt><dd class="incoming">{items}</dd>')
    return f'<dl class="links">{"".join(rows)}</dl>' if rows else ""


def _conflict(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    if not record.conflicts_with:
        return ""
    items = []
    for name in record.conflicts_with:
        if name == record.name:
            other = "reviewed" if record.origin == "note" else "note"
            items.append(
                f'<a href="{esc(view.href(other, name, chrome.base))}">the {ORIGIN_WORDS[other]}'
                " of the same name</a> (different digest)"
            )
        else:
            items.append(_link(chrome, view, name, record.origin))
    return (
        '<p class="conflict-flag"><strong>In conflict</strong> with '
        + ", ".join(items)
        + ". Both stay visible; neither is merged or hidden.</p>"
    )


def record_url(chrome: Chrome, view: NotebookView, path: str, name: str) -> str:
    """A page about one record of this notebook (``history``, ``propose``, ``notes/forget``),
    carrying the list's filters, page size and pages so that it leads back to them."""
    text = view.query.query_string()
    query = urlencode({"name": name}) + (f"&{text}" if text else "")
    return f"{chrome.base}/panel/notebooks/{view.notebook.id}/{path}?{query}"


def _history_items(record: RecordView) -> str:
    """Every version of ``record``, newest first, each with its text."""
    items = []
    for item in reversed(record.history):
        digest = (
            f' · digest <code title="{esc(item.digest)}">{esc(item.digest[:12])}</code>'
            if item.digest
            else ""
        )
        text = (
            f'<p class="text">{esc(item.text)}</p>{hidden_warning(item.text)}'
            if item.text is not None
            else ""
        )
        detail = f'<p class="detail">{esc(item.detail)}</p>' if item.detail else ""
        items.append(
            f'<li><p class="meta"><strong>{esc(item.label)}</strong> · by {esc(item.who)}'
            f" · {time_tag(item.when)}{digest}</p>{text}{detail}</li>"
        )
    newer = (
        f'<p class="detail">A newer reviewed version exists at revision {record.newer_revision};'
        " this session is pinned before it.</p>"
        if record.newer_revision is not None
        else ""
    )
    return f'{newer}<ol reversed class="versions">{"".join(items)}</ol>'


def _history(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    """The record's history, on demand: a link to its page, which the script opens in place."""
    if not record.history:
        return ""
    count = len(record.history)
    noun = "version" if count == 1 else "versions"
    url = record_url(chrome, view, "history", record.name) + f"&origin={record.origin}"
    return (
        f'<details class="history" id="{esc(anchor(record.origin, record.name))}-history">'
        f"<summary>History ({count} {noun})</summary>"
        f'<p class="load"><a href="{esc(url)}">Every version of {esc(record.name)}</a></p>'
        "</details>"
    )


def _source_and_decision(record: dict[str, Any]) -> str:
    source = record.get("source") or {}
    decision = record.get("decision") or {}
    what = _DECISIONS.get(decision.get("decision", ""), decision.get("decision", ""))
    return (
        '<figure class="source"><blockquote>'
        f"<p>{esc(source.get('passage', ''))}</p></blockquote>"
        f"<figcaption>Source: {esc(source.get('document', ''))}, "
        f"{esc(locator_text(source.get('locator', '')))}</figcaption></figure>"
        f'<p class="decision">Review: {esc(what)} by {esc(decision.get("by", ""))} · '
        f"{time_tag(str(decision.get('at', '')))} · revision {esc(record.get('revision', ''))}"
        f"<br>Reason: {esc(decision.get('reason', ''))}</p>"
        f"{hidden_warning(source.get('passage', ''), decision.get('reason', ''))}"
    )


def _proposal_state(chrome: Chrome, record: RecordView) -> str:
    if not record.proposals:
        return ""
    latest = record.proposals[-1]
    return (
        f'<p class="proposal-state">Proposed for review: <strong>{esc(latest.state)}</strong>'
        f' (<a href="{esc(chrome.base)}/panel/review#proposal-{esc(latest.id)}">'
        "review page</a>)</p>"
    )


def _action(chrome: Chrome, view: NotebookView, path: str) -> str:
    """A form's action: the route, with the page's filters and pages so it comes back to them."""
    text = view.query.query_string()
    return f"{chrome.base}/panel/notebooks/{view.notebook.id}/{path}" + (f"?{text}" if text else "")


def _blocked(chrome: Chrome, view: NotebookView, record: RecordView) -> str | None:
    """Why ``record`` cannot be proposed for review now, as the page says it ("" when its own
    proposal waits, which its state says); None when it can be."""
    pending = record.pending
    if pending is not None:
        note = pending.note or {}
        if note.get("notebook") == view.notebook.id and note.get("name") == record.name:
            return ""
        return (
            '<p class="propose-blocked">Cannot be proposed for review now: another'
            f" proposal for {esc(record.name)} waits for review"
            f' (<a href="{esc(chrome.base)}/panel/review#proposal-{esc(pending.id)}">'
            "review page</a>); decide it first.</p>"
        )
    if record.refusal is not None:
        return (
            f'<p class="propose-blocked">Cannot be proposed for review: {esc(record.refusal)}.</p>'
        )
    return None


def _actions(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    """A working note's actions: propose it for review (or why not), forget it. Each is a page
    of its own: the form with its source, the confirmation."""
    status = _proposal_state(chrome, record)
    if view.notebook.state not in ("open", "expired"):
        return status
    key = esc(anchor("note", record.name))
    blocked = _blocked(chrome, view, record)
    propose = (
        blocked
        if blocked is not None
        else f'<a id="{key}-propose" class="button"'
        f' href="{esc(record_url(chrome, view, "propose", record.name))}">Propose for review'
        f'<span class="visually-hidden"> {esc(record.name)}</span></a>'
    )
    forget_url = esc(record_url(chrome, view, "notes/forget", record.name))
    forget = (
        f'<a class="forget-note" href="{forget_url}">'
        f'Forget this note<span class="visually-hidden"> {esc(record.name)}</span></a>'
        if view.notebook.state == "open"
        else ""
    )
    return f'{status}<div class="actions">{propose}{forget}</div>'


def _removal(record: RecordView) -> str:
    removal = record.removal
    if removal is None:
        return ""
    what = removal.label.partition(" · ")[0]  # "version N"
    detail = f'<p class="detail">{esc(record.detail)}</p>' if record.detail else ""
    return (
        f'<p class="removal"><strong>Removed</strong> at {esc(what)} by {esc(removal.who)}'
        f" · {time_tag(removal.when)}. Shown as it last was; the agent no longer sees it.</p>"
        f"{detail}"
    )


def _first_line(text: Any) -> str:
    """The start of a record's text for its compact line: its first line, cut at
    ``FIRST_LINE`` characters."""
    if not isinstance(text, str) or not text:
        return ""
    line = text.split("\n", 1)[0]
    cut = len(line) > FIRST_LINE or line != text
    return line[:FIRST_LINE].rstrip() + ("…" if cut else "")


def _record(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    """One record: a compact line (name, kind, the start of its text, who, when, which
    version) that opens in place for the rest."""
    data = record.record
    key = esc(anchor(record.origin, record.name))
    digest = str(data.get("digest") or "")
    stamp = (
        f"revision {esc(data.get('revision'))}"
        if record.origin == "reviewed"
        else f"version {esc(data.get('version'))}"
    )
    fields = data.get("fields") or {}
    fields_html = (
        f'<details class="fields"><summary>Fields</summary><pre>'
        f"{esc(json.dumps(fields, indent=2, ensure_ascii=False))}</pre></details>"
        if fields
        else ""
    )
    classes = "record " + ("note removed" if record.origin == "removed" else record.origin)
    classes += " conflict" if record.conflicts_with else ""
    if record.origin == "note":
        extra = _actions(chrome, view, record)
    elif record.origin == "removed":
        extra = _proposal_state(chrome, record)
    else:
        extra = _source_and_decision(data)
    badge = (
        ' <span class="badge removed-badge">removed</span>' if record.origin == "removed" else ""
    )
    flag = ' <span class="badge conflict-badge">conflict</span>' if record.conflicts_with else ""
    text = data.get("text")
    text_html = "" if text is None else f'<p class="text">{esc(text)}</p>'
    text_html += hidden_warning(text, json.dumps(fields, ensure_ascii=False) if fields else "")
    opened = " open" if view.opened == (record.origin, record.name) else ""
    # The memory version that wrote it: the script marks what changed since the owner looked.
    written = "" if record.origin == "reviewed" else f' data-version="{esc(data.get("version"))}"'
    return (
        f'<li><article class="{classes}" id="{key}" aria-labelledby="{key}-title"{written}>'
        f'<details class="entry" id="{key}-entry"{opened}><summary>'
        f'<span class="line"><span id="{key}-title" class="name">{esc(record.name)}</span>'
        f"{badge}{flag} "
        f'<span class="first">{esc(_first_line(text))}</span></span>'
        f'<span class="meta"><span class="kind">{esc(data["kind"])}</span>'
        f" · by {esc(data.get('author', ''))} · {time_tag(str(data.get('written_at', '')))}"
        f" · {stamp}</span></summary>"
        f'<div class="body"><p class="meta">digest <code title="{esc(digest)}">'
        f"{esc(digest[:12])}</code></p>"
        f"{_removal(record)}{_conflict(chrome, view, record)}"
        f"{text_html}"
        f"{fields_html}{_links(chrome, view, record)}{_history(chrome, view, record)}{extra}"
        "</div></details></article></li>"
    )


def _pager(
    chrome: Chrome, view: NotebookView, listed: RecordList, what: str, where: str = "top"
) -> str:
    """Which records the page shows, and links to the other pages of the list (``where``: above
    the list, with the count, or below it)."""
    count = len(listed.names)
    if count == 0:
        return ""
    first = (listed.page - 1) * listed.size + 1
    last = min(count, listed.page * listed.size)
    of = f"{count:,}" + (
        f" (of {listed.total:,} without the filter)" if view.query.filtered else ""
    )
    summary = (
        f'<p class="count">Showing {first:,}–{last:,} of {of} {what}.</p>' if where == "top" else ""
    )
    label = f"Pages of {what}" + ("" if where == "top" else ", below the list")
    nav = pager(
        label,
        listed.page,
        listed.pages,
        lambda number: view.url(view.query.with_page(listed.origin, number), chrome.base),
        current=' aria-current="page"' if where == "top" else "",
        classes=f"pager {where}",
    )
    return summary + nav


_EMPTY = {
    "note": "No working notes.",
    "removed": "No removed notes.",
    "reviewed": "No reviewed knowledge in view.",
}
_SECTIONS = {"note": "notes", "removed": "removed", "reviewed": "reviewed"}
_WHAT = {"note": "working notes", "removed": "removed notes", "reviewed": "reviewed records"}
_TITLES = {"note": "Working notes", "removed": "Removed notes", "reviewed": "Reviewed knowledge"}


def _list(chrome: Chrome, view: NotebookView, listed: RecordList, title: str, caption: str) -> str:
    key = _SECTIONS[listed.origin]
    if listed.items:
        content = (
            f'<ul class="records" role="list">'
            f"{''.join(_record(chrome, view, r) for r in listed.items)}</ul>"
        )
    elif listed.total and view.query.filtered:
        content = f'<p class="empty">No {_WHAT[listed.origin]} match the filter.</p>'
    else:
        content = f'<p class="empty">{_EMPTY[listed.origin]}</p>'
    what = _WHAT[listed.origin]
    top = _pager(chrome, view, listed, what)
    bottom = _pager(chrome, view, listed, what, "bottom") if listed.items else ""
    return (
        f'<section id="{key}" aria-labelledby="{key}-title" aria-describedby="{key}-caption">'
        f'<h2 id="{key}-title">{title}</h2>'
        f'<p class="caption" id="{key}-caption">{caption}</p>{top}{content}{bottom}</section>'
    )


def _jump(view: NotebookView) -> str:
    """Links to each list of the page, with how many records it holds."""
    if view.closed:
        return ""
    lists = view.lists()
    links = [
        f'<a href="#{_SECTIONS[origin]}">{_TITLES[origin]} ({len(lists[origin].names):,})</a>'
        for origin in ("note", "removed", "reviewed")
        if origin in lists
    ]
    return f'<nav class="jump" aria-label="Lists on this page">{" ".join(links)}</nav>'


def _filter(chrome: Chrome, view: NotebookView) -> str:
    """Filter every list by kind and by words, order it, and choose how many records a page
    shows: a plain GET form, no script."""
    if view.closed or not (view.kinds or view.query.filtered):
        return ""
    kinds = dict(sorted(view.kinds.items()))
    if view.query.kind is not None:
        kinds.setdefault(view.query.kind, 0)
    options = ['<option value="">All kinds</option>']
    for kind, count in kinds.items():
        chosen = " selected" if kind == view.query.kind else ""
        options.append(f'<option value="{esc(kind)}"{chosen}>{esc(kind)} ({count:,})</option>')
    sorts = "".join(
        f'<option value="{key}"{" selected" if key == view.query.sort else ""}>{label}</option>'
        for key, label in SORTS.items()
    )
    sizes = "".join(
        f'<option value="{size}"{" selected" if size == view.query.size else ""}>{size}</option>'
        for size in PAGE_SIZES
    )
    panel = esc(f"{chrome.base}/panel/notebooks/{view.notebook.id}")
    clear = f' <a href="{panel}">Clear the filter</a>' if view.query.filtered else ""
    return (
        f'<form method="get" action="{panel}"'
        ' class="filter" role="search" aria-label="Filter the records">'
        '<label for="filter-kind">Kind</label>'
        f'<select id="filter-kind" name="kind">{"".join(options)}</select>'
        '<label for="filter-q">Search</label>'
        f'<input id="filter-q" name="q" type="search" maxlength="{MAX_SEARCH}"'
        f' value="{esc(view.query.search or "")}" spellcheck="false"'
        ' aria-describedby="filter-q-help">'
        '<span id="filter-q-help" class="visually-hidden">Words found in a name, text or'
        " field value, in any order</span>"
        '<label for="filter-sort">Sort</label>'
        f'<select id="filter-sort" name="sort">{sorts}</select>'
        '<label for="filter-size">Per page</label>'
        f'<select id="filter-size" name="size">{sizes}</select>'
        f'<button type="submit">Filter</button>{clear}</form>'
    )


def _session(chrome: Chrome, view: NotebookView) -> str:
    nb = view.notebook
    pinned = "none" if nb.pinned_revision is None else str(nb.pinned_revision)
    base = esc(chrome.base)
    forget = (
        ""
        if view.gone
        else (
            f'<form method="get" action="{base}/panel/notebooks/{esc(nb.id)}/forget"'
            ' class="forget"><button type="submit" class="danger">Forget now</button></form>'
        )
    )
    countdown = (
        f' <span class="countdown" data-until="{esc(nb.forgets_at)}">'
        f"({esc(remaining(nb.forgets_at, view.now))})</span>"
        if not view.closed
        else ""
    )
    if view.gone:  # its real end, not the forget time it had (forget now comes before it)
        when = time_tag(nb.purged_at) if nb.purged_at else "yes"
        ends = f"<div><dt>Forgotten</dt><dd>{when}</dd></div>"
    elif nb.state == "expired":
        ends = f"<div><dt>Expired</dt><dd>{time_tag(nb.forgets_at)}</dd></div>"
    else:
        ends = f"<div><dt>Forgets</dt><dd>{time_tag(nb.forgets_at)}{countdown}</dd></div>"
    return (
        '<section id="session" aria-labelledby="session-title">'
        '<h2 id="session-title" class="visually-hidden">Session</h2>'
        '<dl class="session">'
        f"<div><dt>Document</dt><dd>{esc(nb.document)}</dd></div>"
        f"<div><dt>Run</dt><dd>{esc(nb.run)}</dd></div>"
        f"<div><dt>Session started</dt><dd>{time_tag(nb.started_at)}</dd></div>"
        f"{ends}"
        f'<div><dt>Memory version</dt><dd data-field="version">{nb.version}</dd></div>'
        f"<div><dt>Pinned revision</dt><dd>{esc(pinned)}</dd></div>"
        f'<div><dt>State</dt><dd data-field="state">{esc(nb.state)}</dd></div>'
        f"</dl>{forget}</section>"
    )


def _notices(chrome: Chrome, view: NotebookView) -> str:
    nb = view.notebook
    out = []
    if view.gone:
        when = f" at {time_tag(nb.purged_at)}" if nb.purged_at else ""
        out.append(
            f'<p class="notice gone" role="status">This session\'s memory is gone: it was'
            f" forgotten{when}. Its notes, log and answers were deleted, and every later tool"
            " call of the agent answers <code>purged</code>. Reviewed knowledge stays in your"
            f' knowledge base (<a href="{esc(chrome.base)}/panel/review">Review</a>).</p>'
        )
    elif nb.state == "expired":
        out.append(
            f'<p class="notice gone" role="status">This session expired at'
            f" {time_tag(nb.forgets_at)}. The agent can no longer use it and its notes are no"
            " longer shown; the purge deletes them, with its key, at its next pass (every"
            " minute on <code>oh serve</code>).</p>"
        )
    if not view.closed and view.pinned_before_latest:
        out.append(
            f'<p class="notice pin" role="status">This session is pinned at revision'
            f" <strong>{nb.pinned_revision}</strong> of your reviewed knowledge; the latest is"
            f" revision <strong>{view.latest_revision}</strong>. The agent reads revision"
            f" {nb.pinned_revision} only, so knowledge reviewed since is not in view here (a new"
            " notebook pins the latest;"
            f' <a href="{esc(chrome.base)}/panel/review?revision={view.latest_revision}">'
            f"revision {view.latest_revision}</a> on the review page).</p>"
        )
    if view.query.forgot is not None and not view.closed:
        name = view.query.forgot
        where = (
            f' It is under <a href="{esc(view.href("removed", name, chrome.base))}">Removed'
            " notes</a>, with its versions, until the session is forgotten."
            if name in view.present.get("removed", ())
            else ""
        )
        out.append(
            f'<p class="notice ok" role="status">Forgot the note <strong>{esc(name)}</strong>:'
            f" the agent no longer sees it.{where}</p>"
        )
    if view.proposed is not None:
        out.append(
            f'<p class="notice ok" role="status">Proposed <strong>{esc(view.proposed.name)}'
            f"</strong> for review. Decide it on the"
            f' <a href="{esc(chrome.base)}/panel/review#proposal-{esc(view.proposed.id)}">'
            "review page</a>.</p>"
        )
    return "".join(out)


def render_notebook(chrome: Chrome, view: NotebookView) -> str:
    nb = view.notebook
    base = esc(chrome.base)
    removed = (
        _list(chrome, view, view.removed, "Removed notes", REMOVED_CAPTION)
        if view.removed is not None
        else ""
    )
    body = (
        f'<h1>Memory <span class="sub">for {esc(nb.document)}</span></h1>'
        f"{_session(chrome, view)}"
        '<p id="live" class="visually-hidden" role="status" aria-live="polite"></p>'
        f'<div id="memory" data-version="{nb.version}" data-state="{esc(nb.state)}">'
        f"{_notices(chrome, view)}{_jump(view)}{_filter(chrome, view)}"
        f"{_list(chrome, view, view.notes, 'Working notes', NOTES_CAPTION)}"
        f"{removed}"
        f"{_list(chrome, view, view.reviewed, 'Reviewed knowledge in view', REVIEWED_CAPTION)}"
        "</div>"
    )
    attrs = (
        f' data-notebook="{esc(nb.id)}"'
        f' data-state-url="{base}/panel/notebooks/{esc(nb.id)}/state"'
        f' data-events-url="{base}/v1/notebooks/{esc(nb.id)}/events"'
    )
    return page(chrome, f"Memory · {nb.document}", body, main_attrs=attrs)


def render_forget_confirmation(chrome: Chrome, notebook: Notebook) -> str:
    base = esc(chrome.base)
    panel = f"{base}/panel/notebooks/{esc(notebook.id)}"
    body = (
        '<section aria-labelledby="confirm-title" class="confirm">'
        '<h1 id="confirm-title">Forget this session\'s memory now?</h1>'
        f"<p>Document <strong>{esc(notebook.document)}</strong>, run"
        f" <strong>{esc(notebook.run)}</strong>. The agent's working notes, their log and"
        " history are deleted at once and cannot be brought back. The agent's later tool calls"
        " answer <code>purged</code>. Reviewed knowledge is not affected.</p>"
        f'<form method="post" action="{panel}/forget" class="actions">{hidden_csrf(chrome)}'
        '<input type="hidden" name="confirm" value="yes">'
        '<button type="submit" class="danger">Yes, forget now</button>'
        f' <a href="{panel}" class="button">Cancel, keep it</a></form></section>'
    )
    return page(chrome, "Forget now?", body)


def find_record(view: NotebookView, origin: str, name: str) -> RecordView:
    """The record ``name`` of the list ``origin`` on ``view`` (built with ``at=name``), or
    ``not_found``."""
    listed = view.lists().get(origin)
    for item in listed.items if listed is not None else ():
        if item.name == name:
            return item
    raise NotFound(f"this notebook has no {ORIGIN_WORDS.get(origin, 'record')} {name}")


def _back(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    """The way back to ``record`` on the page of its list that holds it."""
    return f"{view.url(base=chrome.base)}#{anchor(record.origin, record.name)}"


def _record_page(
    chrome: Chrome, view: NotebookView, record: RecordView, title: str, content: str
) -> str:
    back = esc(_back(chrome, view, record))
    body = (
        f'<p class="back"><a href="{back}">Back to the memory of {esc(view.notebook.document)}'
        f" ({esc(view.notebook.run)})</a></p>"
        f'<section class="page-of-record" aria-labelledby="record-page-title">'
        f'<h1 id="record-page-title">{title}</h1>{content}</section>'
    )
    return page(chrome, f"{record.name} · {view.notebook.document}", body)


def render_history(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    """Every version of one record, on a page of its own (the list loads it in place)."""
    count = len(record.history)
    noun = "version" if count == 1 else "versions"
    content = (
        f'<p class="meta">{ORIGIN_WORDS[record.origin]} · {count} {noun}, newest first</p>'
        f'<div id="history">{_history_items(record)}</div>'
    )
    title = f'History of <span class="name">{esc(record.name)}</span>'
    return _record_page(chrome, view, record, title, content)


def render_propose(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    """The form that proposes one working note for review, with the source it must cite."""
    blocked = _blocked(chrome, view, record)
    if view.notebook.state not in ("open", "expired"):
        blocked = '<p class="propose-blocked">This session is gone: nothing can be proposed.</p>'
    key = esc(anchor("note", record.name))
    form = (
        blocked
        if blocked is not None
        else f'<form method="post" action="{esc(_action(chrome, view, "proposals"))}"'
        f' class="stack">{hidden_csrf(chrome)}'
        f'<input type="hidden" name="name" value="{esc(record.name)}">'
        f'<p class="text">{esc(record.record.get("text", ""))}</p>'
        "<p>Reviewed knowledge needs a source: the document this note cites, the exact"
        " passage, and where it stands.</p>"
        f'<label for="{key}-document">Cited document</label>'
        f'<input id="{key}-document" name="document" required maxlength="200"'
        f' value="{esc(view.notebook.document)}">'
        f'<label for="{key}-passage">Exact passage</label>'
        f'<textarea id="{key}-passage" name="passage" required maxlength="4000" rows="4">'
        "\n</textarea>"
        f'<label for="{key}-locator">Locator (page, section or offset)</label>'
        f'<input id="{key}-locator" name="locator" required maxlength="200"'
        ' placeholder="p. 4, §2">'
        '<button type="submit">Propose for review</button></form>'
    )
    title = f'Propose <span class="name">{esc(record.name)}</span> for review'
    return _record_page(chrome, view, record, title, form)


def render_forget_note(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    """Forgetting one working note, confirmed: what it does, and the way back."""
    back = esc(_back(chrome, view, record))
    version = esc(record.record.get("version", ""))
    content = (
        f'<p class="text">{esc(record.record.get("text", ""))}</p>'
        f"<p>The note leaves the agent's memory now, as a change you make (memory version"
        f" {esc(view.notebook.version)} + 1): the agent no longer sees it, and a write the agent"
        f" based on an earlier version is refused as stale. Its versions (the last is version"
        f" {version}) stay in this session's log, listed under Removed notes, until the session"
        " is forgotten.</p>"
        f'<form method="post" action="{esc(_action(chrome, view, "notes/forget"))}"'
        f' class="actions">{hidden_csrf(chrome)}'
        f'<input type="hidden" name="name" value="{esc(record.name)}">'
        '<input type="hidden" name="confirm" value="yes">'
        '<button type="submit" class="danger">Yes, forget this note</button>'
        f' <a href="{back}" class="button">Cancel, keep it</a></form>'
    )
    title = f'Forget the note <span class="name">{esc(record.name)}</span>?'
    return _record_page(chrome, view, record, title, content)
