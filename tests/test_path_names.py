"""Names that are paths: no client's URL resolution can turn a call on a record or a document
into one on the notebook or the API root, and no route answers a redirect.

``DELETE /v1/notebooks/{id}/records/..`` is resolved by httpx, requests and ``curl -L`` to
``DELETE /v1/notebooks/{id}/`` before it is sent; a server that redirected the trailing slash
(307 keeps the method) made that a DELETE of the whole notebook. Tested against a real
``oh serve`` with both Python clients, following redirects as ``curl -L`` would.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

from oh.core.identifiers import check_document_name
from oh.errors import InvalidArgument
from oh.testing.served import Served


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("paths") / "data") as server:
        yield server


def _opened(served: Served, run: str) -> tuple[dict[str, str], dict[str, Any]]:
    owner = {"Authorization": f"Bearer {served.owner_token('ann')}"}
    opened = served.open_notebook("ann", "reef.pdf", run)
    return owner, opened


@pytest.mark.parametrize("name", ["..", ".", "a/..", "%2e%2e", "%2E%2E", "..%2f"])
def test_a_delete_of_a_path_name_never_forgets_the_notebook(served: Served, name: str) -> None:
    """requests resolves ``records/..`` to ``/v1/notebooks/{id}/``: a 404 now, never the 307
    that carried the DELETE to the notebook; the escaped forms reach the record route, whose
    name check refuses them. (httpx resolves ``records/..`` to the notebook's own URL, with no
    slash: that request is a forget, whoever sends it; see the next test.)"""
    owner, opened = _opened(served, f"run-{name.replace('/', '_').replace('%', 'p')}")
    notebook = opened["notebook"]["id"]
    url = f"{served.url}/v1/notebooks/{notebook}/records/{name}"
    answers: list[Any] = [requests.delete(url, headers=owner, allow_redirects=True, timeout=30)]
    if httpx.Request("DELETE", url).url.path != f"/v1/notebooks/{notebook}":
        answers.append(httpx.delete(url, headers=owner, follow_redirects=True, timeout=30))
    for answer in answers:
        assert answer.status_code in (400, 404, 405), (name, answer.status_code, answer.text)
        assert answer.json()["error"]["code"] in (
            "invalid_argument",
            "not_found",
            "method_not_allowed",
        )
        assert not answer.history, answer.history  # no redirect was followed
    state = httpx.get(f"{served.url}/v1/notebooks/{notebook}", headers=owner, timeout=30)
    assert state.json()["state"] == "open", state.text


@pytest.mark.parametrize("name", ["..", ".", "a/..", "a/b"])
def test_the_python_client_never_sends_a_name_a_url_resolver_would_fold(
    served: Served, name: str
) -> None:
    """Oh's own client escapes ``.`` and ``..`` and refuses ``/``: the server gets the name
    and refuses it typed, and the notebook stays open."""
    from oh.client import Client

    owner, opened = _opened(served, f"run-client-{name.replace('/', '_')}")
    notebook = opened["notebook"]["id"]
    token = owner["Authorization"].split()[1]
    with Client(served.url, token=token) as client, pytest.raises(InvalidArgument):
        client.forget_note(notebook, name)
    state = httpx.get(f"{served.url}/v1/notebooks/{notebook}", headers=owner, timeout=30)
    assert state.json()["state"] == "open", state.text


def test_every_route_with_a_trailing_slash_is_a_typed_404_never_a_redirect(served: Served) -> None:
    document = httpx.get(f"{served.url}/openapi.json", timeout=30).json()
    owner, opened = _opened(served, "run-slashes")
    notebook = opened["notebook"]["id"]
    tried = 0
    for path, operations in document["paths"].items():
        concrete = (
            path.replace("{notebook_id}", notebook)
            .replace("{document}", "reef.pdf")
            .replace("{tool}", "read")
            .replace("{proposal_id}", "pr_x")
            .replace("{name}", "note:a")
        )
        for method in operations:
            answer = httpx.request(
                method.upper(), f"{served.url}{concrete}/", headers=owner, timeout=30
            )
            assert answer.status_code == 404, (method, path, answer.status_code, answer.text)
            assert answer.json()["error"]["code"] == "not_found", answer.text
            assert "location" not in answer.headers
            tried += 1
    assert tried >= 20
    for path in ("/panel/", "/panel/notebooks/", "/mcp/", "/healthz/", "/docs/"):
        answer = httpx.get(f"{served.url}{path}", headers=owner, timeout=30)
        assert answer.status_code == 404 and "location" not in answer.headers, (path, answer)
    state = httpx.get(f"{served.url}/v1/notebooks/{notebook}", headers=owner, timeout=30)
    assert state.json()["state"] == "open"


@pytest.mark.parametrize("name", [".", "..", "a/b", "/", "reports/2026.pdf"])
def test_a_document_name_that_is_a_path_is_refused_the_same_on_every_transport(
    served: Served, name: str
) -> None:
    with pytest.raises(InvalidArgument):
        check_document_name(name)
    done = served.oh("document", "put", "--owner", "ann", name, check=False)
    assert done.returncode == 2 and "invalid_argument" in done.stderr, done.stderr
    assert "must not be . or .. or contain /" in done.stderr
    owner = {"Authorization": f"Bearer {served.owner_token('ann')}"}
    quoted = name.replace("/", "%2F")
    answer = httpx.put(f"{served.url}/v1/documents/{quoted}", headers=owner, timeout=30)
    assert answer.status_code in (400, 404), answer.text
    assert answer.json()["error"]["code"] in ("invalid_argument", "not_found")
    # Nothing was registered: opening a notebook on it is not_found, not a notebook.
    body = {"run": "r", "owner": "ann"}
    opened = httpx.post(
        f"{served.url}/v1/documents/{quoted}/notebooks", headers=owner, json=body, timeout=30
    )
    assert opened.status_code in (400, 404, 405), opened.text


def test_curl_following_redirects_never_forgets_the_notebook(
    served: Served, tmp_path: Path
) -> None:
    owner, opened = _opened(served, "run-curl")
    notebook = opened["notebook"]["id"]
    done = subprocess.run(
        [
            "curl",
            "-sS",
            "-L",
            "-X",
            "DELETE",
            "-H",
            f"Authorization: {owner['Authorization']}",
            f"{served.url}/v1/notebooks/{notebook}/records/..",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode == 127:
        pytest.skip("curl is not installed")
    state = httpx.get(f"{served.url}/v1/notebooks/{notebook}", headers=owner, timeout=30)
    assert state.json()["state"] == "open", (done.stdout, state.text)
