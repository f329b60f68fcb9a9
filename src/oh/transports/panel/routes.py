"""The panel's routes: sign-in, the Memory panel of a notebook, forget, propose, review.

Pages are server-rendered HTML; the only script (``static/panel.js``) adds the live countdown
and live updates. Pages authenticate with the panel's session cookie (``sessions``); every
POST also carries the session's CSRF token. Another owner's notebook is ``not_found``, exactly
like one that does not exist. Every error is a small HTML page with its status and code.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.middleware.gzip import GZipMiddleware

from oh.core.records import Record
from oh.errors import (
    Bug,
    Forbidden,
    InvalidArgument,
    NotFound,
    Unauthenticated,
    public_error,
)
from oh.transports.panel.layout import Chrome, error_page, esc, not_found_page, page
from oh.transports.panel.memory import (
    PanelQuery,
    anchor,
    find_record,
    notebook_view,
    render_forget_confirmation,
    render_forget_note,
    render_history,
    render_notebook,
    render_propose,
)
from oh.transports.panel.notebooks import (
    NotebookQuery,
    document_notebooks,
    landing_view,
    render_document,
    render_landing,
)
from oh.transports.panel.review import MAX_BULK, render_review, review_view
from oh.transports.panel.sessions import LOGIN_COOKIE, SESSION_COOKIE, PanelSession, PanelSessions

if TYPE_CHECKING:
    from oh.host import Host

__all__ = ["PanelCompression", "panel_router"]

logger = logging.getLogger("oh.panel")

MAX_FORM_BYTES = 65_536
ASSETS = {"panel.css": "text/css; charset=utf-8", "panel.js": "text/javascript; charset=utf-8"}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
        " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class _SignIn(Exception):
    """A page was asked for without a session: send the browser to the login form."""


class _Reload(Exception):
    """A cross-site navigation arrived without the cookie: reload same-site to get it."""


class PanelCompression:
    """gzip for what a browser loads from the panel (the landing page and everything under
    ``/panel``), when it says it accepts it; every other route answers as it always did."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=1024)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == "/" or path == "/panel" or path.startswith("/panel/"):
            await self.gzip(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _load_assets() -> dict[str, bytes]:
    folder = resources.files("oh.transports.panel") / "static"
    return {name: (folder / name).read_bytes() for name in ASSETS}


def _html(text: str, status: int = 200) -> Response:
    return Response(
        text, status_code=status, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS
    )


def _see_other(url: str) -> Response:
    return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


async def _form(request: Request, repeated: str | None = None) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body, strictly: size-limited, UTF-8, each field
    at most once (but ``repeated``, whose values come back joined by newlines), CRLF line ends
    folded to LF (as browsers submit textareas)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise InvalidArgument(f"the form is over {MAX_FORM_BYTES} bytes")
        chunks.append(chunk)
    if not chunks or not any(chunks):
        return {}  # an empty form: its missing CSRF token is what refuses it
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise InvalidArgument("the panel's forms are sent as application/x-www-form-urlencoded")
    try:
        text = b"".join(chunks).decode("ascii")
        limit = 32 if repeated is None else 32 + MAX_BULK
        fields = parse_qs(text, keep_blank_values=True, errors="strict", max_num_fields=limit)
    except (UnicodeDecodeError, ValueError):
        raise InvalidArgument("the form could not be read") from None
    out = {}
    for key, values in fields.items():
        if key == repeated:
            out[key] = "\n".join(values)
            continue
        if len(values) != 1:
            raise InvalidArgument(f"the form field {key} was sent more than once")
        out[key] = values[0].replace("\r\n", "\n")
    return out


def _panel_query(request: Request) -> PanelQuery:
    """The filters and pages a form's action carried back (what the page showed), or none if
    they do not read: a form that was posted is not refused for where it came back to."""
    try:
        return PanelQuery.parse(request.query_params)
    except InvalidArgument:
        return PanelQuery()


def _safe_next(value: str | None, base: str) -> str:
    """Only a path of this panel: no other host, no scheme, no protocol-relative URL."""
    default = f"{base}/panel/review"
    if not value or len(value) > 500 or not value.isprintable():
        return default
    if not value.startswith(f"{base}/panel/") or "//" in value or "\\" in value:
        return default
    return value


def _whole(raw: str, name: str, most: int) -> int:
    """A whole number from 1 to ``most`` read from a query string; ``invalid_argument`` else."""
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9 and 1 <= int(raw) <= most):
        raise InvalidArgument(f"{name} is a whole number from 1 to {most:,}")
    return int(raw)


def _pending_ids(host: Host, owner: str) -> list[str]:
    """The owner's pending proposals, in the order the review page lists them."""
    return [p.id for p in host.proposals(owner) if p.state == "pending"]


def _decide_all(host: Host, owner: str, chosen: list[str], decision: str, reason: str) -> None:
    """Decide every proposal of ``chosen`` the same way, as proposed, with one reason — after
    checking that each can be: the owner's, pending, and (to accept) acceptable as proposed
    now. A refusal found first changes nothing."""
    check = host.reviewable(owner)
    for proposal_id in chosen:
        proposal = host.proposal(owner, proposal_id)  # not_found for another owner's
        if proposal.state != "pending":
            raise InvalidArgument(f"{proposal.name} was decided already; reload the page")
        if decision == "accept":
            check(Record.parse(proposal.verified_record()))
    if not reason.strip():
        raise InvalidArgument("give the reason for your decision")
    for proposal_id in chosen:
        host.decide(owner, proposal_id, {"decision": decision, "reason": reason})


def _after_decisions(base: str, waiting: list[str], decided: list[str]) -> str:
    """Where the review page opens after ``decided`` were decided: at the proposal that
    followed the last of them in the pending list (the one before, at the end), with a notice
    of the decision."""
    rest = [p for p in waiting if p not in decided]
    last = max((waiting.index(p) for p in decided if p in waiting), default=-1)
    after = [p for p in waiting[last + 1 :] if p in rest] or rest[-1:]
    count = f"&count={len(decided)}" if len(decided) > 1 else ""
    place = f"#proposal-{quote(after[0])}" if after else "#pending"
    return f"{base}/panel/review?decided={quote(decided[0])}{count}{place}"


def _forget_note_and_find_next(
    host: Host, owner: str, notebook_id: str, name: str, query: PanelQuery
) -> str | None:
    """Forget the note ``name``, then say where the owner was: the note after it in the list as
    the page showed it (filtered and ordered), or the one before it at the end."""
    shown = notebook_view(host, owner, notebook_id, replace(query, at=name)).notes.names
    host.forget_note(owner, notebook_id, name)
    if name not in shown:
        return None
    at = shown.index(name)
    rest = shown[at + 1 :] or shown[:at][-1:]
    return rest[0] if rest else None


def panel_router(host: Host) -> APIRouter:
    """The Memory panel and the review page as a router to include in the host's app."""
    sessions = PanelSessions(host.secret)
    assets = _load_assets()
    asset_version = hashlib.sha256(b"".join(assets.values())).hexdigest()[:12]
    router = APIRouter(include_in_schema=False)

    def chrome(request: Request, session: PanelSession | None = None) -> Chrome:
        return Chrome(
            base=str(request.scope.get("root_path", "")),
            asset_version=asset_version,
            owner=None if session is None else session.owner,
            csrf=None if session is None else sessions.csrf(session),
        )

    def session_of(request: Request) -> PanelSession | None:
        return sessions.resolve(request.cookies.get(SESSION_COOKIE), host.clock())

    def page_session(request: Request) -> PanelSession:
        """The session of a page view; without one, off to the login form."""
        session = session_of(request)
        if session is not None:
            return session
        # A SameSite=Strict cookie is withheld on a navigation from another site (a memory
        # card's link in a chat product): reload once from this site, which sends it.
        if request.headers.get("sec-fetch-site") == "cross-site":
            raise _Reload()
        raise _SignIn()

    async def form_session(
        request: Request, repeated: str | None = None
    ) -> tuple[PanelSession, dict[str, str]]:
        """The session of a form post and its fields, after the CSRF check."""
        session = session_of(request)
        if session is None:
            raise Unauthenticated("sign in to the panel first (your session may have ended)")
        fields = await _form(request, repeated)
        if not sessions.check_csrf(session, fields.get("csrf")):
            raise Forbidden("this form is out of date or did not come from this panel; reload it")
        return session, fields

    async def guarded(request: Request, call: Callable[[], Awaitable[Response]]) -> Response:
        try:
            return await call()
        except _SignIn:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            base = chrome(request).base
            return _see_other(f"{base}/panel/login?next={quote(target, safe='/')}")
        except _Reload:
            # Reloaded without its query: another site may link to a page of the panel, but
            # not search it or choose what it shows (the panel's own links and forms do that),
            # so the size of what it sends back tells an onlooker nothing about the notes.
            target = esc("./" + quote(request.url.path.rsplit("/", 1)[1]))  # this path
            return _html(
                page(
                    chrome(request),
                    "Opening the panel",
                    f'<meta http-equiv="refresh" content="0; url={target}">'
                    "<p>Opening the Memory panel…</p>",
                )
            )
        except Exception as exc:  # the panel's catch-all: its errors are pages, not JSON
            error = public_error(exc)
            if isinstance(error, Bug):
                logger.exception("unexpected error in the panel")
                host.metrics.count("bug")
                return _html(error_page(chrome(request), 503, error.code, error.message), 503)
            status = error.http_status
            session = session_of(request)
            if status == 404 and session is not None:
                return _html(not_found_page(chrome(request, session), error.message), 404)
            back = f"{chrome(request).base}/panel/login" if status == 401 else ""
            return _html(
                error_page(chrome(request, session), status, error.code, error.message, back),
                status,
            )

    async def blocking(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    # -- assets and sign-in ---------------------------------------------------------------

    @router.get("/panel/static/{name}")
    async def static(name: str) -> Response:
        if name not in assets:
            return _html(
                error_page(Chrome("", asset_version), 404, "not_found", "no such file"), 404
            )
        return Response(
            assets[name],
            media_type=ASSETS[name],
            # Pages name each asset with its version (?v=), so a cached copy never goes stale.
            headers={
                "Cache-Control": "public, max-age=31536000, immutable",
                "X-Content-Type-Options": "nosniff",
            },
        )

    @router.get("/panel")
    async def panel_home(request: Request) -> Response:
        return _see_other(f"{chrome(request).base}/panel/review")

    @router.get("/", include_in_schema=False)
    async def landing(request: Request) -> Response:
        """The way in for a browser: the owner's notebooks (the sign-in form first)."""
        return _see_other(f"{chrome(request).base}/panel/notebooks")

    @router.get("/panel/notebooks")
    async def notebooks_page(request: Request) -> Response:
        async def go() -> Response:
            session = page_session(request)
            cursor = request.query_params.get("cursor") or None
            document = request.query_params.get("document") or None
            if document is not None:
                query = NotebookQuery.parse(request.query_params)
                listed = await blocking(document_notebooks, host, session.owner, document, query)
                return _html(render_document(chrome(request, session), listed, host.clock()))
            documents, more = await blocking(landing_view, host, session.owner, cursor)
            return _html(render_landing(chrome(request, session), documents, more, host.clock()))

        return await guarded(request, go)

    def login_page(request: Request, next_url: str, message: str = "") -> Response:
        nonce = sessions.login_nonce()
        base = esc(chrome(request).base)
        alert = f'<p class="notice error" role="alert">{esc(message)}</p>' if message else ""
        body = (
            '<section class="login" aria-labelledby="login-title">'
            '<h1 id="login-title">Sign in to the Memory panel</h1>'
            f"{alert}"
            "<p>Paste your owner token (from"
            f" <code>{esc(host.settings.owner_token_command)}</code>). The"
            " panel keeps a signed session in a cookie, not the token.</p>"
            f'<form method="post" action="{base}/panel/login" class="stack">'
            f'<input type="hidden" name="csrf" value="{esc(sessions.login_csrf(nonce))}">'
            f'<input type="hidden" name="next" value="{esc(next_url)}">'
            '<label for="token">Owner token</label>'
            '<input id="token" name="token" type="password" required autocomplete="off"'
            ' spellcheck="false" maxlength="200">'
            '<button type="submit">Sign in</button></form></section>'
        )
        response = _html(page(chrome(request), "Sign in", body), 401 if message else 200)
        response.set_cookie(
            LOGIN_COOKIE,
            nonce,
            max_age=3600,
            path=f"{chrome(request).base}/panel/login",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    @router.get("/panel/login")
    async def login_form(request: Request) -> Response:
        base = chrome(request).base
        return login_page(request, _safe_next(request.query_params.get("next"), base))

    @router.post("/panel/login")
    async def login(request: Request) -> Response:
        async def go() -> Response:
            fields = await _form(request)
            base = chrome(request).base
            next_url = _safe_next(fields.get("next"), base)
            if not sessions.check_login_csrf(request.cookies.get(LOGIN_COOKIE), fields.get("csrf")):
                raise Forbidden("this sign-in form is out of date; reload it and try again")
            try:
                owner = await blocking(host.owner, fields.get("token", "").strip())
            except Unauthenticated:
                return login_page(request, next_url, "That is not a valid owner token.")
            response = _see_other(next_url)
            response.set_cookie(
                SESSION_COOKIE,
                sessions.issue(owner, host.clock()),
                max_age=int(sessions.lifetime.total_seconds()),
                path="/",
                secure=request.url.scheme == "https",
                httponly=True,
                samesite="strict",
            )
            response.delete_cookie(LOGIN_COOKIE, path=f"{base}/panel/login")
            return response

        return await guarded(request, go)

    @router.post("/panel/logout")
    async def logout(request: Request) -> Response:
        async def go() -> Response:
            await form_session(request)
            response = _see_other(f"{chrome(request).base}/panel/login")
            response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
            return response

        return await guarded(request, go)

    # -- the Memory panel -----------------------------------------------------------------

    @router.get("/panel/notebooks/{notebook_id}")
    async def notebook_panel(notebook_id: str, request: Request) -> Response:
        async def go() -> Response:
            session = page_session(request)
            query = PanelQuery.parse(request.query_params)
            view = await blocking(notebook_view, host, session.owner, notebook_id, query)
            return _html(render_notebook(chrome(request, session), view))

        return await guarded(request, go)

    def record_page(
        path: str, origins: tuple[str, ...], render: Callable[..., str]
    ) -> Callable[[str, Request], Awaitable[Response]]:
        """A page about one record (``?name=``, and ``origin=`` among ``origins``), built from
        the page of its list that holds it, with the list's filters and page size."""

        async def handler(notebook_id: str, request: Request) -> Response:
            async def go() -> Response:
                session = page_session(request)
                name = request.query_params.get("name", "")
                origin = request.query_params.get("origin") or origins[0]
                if origin not in origins:
                    raise InvalidArgument(f"origin is one of {', '.join(origins)}")
                query = replace(PanelQuery.parse(request.query_params), at=name or None)
                if query.at is None:
                    raise InvalidArgument("name is the record's name, such as lead:x")
                view = await blocking(notebook_view, host, session.owner, notebook_id, query)
                record = find_record(view, origin, name)
                return _html(render(chrome(request, session), view, record))

            return await guarded(request, go)

        router.add_api_route(f"/panel/notebooks/{{notebook_id}}/{path}", handler, methods=["GET"])
        return handler

    record_page("history", ("note", "removed", "reviewed"), render_history)
    record_page("propose", ("note",), render_propose)
    record_page("notes/forget", ("note",), render_forget_note)

    @router.get("/panel/notebooks/{notebook_id}/state")
    async def notebook_state(notebook_id: str, request: Request) -> Response:
        """The notebook's version and state, which the page polls to know when to refresh."""
        session = session_of(request)
        try:
            if session is None:
                raise Unauthenticated("sign in to the panel first")
            notebook = await blocking(host.notebook, session.owner, notebook_id)
        except Exception as exc:  # the poll's catch-all: it answers JSON, not a page
            error = public_error(exc)
            if isinstance(error, Bug):
                logger.exception("unexpected error in the panel")
                host.metrics.count("bug")
            return JSONResponse(error.to_json(), status_code=error.http_status)
        return JSONResponse(
            {"version": notebook.version, "state": notebook.state},
            headers={"Cache-Control": "no-store"},
        )

    @router.get("/panel/notebooks/{notebook_id}/forget")
    async def forget_confirmation(notebook_id: str, request: Request) -> Response:
        async def go() -> Response:
            session = page_session(request)
            notebook = await blocking(host.notebook, session.owner, notebook_id)
            if notebook.state in ("purged", "empty"):
                return _see_other(f"{chrome(request).base}/panel/notebooks/{quote(notebook_id)}")
            return _html(render_forget_confirmation(chrome(request, session), notebook))

        return await guarded(request, go)

    @router.post("/panel/notebooks/{notebook_id}/forget")
    async def forget(notebook_id: str, request: Request) -> Response:
        async def go() -> Response:
            session, fields = await form_session(request)
            if fields.get("confirm") != "yes":
                raise InvalidArgument("forgetting needs the confirmation step")
            await blocking(host.forget, session.owner, notebook_id)
            return _see_other(f"{chrome(request).base}/panel/notebooks/{quote(notebook_id)}")

        return await guarded(request, go)

    @router.post("/panel/notebooks/{notebook_id}/proposals")
    async def propose(notebook_id: str, request: Request) -> Response:
        async def go() -> Response:
            session, fields = await form_session(request)
            name = fields.get("name", "")
            body = {
                "notebook": notebook_id,
                "name": name,
                "source": {
                    "document": fields.get("document", "").strip(),
                    "passage": fields.get("passage", "").strip(),
                    "locator": fields.get("locator", "").strip(),
                },
            }
            made = await blocking(host.propose, session.owner, body)
            # Back to the page the form was on, at the page of its list that holds the note.
            back = _panel_query(request).query_string()
            target = (
                f"{chrome(request).base}/panel/notebooks/{quote(notebook_id)}"
                f"?{back + '&' if back else ''}{urlencode({'at': name})}"
                f"&proposed={quote(made['proposal_id'])}#{quote(anchor('note', name), safe=':')}"
            )
            return _see_other(target)

        return await guarded(request, go)

    @router.post("/panel/notebooks/{notebook_id}/notes/forget")
    async def forget_one_note(notebook_id: str, request: Request) -> Response:
        async def go() -> Response:
            session, fields = await form_session(request)
            if fields.get("confirm") != "yes":
                raise InvalidArgument("forgetting a note needs the confirmation step")
            name = fields.get("name", "")
            query = _panel_query(request)
            after = await blocking(
                _forget_note_and_find_next, host, session.owner, notebook_id, name, query
            )
            back = query.query_string()
            place = f"#{quote(anchor('note', after), safe=':')}" if after else "#notes"
            return _see_other(
                f"{chrome(request).base}/panel/notebooks/{quote(notebook_id)}"
                f"?{back + '&' if back else ''}{urlencode({'forgot': name})}{place}"
            )

        return await guarded(request, go)

    # -- review ---------------------------------------------------------------------------

    @router.get("/panel/review")
    async def review(request: Request) -> Response:
        async def go() -> Response:
            session = page_session(request)
            params = request.query_params
            raw = params.get("revision")
            revision: int | None = None
            if raw:
                if not raw.isdigit() or len(raw) > 15:
                    raise InvalidArgument("revision must be a non-negative integer")
                revision = int(raw)
            page_number = _whole(params.get("decided_page") or "1", "decided_page", 1_000_000)
            count = _whole(params.get("count") or "1", "count", MAX_BULK)
            decided = params.get("decided")
            view = await blocking(
                review_view, host, session.owner, revision, decided, page_number, count
            )
            return _html(render_review(chrome(request, session), view))

        return await guarded(request, go)

    @router.post("/panel/review/{proposal_id}/decision")
    async def decide(proposal_id: str, request: Request) -> Response:
        async def go() -> Response:
            session, fields = await form_session(request)
            decision = fields.get("decision")
            body: dict[str, Any] = {"decision": decision, "reason": fields.get("reason", "")}
            if decision == "accept" and "text" in fields:
                proposal = await blocking(host.proposal, session.owner, proposal_id)
                record = proposal.verified_record()
                if fields["text"] != record["text"]:
                    body["record"] = {**record, "text": fields["text"]}
            waiting = await blocking(_pending_ids, host, session.owner)
            await blocking(host.decide, session.owner, proposal_id, body)
            return _see_other(_after_decisions(chrome(request).base, waiting, [proposal_id]))

        return await guarded(request, go)

    @router.post("/panel/review/decisions")
    async def decide_several(request: Request) -> Response:
        """One decision (accept as proposed, or reject) with one reason for several proposals:
        every one is checked first, and none is decided unless all can be."""

        async def go() -> Response:
            session, fields = await form_session(request, repeated="proposal")
            chosen = [p for p in fields.get("proposal", "").split("\n") if p]
            decision = fields.get("decision")
            if not chosen:
                raise InvalidArgument("tick at least one proposal to decide")
            if len(chosen) > MAX_BULK or len(set(chosen)) != len(chosen):
                raise InvalidArgument(f"tick at most {MAX_BULK} proposals, each once")
            if decision not in ("accept", "reject"):
                raise InvalidArgument("decision is accept or reject")
            waiting = await blocking(_pending_ids, host, session.owner)
            await blocking(
                _decide_all, host, session.owner, chosen, decision, fields.get("reason", "")
            )
            return _see_other(_after_decisions(chrome(request).base, waiting, chosen))

        return await guarded(request, go)

    # -- anything else under /panel -------------------------------------------------------

    @router.api_route("/panel/{rest:path}", methods=["GET", "POST"])
    async def unknown(request: Request) -> Response:
        async def go() -> Response:
            raise NotFound("there is no such page in the panel")

        return await guarded(request, go)

    return router
