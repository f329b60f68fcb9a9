"""Reviewed knowledge verified: each owner's revision chain, every reviewed version, every
row's MAC, and the recall vectors of reviewed records (``oh.verify``)."""

from __future__ import annotations

from oh.core.canonical import (
    matches_digest,
)
from oh.core.reviewed import RevisionChain
from oh.core.seals import vector_seal
from oh.errors import (
    InvalidArgument,
    OhError,
)
from oh.keys.macs import AuthenticatedKnowledge, KnowledgeMacs, refusal
from oh.storage.base import KnowledgeStore, MemoryStore
from oh.verify.report import Problem, VerifyReport, is_canonical, unchecked

__all__ = ["verify_knowledge", "verify_reviewed_vectors"]


def verify_reviewed_vectors(
    memory: MemoryStore, knowledge: KnowledgeStore, report: VerifyReport | None = None
) -> VerifyReport:
    """Check every reviewed-record vector: it matches its seal (the vector embedded for that
    digest, by that model, for that owner) and indexes a version its owner's review decided."""
    report = report if report is not None else VerifyReport()
    decided: dict[str, set[str]] = {}
    for owner, model_id, digest, vector, seal, _ in memory.reviewed_vector_rows():
        where = f"knowledge:{owner}"
        if (
            type(owner) is not str
            or type(model_id) is not str
            or type(digest) is not str
            or not isinstance(vector, (bytes, bytearray, memoryview))
        ):
            report.problems.append(
                Problem(where, "vector", "a reviewed-record vector holds a value of the wrong type")
            )
            continue
        if seal != vector_seal("reviewed", owner, model_id, digest, vector):
            report.problems.append(
                Problem(
                    where,
                    "vector",
                    f"the recall vector of reviewed digest {digest[:16]} ({model_id}) was"
                    " altered: it does not match its seal",
                )
            )
        if owner not in decided:
            decided[owner] = {
                e.digest
                for e in unchecked(knowledge).revisions(owner)
                if e.what == "decision" and e.digest
            }
        if digest not in decided[owner]:
            report.problems.append(
                Problem(
                    where,
                    "vector",
                    f"a recall vector ({model_id}) indexes digest {digest[:16]}, which no"
                    " decision of this knowledge base accepted",
                )
            )
    return report


def _check_macs(store: KnowledgeStore, macs: KnowledgeMacs, report: VerifyReport) -> None:
    """One ``mac`` problem for each knowledge row whose MAC is missing or wrong."""
    if not isinstance(store, AuthenticatedKnowledge):
        raise InvalidArgument(f"a {type(store).__name__} keeps no MACs to verify")
    for kind, values, mac in store.mac_rows():
        why = macs.problem(kind, values, mac)
        if why is not None:
            owner = dict(zip(kind.columns, values, strict=True)).get("owner")
            report.problems.append(Problem(f"knowledge:{owner}", "mac", refusal(kind, values, why)))


def verify_knowledge(
    store: KnowledgeStore, report: VerifyReport | None = None, *, macs: KnowledgeMacs | None = None
) -> VerifyReport:
    """Check each owner's revision chain, and that every reviewed version matches its digest,
    is canonical, and is the one its revision entry names. With ``macs`` (by default the
    store's own, if it was opened with MACs), also every row's MAC (docs/keys.md): each reviewed
    version, proposal, revision entry and pack install whose MAC is missing or wrong is a
    ``mac`` problem. The other checks read the rows as stored, so a refused row is reported,
    never a reason to stop."""
    report = report if report is not None else VerifyReport()
    if macs is None and isinstance(store, AuthenticatedKnowledge):
        macs = store.macs
    if macs is not None:
        _check_macs(store, macs, report)
    store = unchecked(store)
    for owner in store.owners():
        where = f"knowledge:{owner}"

        def problem(what: str, detail: str, where: str = where) -> None:
            report.problems.append(Problem(where, what, detail))

        chain = RevisionChain(owner)
        entries = store.revisions(owner)
        for entry in entries:
            report.entries += 1
            broken = chain.follow(entry)
            if broken is None:
                continue
            if broken.misplaced:
                problem(
                    "version", f"revision {entry.revision} found where {broken.expected} belongs"
                )
            if broken.detached:
                problem("chain", f"revision {entry.revision} does not follow the one before it")
            if broken.altered:
                problem("chain", f"revision {entry.revision} was altered")
        latest, head = store.head(owner)
        if latest != chain.revision or head != chain.head:
            problem("head", f"knowledge base says revision {latest}; entries end at {len(entries)}")
        named = {(e.name, e.revision): e.digest for e in entries if e.what == "decision" and e.name}
        for name in sorted({name for name, _ in named}):
            try:
                versions = store.history(owner, name)
            except (OhError, ValueError, TypeError, KeyError) as exc:
                problem("damaged", f"the versions of {name} cannot be read: {exc}")
                continue
            for version in versions:
                report.records += 1
                if not matches_digest(version.content, version.digest):
                    problem("digest", f"{name} at revision {version.revision} does not match")
                elif not is_canonical(version.content):
                    problem("canonical", f"{name} at revision {version.revision} is not canonical")
                if named.get((name, version.revision)) != version.digest:
                    problem(
                        "drift", f"{name} at revision {version.revision} is not what was decided"
                    )
            # A version its revision entry names but the database no longer holds: what no
            # row's MAC can show, since the row is gone.
            held = {version.revision for version in versions}
            for revision in sorted(r for n, r in named if n == name and r not in held):
                problem("drift", f"{name} at revision {revision} was decided but is missing")
    return report
