"""Previewing and installing packs into an owner's knowledge base (docs/packs.md).

``plan`` is pure: given a pack, the packs in force and the reviewed records in view, it says
what installing would add or change — new and removed kinds, added, removed and changed
fields, which changes are incompatible, conflicts with other installed packs, the version
order, and which reviewed records would no longer fit — without changing anything. Given the
pending proposals and the current notes of the owner's open notebooks, it also says which of
them pass review now and would not after the install, and why: those do not stop an install
(they are not knowledge yet), but the owner learns before, not after, that a proposal can then
only be rejected or accepted with edits that fit, and that a note can no longer be proposed.

``Profiles`` puts it to work over a ``KnowledgeStore``. An install is a new revision of the
owner's knowledge base, hash-chained like a review decision. Reinstalling the pack in force
(same digest) is a no-op; a downgrade, a changed pack under the same version, or any
incompatible change is refused unless forced; a conflict with another installed pack is
refused always. ``Profiles.check`` validates a record against the kinds in force.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from oh.core.canonical import canonical_text
from oh.core.clock import Clock, system_clock, utc_text
from oh.core.identifiers import check_identifier
from oh.core.records import Record
from oh.errors import AlreadyExists, InvalidArgument, OhError, StorageUnavailable
from oh.profiles.codecs import Codecs, default_codecs
from oh.profiles.packs import Kind, Pack, Schema, stored_pack
from oh.storage.base import KnowledgeStore, MemoryStore, PackInstall

__all__ = [
    "Action",
    "InstallResult",
    "InstalledPack",
    "LeftInvalid",
    "PackChange",
    "Preview",
    "Profiles",
    "plan",
]

Action = Literal["install", "upgrade", "downgrade", "replace", "none"]
MAX_LISTED_RECORDS = 50


@dataclass(frozen=True, slots=True)
class InstalledPack:
    """A pack in force in an owner's knowledge base, and the revision that installed it."""

    pack: Pack
    revision: int
    installed_by: str
    installed_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            **self.pack.summary(),
            "revision": self.revision,
            "installed_by": self.installed_by,
            "installed_at": self.installed_at,
        }


@dataclass(frozen=True, slots=True)
class PackChange:
    """One difference between the installed version of a pack and the one previewed."""

    change: str  # kind_added | kind_removed | field_added | field_removed | field_required
    #              | field_optional | codec_changed
    kind: str
    field: str | None
    compatible: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "kind": self.kind,
            "field": self.field,
            "compatible": self.compatible,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class LeftInvalid:
    """A pending proposal (``where`` is its id) or a current note (``where`` is its notebook)
    that passes review now and would not once the pack is installed, and why."""

    where: str
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Preview:
    """What installing ``pack`` would do. Nothing was changed to compute it."""

    pack: Pack
    installed: InstalledPack | None  # the version of this pack in force, if any
    action: Action
    changes: tuple[PackChange, ...]
    conflicts: tuple[str, ...]  # kinds another installed pack defines differently
    records_checked: int  # reviewed records of the pack's kinds, checked against it
    records_invalid: tuple[tuple[str, str], ...]  # (name, why) of those that would not fit
    proposals_invalid: tuple[LeftInvalid, ...] = ()  # pending proposals the install would strand
    notes_invalid: tuple[LeftInvalid, ...] = ()  # current notes it would make unproposable

    @property
    def incompatible(self) -> tuple[str, ...]:
        """Why installing needs ``force``: each reason in words."""
        reasons = [change.detail for change in self.changes if not change.compatible]
        if self.action == "downgrade":
            assert self.installed is not None
            reasons.insert(0, f"{self.installed.pack.version} is newer than {self.pack.version}")
        if self.action == "replace":
            reasons.insert(0, f"version {self.pack.version} is installed with other content")
        if self.records_invalid:
            reasons.append(
                f"{len(self.records_invalid)} reviewed record(s) would not fit the new kinds"
            )
        return tuple(reasons)

    @property
    def needs_force(self) -> bool:
        return bool(self.incompatible)

    @property
    def can_install(self) -> bool:
        """False when a conflict with another installed pack forbids it, force or not."""
        return not self.conflicts

    def to_json(self) -> dict[str, Any]:
        return {
            "pack": self.pack.summary(),
            "installed": None if self.installed is None else self.installed.to_json(),
            "action": self.action,
            "changes": [change.to_json() for change in self.changes],
            "conflicts": list(self.conflicts),
            "records_checked": self.records_checked,
            "records_invalid": [
                {"name": name, "reason": reason}
                for name, reason in self.records_invalid[:MAX_LISTED_RECORDS]
            ],
            "records_invalid_count": len(self.records_invalid),
            "proposals_invalid": [
                {"proposal_id": item.where, "name": item.name, "reason": item.reason}
                for item in self.proposals_invalid[:MAX_LISTED_RECORDS]
            ],
            "proposals_invalid_count": len(self.proposals_invalid),
            "notes_invalid": [
                {"notebook": item.where, "name": item.name, "reason": item.reason}
                for item in self.notes_invalid[:MAX_LISTED_RECORDS]
            ],
            "notes_invalid_count": len(self.notes_invalid),
            "incompatible": list(self.incompatible),
            "needs_force": self.needs_force,
            "can_install": self.can_install,
        }


@dataclass(frozen=True, slots=True)
class InstallResult:
    preview: Preview
    installed: InstalledPack  # the pack in force afterwards
    changed: bool  # False when the pack was in force already (no new revision)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "installed" if self.changed else "unchanged",
            "revision": self.installed.revision,
            "pack": self.installed.to_json(),
            "preview": self.preview.to_json(),
        }


def _kind_changes(old: Kind, new: Kind) -> list[PackChange]:
    changes: list[PackChange] = []
    kind = new.name
    for name in sorted(set(old.fields) | set(new.fields)):
        before, after = old.fields.get(name), new.fields.get(name)
        if before is None:
            assert after is not None
            changes.append(
                PackChange(
                    "field_added",
                    kind,
                    name,
                    not after.required,
                    f"{kind}.{name} is added"
                    + (" as required, which existing records lack" if after.required else ""),
                )
            )
        elif after is None:
            changes.append(
                PackChange(
                    "field_removed",
                    kind,
                    name,
                    False,
                    f"{kind}.{name} is removed, so records that have it would be refused",
                )
            )
        else:
            if after.required and not before.required:
                changes.append(
                    PackChange(
                        "field_required", kind, name, False, f"{kind}.{name} becomes required"
                    )
                )
            elif before.required and not after.required:
                changes.append(
                    PackChange(
                        "field_optional", kind, name, True, f"{kind}.{name} becomes optional"
                    )
                )
            if after.codec.spec() != before.codec.spec():
                widens = after.codec.widens(before.codec)
                changes.append(
                    PackChange(
                        "codec_changed",
                        kind,
                        name,
                        widens,
                        f"{kind}.{name} changes from {canonical_text(before.codec.spec())}"
                        f" to {canonical_text(after.codec.spec())}"
                        + ("" if widens else ", which some values that fit now would not"),
                    )
                )
    return changes


def _left_invalid(
    before: Schema, after: Schema, candidates: Iterable[tuple[str, Record]]
) -> tuple[LeftInvalid, ...]:
    """The ``(where, record)`` candidates that pass review under ``before`` and not ``after``."""
    out = []
    for where, record in candidates:
        try:
            before.check(record, reviewed=True)
        except InvalidArgument:
            continue  # not reviewable now either: the install changes nothing for it
        try:
            after.check(record, reviewed=True)
        except InvalidArgument as exc:
            out.append(LeftInvalid(where, record.name, exc.message))
    return tuple(out)


def plan(
    pack: Pack,
    installed: Sequence[InstalledPack],
    records: Iterable[Record] = (),
    *,
    proposals: Iterable[tuple[str, Record]] = (),
    notes: Iterable[tuple[str, Record]] = (),
) -> Preview:
    """What installing ``pack`` over the packs in force (``installed``) would do, which of
    the reviewed ``records`` in view would no longer fit, and which pending ``proposals``
    (``(proposal id, record)``) and current ``notes`` (``(notebook id, record)``) would pass
    review now but not after the install."""
    current = next((item for item in installed if item.pack.name == pack.name), None)
    action: Action
    changes: list[PackChange] = []
    if current is None:
        action = "install"
        changes = [
            PackChange("kind_added", name, None, True, f"{name} is added")
            for name in sorted(pack.kinds)
        ]
    elif current.pack.digest == pack.digest:
        action = "none"
    else:
        old, new = current.pack, pack
        if new.version.precedence() > old.version.precedence():
            action = "upgrade"
        elif new.version.precedence() < old.version.precedence():
            action = "downgrade"
        else:
            action = "replace"
        for name in sorted(set(old.kinds) | set(new.kinds)):
            if name not in old.kinds:
                changes.append(PackChange("kind_added", name, None, True, f"{name} is added"))
            elif name not in new.kinds:
                changes.append(
                    PackChange(
                        "kind_removed",
                        name,
                        None,
                        False,
                        f"{name} is removed, so its records would no longer be checked",
                    )
                )
            else:
                changes.extend(_kind_changes(old.kinds[name], new.kinds[name]))
    conflicts = []
    for other in installed:
        if other.pack.name == pack.name:
            continue
        for name, kind in pack.kinds.items():
            theirs = other.pack.kinds.get(name)
            if theirs is not None and theirs.signature() != kind.signature():
                conflicts.append(
                    f"{name} is defined differently by the installed pack"
                    f" {other.pack.name} {other.pack.version}"
                )
    checked = 0
    invalid: list[tuple[str, str]] = []
    if action != "none":
        schema = Schema(dict(pack.kinds), (pack,))
        for record in records:
            if record.kind in pack.kinds:
                checked += 1
                try:
                    schema.check(record)
                except InvalidArgument as exc:
                    invalid.append((record.name, exc.message))
    stranded: tuple[LeftInvalid, ...] = ()
    unproposable: tuple[LeftInvalid, ...] = ()
    if action != "none" and not conflicts:
        before = Schema.of(item.pack for item in installed)
        after = Schema.of([*(i.pack for i in installed if i.pack.name != pack.name), pack])
        stranded = _left_invalid(before, after, proposals)
        unproposable = _left_invalid(before, after, notes)
    return Preview(
        pack,
        current,
        action,
        tuple(changes),
        tuple(conflicts),
        checked,
        tuple(invalid),
        stranded,
        unproposable,
    )


def _check_owner(owner: Any) -> str:
    return check_identifier(owner, "owner")


class Profiles:
    """The profiles installed in each owner's knowledge base: preview, install, list, check.

    ``codecs`` is the registry packs are read with (the built-ins by default); a host that
    registers its own codecs passes its registry here. Schemas are cached by the digests of
    the packs in force, so ``check`` costs one small query and no parsing while nothing is
    installed.
    """

    CACHE_SIZE = 64

    def __init__(
        self,
        store: KnowledgeStore,
        *,
        codecs: Codecs | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.store = store
        self.codecs = codecs or default_codecs()
        self.clock = clock
        self._lock = threading.Lock()
        self._packs: OrderedDict[str, Pack] = OrderedDict()  # by digest
        self._schemas: OrderedDict[tuple[str, ...], Schema] = OrderedDict()  # by digests

    def _pack(self, row: PackInstall) -> Pack:
        with self._lock:
            pack = self._packs.get(row.digest)
        # Equal digests mean equal content, unless the stored copy was damaged: compare.
        if pack is None or pack.content != row.content:
            pack = stored_pack(row.content, row.digest, codecs=self.codecs)
            with self._lock:
                self._packs[row.digest] = pack
                while len(self._packs) > self.CACHE_SIZE:
                    self._packs.popitem(last=False)
        return pack

    def _installed(self, rows: Sequence[PackInstall]) -> list[InstalledPack]:
        return [
            InstalledPack(self._pack(row), row.revision, row.installed_by, row.installed_at)
            for row in rows
        ]

    def installed(self, owner: str, revision: int | None = None) -> list[InstalledPack]:
        """The packs in force in ``owner``'s knowledge base at ``revision`` (default latest)."""
        return self._installed(self.store.installed_packs(_check_owner(owner), revision))

    def schema(self, owner: str, revision: int | None = None) -> Schema:
        """The kinds in force for ``owner``: what ``check`` validates against."""
        rows = self.store.installed_packs(_check_owner(owner), revision)
        key = tuple(row.digest for row in rows)
        with self._lock:
            schema = self._schemas.get(key)
        if schema is None or any(
            pack.content != row.content for pack, row in zip(schema.packs, rows, strict=True)
        ):
            schema = Schema.of(item.pack for item in self._installed(rows))
            with self._lock:
                self._schemas[key] = schema
                while len(self._schemas) > self.CACHE_SIZE:
                    self._schemas.popitem(last=False)
        return schema

    def check(self, owner: str, record: Record, *, reviewed: bool = False) -> Record:
        """``record`` with canonical fields if its kind belongs to an installed profile of
        ``owner``; see ``Schema.check``."""
        return self.schema(owner).check(record, reviewed=reviewed)

    def _records(self, owner: str) -> list[Record]:
        latest = self.store.latest_revision(owner)
        return [
            Record.parse(item.verified_content()) for item in self.store.records_at(owner, latest)
        ]

    def _proposals(self, owner: str) -> list[tuple[str, Record]]:
        out = []
        for proposal in self.store.proposals(owner, "pending"):
            try:
                out.append((proposal.id, Record.parse(proposal.verified_record())))
            except OhError:
                continue  # a damaged proposal cannot be accepted anyway; verify reports it
        return out

    @staticmethod
    def _notes(owner: str, memory: MemoryStore | None) -> list[tuple[str, Record]]:
        """The current notes of ``owner``'s notebooks that can still be proposed (open, or
        expired and not yet purged). Walks every notebook: a preview is rare, a listing by
        owner is not part of the storage protocol."""
        if memory is None:
            return []
        out = []
        for notebook_id in memory.notebook_ids():
            try:
                notebook = memory.notebook(notebook_id)
                if notebook.owner != owner or notebook.state not in ("open", "expired"):
                    continue
                stored = memory.records(notebook_id)
            except OhError:
                continue  # forgotten in the meantime
            for note in stored:
                try:
                    out.append((notebook_id, Record.parse(note.verified_content())))
                except OhError:
                    continue  # a damaged note cannot be proposed anyway; verify reports it
        return out

    def preview(self, owner: str, pack: Pack, *, memory: MemoryStore | None = None) -> Preview:
        """What installing ``pack`` into ``owner``'s knowledge base would do; with ``memory``
        (the memory database) it also checks the current notes of the owner's notebooks."""
        installed = self.installed(owner)
        return plan(
            pack,
            installed,
            self._records(owner),
            proposals=self._proposals(owner),
            notes=self._notes(owner, memory),
        )

    def install(
        self,
        owner: str,
        pack: Pack,
        *,
        force: bool = False,
        by: str | None = None,
        memory: MemoryStore | None = None,
    ) -> InstallResult:
        """Install ``pack`` as a new revision of ``owner``'s knowledge base.

        ``already_exists`` (409) when another installed pack defines one of its kinds
        differently, or — unless ``force`` — when the install is incompatible (see
        ``Preview.incompatible``). Reinstalling the pack in force changes nothing. Pending
        proposals and notes the install leaves unreviewable do not stop it; the result's
        preview lists them (the notes only with ``memory``).
        """
        owner = _check_owner(owner)
        made_by = owner if by is None else _check_owner(by)
        notes = self._notes(owner, memory)
        # The store installs only if the packs in force are still those planned against, so
        # a concurrent install makes this plan again rather than act on a stale preview.
        for _ in range(8):
            installed = self.installed(owner)
            preview = plan(
                pack,
                installed,
                self._records(owner),
                proposals=self._proposals(owner),
                notes=notes,
            )
            if preview.action == "none":
                assert preview.installed is not None
                return InstallResult(preview, preview.installed, changed=False)
            if preview.conflicts:
                raise AlreadyExists(
                    f"{pack.name} {pack.version} conflicts with installed packs: "
                    + "; ".join(preview.conflicts),
                    conflicts=list(preview.conflicts),
                )
            if preview.needs_force and not force:
                raise AlreadyExists(
                    f"installing {pack.name} {pack.version} needs force: "
                    + "; ".join(preview.incompatible),
                    incompatible=list(preview.incompatible),
                )
            row = self.store.install_pack(
                owner,
                name=pack.name,
                version=str(pack.version),
                digest=pack.digest,
                content=pack.content,
                expected={item.pack.name: item.pack.digest for item in installed},
                made_by=made_by,
                made_at=utc_text(self.clock()),
            )
            if row is not None:
                done = InstalledPack(pack, row.revision, row.installed_by, row.installed_at)
                return InstallResult(preview, done, changed=True)
        raise StorageUnavailable("the installed packs kept changing during the install; retry")
