"""The OpenAPI document and the reference page of a real `oh serve`, read as a client author
would: which token each route takes, an example of every body and answer that the schemas
accept and the host really answers in that shape, and a `/docs` page that works offline."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from oh.errors import HTTP_STATUS
from oh.testing.browser import chromium
from oh.testing.served import Served

TOKEN_FREE = {("get", "/healthz"), ("get", "/metrics")}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("openapi") / "data") as server:
        yield server


@pytest.fixture(scope="module")
def document(served: Served) -> dict[str, Any]:
    answer = httpx.get(f"{served.url}/openapi.json", timeout=30)
    assert answer.status_code == 200
    return dict(answer.json())


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def _validator(document: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of ``schema`` whose ``#/components/...`` references resolve in the document
    (its components are carried beside the schema, a keyword JSON Schema ignores)."""
    return Draft202012Validator({**schema, "components": document["components"]})


def _examples(media: dict[str, Any]) -> list[Any]:
    if "examples" in media:
        return [example["value"] for example in media["examples"].values()]
    return [media["example"]] if "example" in media else []


def _check(document: dict[str, Any], schema: dict[str, Any], value: Any, where: str) -> None:
    errors = [error.message for error in _validator(document, schema).iter_errors(value)]
    assert errors == [], (where, errors[:3])


# -- credentials -------------------------------------------------------------------------------


def test_every_route_that_takes_a_token_names_its_bearer_scheme_and_no_other_does(
    document: dict[str, Any],
) -> None:
    schemes = document["components"]["securitySchemes"]
    assert schemes == {
        name: {"type": "http", "scheme": "bearer", "description": schemes[name]["description"]}
        for name in ("owner", "agent")
    }
    for method, path, operation in _operations(document):
        if (method, path) in TOKEN_FREE:
            assert operation["security"] == [], path
        else:
            assert operation["security"] in ([{"owner": []}], [{"agent": []}]), (method, path)
            assert "401" in operation["responses"], (method, path)


def test_a_route_declared_to_take_a_token_refuses_a_call_without_one(
    served: Served, document: dict[str, Any]
) -> None:
    for method, path, operation in _operations(document):
        if operation["security"]:
            filled = re.sub(r"\{[^}]+\}", "x", path)
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            sent = _examples(body)[0] if body is not None else None
            answer = httpx.request(method.upper(), f"{served.url}{filled}", json=sent, timeout=30)
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.json()["error"]["code"] == "unauthenticated"
    assert httpx.get(f"{served.url}/healthz", timeout=30).status_code == 200


def test_the_description_of_the_api_links_the_reference_page(document: dict[str, Any]) -> None:
    description = document["info"]["description"]
    assert "](/docs)" in description
    assert "Authorization: Bearer" in description
    assert {tag["name"] for tag in document["tags"]} == {
        tag for _, _, operation in _operations(document) for tag in operation["tags"]
    }


def test_no_status_is_declared_that_the_host_never_answers(document: dict[str, Any]) -> None:
    """A request that does not fit a route is invalid_argument (400); FastAPI's 422 is gone."""
    for method, path, operation in _operations(document):
        assert "422" not in operation["responses"], (method, path)
    assert set(document["components"]["schemas"]) == {"JsonValue"}


# -- examples ----------------------------------------------------------------------------------


def test_every_body_and_json_answer_has_examples_its_schema_accepts(
    document: dict[str, Any],
) -> None:
    checked = 0
    for method, path, operation in _operations(document):
        where = f"{method.upper()} {path}"
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:
            assert _examples(body), f"{where}: no request example"
            for value in _examples(body):
                _check(document, body["schema"], value, f"{where} request")
                checked += 1
        for status, response in operation["responses"].items():
            media = response.get("content", {}).get("application/json")
            if media is None:
                continue
            assert _examples(media), f"{where} {status}: no example"
            for value in _examples(media):
                _check(document, media["schema"], value, f"{where} {status}")
                checked += 1
                if int(status) >= 400:
                    assert HTTP_STATUS[value["error"]["code"]] == int(status), (where, value)
        for parameter in operation.get("parameters", []):
            assert "example" in parameter or parameter["name"] == "cursor", (where, parameter)
            if "example" in parameter:
                _check(document, parameter["schema"], parameter["example"], where)
    assert checked > 100


def _same_shape(real: Any, example: Any, where: str) -> None:
    """The same keys at every level and the same JSON type of every value (lists by their
    first item): an example a client can be written against."""
    kind = {bool: "boolean", int: "number", float: "number", str: "string", type(None): "null"}
    if isinstance(example, dict):
        assert isinstance(real, dict) and set(real) == set(example), (where, real, example)
        for key in example:
            _same_shape(real[key], example[key], f"{where}.{key}")
    elif isinstance(example, list):
        assert isinstance(real, list), (where, real)
        if real and example:
            _same_shape(real[0], example[0], f"{where}[0]")
    elif example is not None and real is not None:
        assert kind[type(real)] == kind[type(example)], (where, real, example)


def test_the_examples_are_what_the_host_answers_when_sent(
    served: Served, document: dict[str, Any]
) -> None:
    """Each request example is sent to the real host, in the order a user would, and each
    answer has the shape of the example the document gives for its status."""
    paths = document["paths"]

    def example(method: str, path: str, status: str | None = None, name: str = "") -> Any:
        operation = paths[path][method]
        if status is None:
            media = operation["requestBody"]["content"]["application/json"]
        else:
            media = operation["responses"][status]["content"]["application/json"]
        if name:
            return media["examples"][name]["value"]
        return media.get("example") or next(iter(media["examples"].values()))["value"]

    owner = httpx.Client(
        base_url=served.url,
        headers={"Authorization": f"Bearer {served.owner_token('ann')}"},
        timeout=30,
    )
    example_id = paths["/v1/notebooks/{notebook_id}"]["get"]["parameters"][0]["example"]

    def check(answer: httpx.Response, method: str, path: str, name: str = "") -> Any:
        status = str(answer.status_code)
        assert status in paths[path][method]["responses"], (method, path, answer.text)
        _same_shape(answer.json(), example(method, path, status, name), f"{method} {path}")
        return answer.json()

    check(owner.put("/v1/documents/report-42"), "put", "/v1/documents/{document}")
    opening = example("post", "/v1/documents/{document}/notebooks", name="run")
    opened = check(
        owner.post("/v1/documents/report-42/notebooks", json=opening),
        "post",
        "/v1/documents/{document}/notebooks",
    )
    notebook = opened["notebook"]["id"]
    agent = httpx.Client(
        base_url=served.url,
        headers={"Authorization": f"Bearer {opened['agent_token']}"},
        timeout=30,
    )
    tool = "/v1/notebooks/{notebook_id}/tools/"
    remember = example("post", f"{tool}remember", name="add")
    written = check(
        agent.post(f"/v1/notebooks/{notebook}/tools/remember", json=remember),
        "post",
        f"{tool}remember",
        "applied",
    )
    assert [w["name"] for w in written["written"]] == [
        w["name"] for w in example("post", f"{tool}remember", "200", "applied")["written"]
    ]
    # The digests in the examples are the digests of the example records.
    assert written == example("post", f"{tool}remember", "200", "applied")
    removal = example("post", f"{tool}remember", name="remove") | {"based_on": 0}
    stale = agent.post(f"/v1/notebooks/{notebook}/tools/remember", json=removal)
    check(stale, "post", f"{tool}remember", "stale")
    queried = check(
        agent.post(
            f"/v1/notebooks/{notebook}/tools/query",
            json=example("post", f"{tool}query", name="current"),
        ),
        "post",
        f"{tool}query",
    )
    check(
        agent.post(f"/v1/notebooks/{notebook}/tools/read", json=example("post", f"{tool}read")),
        "post",
        f"{tool}read",
    )
    explain = example("post", f"{tool}explain") | {"token": queried["token"]}
    check(
        agent.post(f"/v1/notebooks/{notebook}/tools/explain", json=explain),
        "post",
        f"{tool}explain",
    )
    recalled = agent.post(
        f"/v1/notebooks/{notebook}/tools/recall", json=example("post", f"{tool}recall")
    )
    check(recalled, "post", f"{tool}recall", "shadow")  # the default on the embedded backend
    check(
        agent.get(f"/v1/notebooks/{notebook}/bootstrap"),
        "get",
        "/v1/notebooks/{notebook_id}/bootstrap",
    )
    check(owner.get("/v1/notebooks"), "get", "/v1/notebooks")
    check(owner.get(f"/v1/notebooks/{notebook}"), "get", "/v1/notebooks/{notebook_id}")
    check(
        owner.get(f"/v1/notebooks/{notebook}/records"),
        "get",
        "/v1/notebooks/{notebook_id}/records",
    )
    proposal = example("post", "/v1/knowledge/proposals", name="note")
    assert proposal["notebook"] == example_id
    proposed = check(
        owner.post("/v1/knowledge/proposals", json=proposal | {"notebook": notebook}),
        "post",
        "/v1/knowledge/proposals",
    )
    decision = "/v1/knowledge/proposals/{proposal_id}/decision"
    check(
        owner.post(
            f"/v1/knowledge/proposals/{proposed['proposal_id']}/decision",
            json=example("post", decision, name="accept"),
        ),
        "post",
        decision,
    )
    check(owner.get("/v1/knowledge"), "get", "/v1/knowledge")
    check(
        owner.delete(f"/v1/notebooks/{notebook}/records/todo:check-figure-3"),
        "delete",
        "/v1/notebooks/{notebook_id}/records/{name}",
    )
    check(owner.delete(f"/v1/notebooks/{notebook}"), "delete", "/v1/notebooks/{notebook_id}")
    check(owner.delete("/v1/documents/report-42"), "delete", "/v1/documents/{document}")
    check(owner.get("/v1/notebooks/nb_none"), "get", "/v1/notebooks/{notebook_id}")
    check(httpx.get(f"{served.url}/healthz", timeout=30), "get", "/healthz")


# -- the reference page ------------------------------------------------------------------------


def test_the_reference_page_lists_every_route_with_its_token_and_examples(
    served: Served, document: dict[str, Any]
) -> None:
    answer = httpx.get(f"{served.url}/docs", timeout=30)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    page = answer.text
    for method, path, operation in _operations(document):
        assert f"<code>{method.upper()} {path}</code>" in page, (method, path)
        assert f'id="{operation["operationId"]}"' in page
    assert page.count("<b>Token:</b> owner token") == sum(
        operation["security"] == [{"owner": []}] for _, _, operation in _operations(document)
    )
    assert "lead:reef-survey-2016" in page and 'href="/openapi.json"' in page
    # Nothing is loaded from anywhere: no script, no stylesheet or image of another host.
    assert "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)


def test_the_cdn_pages_fastapi_would_serve_are_not_served(served: Served) -> None:
    for path in ("/redoc", "/docs/oauth2-redirect"):
        answer = httpx.get(f"{served.url}{path}", timeout=30)
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, "not_found"), path


def test_the_banner_names_the_reference_page(served: Served) -> None:
    [line] = [line for line in served.output().splitlines() if "HTTP API" in line]
    assert f"reference: {served.url}/docs" in line


def test_a_browser_shows_the_reference_page_with_no_request_leaving_the_host(
    served: Served,
) -> None:
    requested: list[str] = []
    with chromium() as browser:
        page = browser.new_page()
        page.on("request", lambda request: requested.append(request.url))
        page.goto(f"{served.url}/docs")
        page.wait_for_load_state("networkidle")
        heading = page.locator("h3", has_text="POST /v1/notebooks/{notebook_id}/tools/remember")
        assert heading.count() == 1
        assert page.locator("h1").inner_text().startswith("Oh reference host")
    assert requested and all(url.startswith(served.url) for url in requested), requested
