"""A stateful model test: the store against a plain in-memory model of docs/design.md.

Random remember / identical retry / reused id / stale write / invalid batch / reopen steps;
after every step the store equals the model and a replay of the log equals the store.
``notebook_machine(open_store)`` builds the machine for any backend.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from oh.core.changes import Applied, Refused, parse_changes
from oh.core.records import Record
from oh.errors import AlreadyExists, NotFound, RequestIdReused
from oh.storage.base import MemoryStore
from oh.testing.memory_store import T0, open_notebook
from oh.verify import replay, verify_notebook

__all__ = ["notebook_machine"]

NAMES = [f"note:n{i}" for i in range(6)] + ["lead:survey", "finding:threshold"]
names = st.sampled_from(NAMES)
texts = st.text(st.characters(codec="utf-8"), max_size=40)


@dataclass
class Model:
    version: int = 0
    records: dict[str, str] = field(default_factory=dict)  # name -> digest
    requests: dict[str, tuple[int, list[Any], dict[str, Any]]] = field(default_factory=dict)


def _change_strategy(model: Model) -> st.SearchStrategy[dict[str, Any]]:
    def make(op: str, name: str, text: str, links: list[str]) -> dict[str, Any]:
        if op == "remove":
            return {"op": "remove", "name": name}
        links = [link for link in links if link != name]
        return {"op": op, "record": {"name": name, "text": text, "depends_on": links}}

    return st.builds(
        make,
        st.sampled_from(["add", "replace", "remove"]),
        names,
        texts,
        st.lists(names, unique=True, max_size=3),
    )


def notebook_machine(open_store: Callable[[], MemoryStore]) -> type[RuleBasedStateMachine]:
    """Build the machine class; ``open_store`` opens a store on one persistent database."""

    class NotebookMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.store = open_store()
            self.notebook = open_notebook(self.store, run=f"run-{secrets.token_hex(8)}")
            self.model = Model()
            self.counter = 0

        def teardown(self) -> None:
            self.store.close()

        def _fresh_id(self) -> str:
            self.counter += 1
            return f"r-{self.counter}"

        def _expected(self, changes: list[dict[str, Any]]) -> str | None:
            """What the model says about a batch: None if it applies, else the error code."""
            present = set(self.model.records)
            for change in changes:
                name = change["record"]["name"] if "record" in change else change["name"]
                if change["op"] == "add" and name in present:
                    return "already_exists"
                if change["op"] != "add" and name not in present:
                    return "not_found"
            return None

        def _call(self, based_on: int, request_id: str, changes: list[dict[str, Any]]) -> Any:
            return self.store.remember(
                self.notebook,
                based_on=based_on,
                request_id=request_id,
                changes=parse_changes(changes),
                author="agent:model",
                now=T0,
            )

        @rule(data=st.data())
        def remember_fresh(self, data: st.DataObject) -> None:
            batch = data.draw(
                st.lists(
                    _change_strategy(self.model),
                    min_size=1,
                    max_size=5,
                    unique_by=lambda c: c["record"]["name"] if "record" in c else c["name"],
                )
            )
            stale = data.draw(st.booleans()) and self.model.version > 0
            based_on = self.model.version - 1 if stale else self.model.version
            request_id = self._fresh_id()
            expected = self._expected(batch)
            code: str | None = None
            try:
                result = self._call(based_on, request_id, batch)
            except (AlreadyExists, NotFound) as exc:
                code = exc.code
            if code is not None:
                assert not stale
                assert code == expected
                return
            if stale:
                assert result == Refused(current_version=self.model.version)
                return
            assert expected is None and isinstance(result, Applied)
            self.model.version += 1
            assert result.version == self.model.version
            for change in batch:
                if change["op"] == "remove":
                    self.model.records.pop(change["name"])
                else:
                    self.model.records[change["record"]["name"]] = Record.parse(
                        change["record"]
                    ).digest
            self.model.requests[request_id] = (based_on, batch, result.to_json())

        @precondition(lambda self: bool(self.model.requests))
        @rule(data=st.data())
        def retry_identically(self, data: st.DataObject) -> None:
            request_id = data.draw(st.sampled_from(sorted(self.model.requests)))
            based_on, batch, original = self.model.requests[request_id]
            assert self._call(based_on, request_id, batch).to_json() == original

        @precondition(lambda self: bool(self.model.requests))
        @rule(data=st.data(), text=texts)
        def reuse_a_request_id(self, data: st.DataObject, text: str) -> None:
            request_id = data.draw(st.sampled_from(sorted(self.model.requests)))
            based_on = self.model.requests[request_id][0]
            other = [{"op": "add", "record": {"name": "note:other", "text": text}}]
            try:
                self._call(based_on, request_id, other)
            except RequestIdReused:
                return
            raise AssertionError("a reused request id with another payload was accepted")

        @rule()
        def reopen(self) -> None:
            self.store.close()
            self.store = open_store()

        @invariant()
        def store_equals_model(self) -> None:
            records = self.store.records(self.notebook)
            assert {r.name: r.digest for r in records} == self.model.records
            assert self.store.notebook(self.notebook).version == self.model.version

        @invariant()
        def replay_equals_store(self) -> None:
            state = replay(self.store.log(self.notebook))
            assert sorted(state.values(), key=lambda r: r.name) == self.store.records(self.notebook)

        @invariant()
        def verify_passes(self) -> None:
            assert verify_notebook(self.store, self.notebook).ok

    return NotebookMachine
