"""``Client``: Oh's HTTP API as blocking method calls, on ``httpx.Client``."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, cast

import httpx

from oh.client import _wire as wire
from oh.client._types import (
    Bootstrap,
    DecisionMade,
    Document,
    Explanation,
    Forgotten,
    ForgottenNote,
    FullRecord,
    Health,
    KnowledgeAt,
    ListedNotebook,
    MemoryCard,
    NotebookObject,
    NotebookPage,
    Opened,
    ProposalMade,
    QueryAnswer,
    Recalled,
    Records,
    Remembered,
    RemovedDocument,
)
from oh.client._wire import DEFAULT_TIMEOUT, EVENTS_READ_TIMEOUT, Call, Retry
from oh.errors import InvalidArgument, OhError

__all__ = ["Client", "MemoryCards"]


class Client:
    """A blocking client of one ``oh serve``, speaking with one token.

    ``token`` is an owner token (``oho_...``) for the owner's routes or an agent token
    (``oha_...``) for one notebook's tools and bootstrap; ``/healthz`` and ``/metrics`` need
    none. ``timeout`` (seconds, or an ``httpx.Timeout``) applies to every request. ``retry``
    says how often a call that failed on the way is tried again (only what is safe to resend).
    A host that brings its own ``httpx.Client`` passes it as ``http`` (the client then never
    closes it), or only a ``transport``. Every failure is an ``oh.errors.OhError``.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: Retry | None = None,
        http: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if http is not None and transport is not None:
            raise InvalidArgument("pass an httpx.Client or a transport, not both")
        self.base_url = wire.base_url(base_url)
        self._token = wire.token(token)
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.retry = Retry() if retry is None else retry
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client(transport=transport)

    @property
    def token(self) -> str | None:
        """The token this client speaks with."""
        return self._token

    def with_token(self, token: str | None) -> Client:
        """A client of the same server and connections speaking with another token (an agent
        token from ``open_notebook``, say). Closing it leaves this one open; closing this one
        closes the connections both use."""
        return Client(
            self.base_url, token, timeout=self._timeout, retry=self.retry, http=self._http
        )

    # -- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections, unless they belong to an ``httpx.Client`` passed in."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- the one way a request goes out ---------------------------------------------------

    def _send(self, call: Call) -> Any:
        attempt = 1
        url = self.base_url + call.path
        while True:
            cause: Exception | None = None
            try:
                response = self._http.request(
                    call.method,
                    url,
                    params=call.params,
                    content=call.body,
                    headers=wire.headers(self._token, call),
                    timeout=self._timeout,
                )
            except httpx.RequestError as exc:
                error, again = wire.failed(call, url, exc)
                cause = exc
            else:
                try:
                    return wire.answer(call, response.status_code, response.content)
                except OhError as exc:
                    error, again = exc, wire.transient(call, exc)
            if not again or attempt >= self.retry.attempts:
                raise error from cause
            time.sleep(self.retry.delay(attempt))
            attempt += 1

    # -- documents ------------------------------------------------------------------------

    def put_document(self, document: str) -> Document:
        """Register ``document`` to the owner (again: no change). Another owner's: forbidden."""
        return cast(Document, self._send(wire.put_document(document)))

    def delete_document(self, document: str) -> RemovedDocument:
        """Remove ``document`` and forget every notebook on it."""
        return cast(RemovedDocument, self._send(wire.delete_document(document)))

    # -- notebooks ------------------------------------------------------------------------

    def open_notebook(
        self,
        document: str,
        run: str,
        *,
        pin: int | str | None = None,
        run_kind: str | None = None,
    ) -> Opened:
        """Open the run's notebook on ``document``, or answer the one it has open already.
        ``pin``: ``"latest"`` (the server's default) or a knowledge revision. A run whose
        notebook was forgotten: purged."""
        return cast(Opened, self._send(wire.open_notebook(document, run, pin, run_kind)))

    def list_notebooks(
        self,
        *,
        document: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> NotebookPage:
        """One page of the owner's notebooks, newest first; pass its ``next_cursor`` as
        ``cursor`` (with the same filters) for the next."""
        return cast(NotebookPage, self._send(wire.list_notebooks(document, state, limit, cursor)))

    def iter_notebooks(
        self, *, document: str | None = None, state: str | None = None, page_size: int | None = None
    ) -> Iterator[ListedNotebook]:
        """Every notebook of the owner, newest first, fetched a page at a time."""
        cursor: str | None = None
        while True:
            page = self.list_notebooks(
                document=document, state=state, limit=page_size, cursor=cursor
            )
            yield from page["notebooks"]
            cursor = page["next_cursor"]
            if cursor is None:
                return

    def get_notebook(self, notebook: str) -> NotebookObject:
        """The notebook object; another owner's is not_found."""
        return cast(NotebookObject, self._send(wire.get_notebook(notebook)))

    def forget_notebook(self, notebook: str) -> Forgotten:
        """Forget the notebook now; forgotten already: purged."""
        return cast(Forgotten, self._send(wire.forget_notebook(notebook)))

    def forget_note(self, notebook: str, name: str) -> ForgottenNote:
        """Remove one working note, as a change the owner authors; not a current note:
        not_found."""
        return cast(ForgottenNote, self._send(wire.forget_note(notebook, name)))

    def records(self, notebook: str) -> Records:
        """The notebook's full records: each note with its digest and stamps, and the
        reviewed records in its view."""
        return cast(Records, self._send(wire.records(notebook)))

    def events(self, notebook: str, *, read_timeout: float = EVENTS_READ_TIMEOUT) -> MemoryCards:
        """The notebook's memory cards as they happen: ``with client.events(id) as cards:``
        then iterate. Once the ``with`` block is entered, every card that follows is
        delivered."""
        return MemoryCards(self, wire.events(notebook), read_timeout)

    # -- the agent's tools ----------------------------------------------------------------

    def bootstrap(self, notebook: str) -> Bootstrap:
        """What the agent sees when its tools load."""
        return cast(Bootstrap, self._send(wire.bootstrap(notebook)))

    def remember(
        self,
        notebook: str,
        changes: Sequence[Mapping[str, Any]],
        *,
        based_on: int,
        request_id: str | None = None,
    ) -> Remembered:
        """Write ``changes`` on version ``based_on``, all or nothing. A stale ``based_on`` is
        the refusal result, not an error. Without ``request_id`` the client makes one, and a
        retry sends the same one, so the write is applied at most once."""
        return cast(Remembered, self._send(wire.remember(notebook, changes, based_on, request_id)))

    def query(
        self,
        notebook: str,
        question: str,
        *,
        name: str | None = None,
        kind: str | None = None,
        since: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> QueryAnswer:
        """Ask one question of the menu (docs/tools.md); ``cursor`` continues an answer."""
        arguments = {
            "question": question,
            **wire.given(name=name, kind=kind, since=since, limit=limit, cursor=cursor),
        }
        return cast(QueryAnswer, self._send(wire.tool(notebook, "query", arguments)))

    def read(
        self, notebook: str, name: str, *, digest: str | None = None, origin: str | None = None
    ) -> FullRecord:
        """One record in full; with ``digest`` the answer says whether it ``changed``."""
        arguments = {"name": name, **wire.given(digest=digest, origin=origin)}
        return cast(FullRecord, self._send(wire.tool(notebook, "read", arguments)))

    def explain(self, notebook: str, token: str, row: int) -> Explanation:
        """Why row ``row`` of the answer that ``token`` came with is there."""
        arguments = {"token": token, "row": row}
        return cast(Explanation, self._send(wire.tool(notebook, "explain", arguments)))

    def recall(self, notebook: str, text: str, *, limit: int | None = None) -> Recalled:
        """Records whose meaning is near ``text`` (no rows in shadow mode)."""
        arguments = {"text": text, **wire.given(limit=limit)}
        return cast(Recalled, self._send(wire.tool(notebook, "recall", arguments)))

    def call_tool(self, notebook: str, name: str, arguments: Any) -> dict[str, Any]:
        """Any tool by name, with its arguments as a JSON object; a ``remember`` without a
        request id gets one, as ``remember`` does."""
        return cast(dict[str, Any], self._send(wire.tool(notebook, name, arguments)))

    # -- knowledge and review -------------------------------------------------------------

    def knowledge(self, revision: int | None = None) -> KnowledgeAt:
        """The owner's reviewed records at ``revision`` (the latest when left out)."""
        return cast(KnowledgeAt, self._send(wire.knowledge(revision)))

    def propose(
        self,
        *,
        source: Mapping[str, Any],
        notebook: str | None = None,
        name: str | None = None,
        record: Mapping[str, Any] | None = None,
    ) -> ProposalMade:
        """Propose a note (``notebook`` and ``name``) or a new ``record`` for review, citing
        ``source`` (``document``, ``passage``, ``locator``)."""
        body = {"source": source, **wire.given(notebook=notebook, name=name, record=record)}
        return cast(ProposalMade, self._send(wire.propose(body)))

    def decide(
        self,
        proposal_id: str,
        decision: str,
        reason: str,
        *,
        record: Mapping[str, Any] | None = None,
    ) -> DecisionMade:
        """``"accept"`` (with an edited ``record``, optionally) or ``"reject"`` a pending
        proposal; decided already: already_exists."""
        body = {"decision": decision, "reason": reason, **wire.given(record=record)}
        return cast(DecisionMade, self._send(wire.decide(proposal_id, body)))

    # -- operations -----------------------------------------------------------------------

    def healthz(self) -> Health:
        """``{"status": "ok", "version"}`` while the server runs."""
        return cast(Health, self._send(wire.HEALTHZ))

    def metrics(self) -> str:
        """The Prometheus text of ``/metrics``."""
        return cast(str, self._send(wire.METRICS))

    def openapi(self) -> dict[str, Any]:
        """The served OpenAPI document."""
        return cast(dict[str, Any], self._send(wire.OPENAPI))


class MemoryCards:
    """The memory cards of one notebook as a server-sent event stream: a context manager and an
    iterator of ``MemoryCard``. Iterating waits for the next card; ``close()`` ends the stream."""

    def __init__(self, client: Client, call: Call, read_timeout: float) -> None:
        self._client = client
        self._call = call
        t = client._timeout
        self._timeout = httpx.Timeout(
            connect=t.connect, read=read_timeout, write=t.write, pool=t.pool
        )
        self._response: httpx.Response | None = None

    def open(self) -> MemoryCards:
        """Start the stream (``with`` and iterating do it too): once it returns, the server is
        sending every card from now on."""
        if self._response is not None:
            return self
        client, call = self._client, self._call
        url = client.base_url + call.path
        attempt = 1
        while True:
            cause: Exception | None = None
            try:
                request = client._http.build_request(
                    "GET",
                    url,
                    headers=wire.headers(client._token, call, accept="text/event-stream"),
                    timeout=self._timeout,
                )
                response = client._http.send(request, stream=True)
            except httpx.RequestError as exc:
                error, again = wire.failed(call, url, exc)
                cause = exc
            else:
                if 200 <= response.status_code < 300:
                    self._response = response
                    return self
                try:
                    response.read()
                except httpx.RequestError as exc:
                    error, again = wire.failed(call, url, exc)
                    cause = exc
                else:
                    error = wire.refusal(response.status_code, response.content)
                    again = wire.transient(call, error)
                finally:
                    response.close()
            if not again or attempt >= client.retry.attempts:
                raise error from cause
            time.sleep(client.retry.delay(attempt))
            attempt += 1

    def __iter__(self) -> Iterator[MemoryCard]:
        response = self.open()._response
        assert response is not None
        reader = wire.EventReader()
        try:
            for line in response.iter_lines():
                event = reader.line(line)
                if event is not None:
                    card = wire.memory_card(*event)
                    if card is not None:
                        yield cast(MemoryCard, card)
        except httpx.RequestError as exc:
            raise wire.failed(self._call, str(response.url), exc)[0] from exc
        except httpx.StreamClosed:
            return

    def close(self) -> None:
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> MemoryCards:
        return self.open()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
