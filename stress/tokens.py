"""Tokens (SPEC §5, §6): forged, altered, expired, replayed-in-another-notebook and
other-caller tokens are never accepted.

Explain tokens and paging cursors (HMAC-signed claims) are taken from genuine answers and then:

* replaced by random text; one bit of the payload or of the MAC flipped; the claims edited
  (expiry, answer, notebook, caller, kind, offset) and kept with the old MAC, or signed with
  another host's secret; payload and MAC of two tokens swapped; cut short or extended;
* used after they expired (must be ``token_expired``), by another notebook's agent, by another
  caller of the same notebook, or as the other kind (a cursor as an explain token and back).

Each must be refused (``token_invalid``, or ``token_expired`` for a genuine expired token).
Agent credentials (``oha_<notebook>.<hmac>``) are forged the same way against the host and must
be ``unauthenticated`` or ``forbidden``.

Changing only the encoding of a token (padding, ``+``/``/`` for ``-``/``_``, a character outside
the alphabet, unused trailing bits) leaves the signed bytes as they were; whether such a token
is accepted is counted apart (``same bytes, other spelling``), since it forges nothing.

    python stress/tokens.py --forgeries 20000

Prints ``accepted: 0`` and exits 1 if any forgery was accepted or answered with another code.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
from pathlib import Path
from typing import Any

from harness import common_arguments, report, scratch, seed_of
from oh.core.canonical import canonical_bytes
from oh.host import Host
from oh.storage.sqlite.host import SqliteHostRegistry
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.lifecycle import FakeClock
from oh.tools import Caller

OTHER_SECRET = b"another host's secret, 32 bytes or more!"
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(secret: bytes, claims: dict[str, Any]) -> str:
    payload = canonical_bytes(claims)
    return f"{_b64(payload)}.{_b64(hmac.new(secret, payload, hashlib.sha256).digest())}"


def _claims(token: str) -> dict[str, Any]:
    return dict(json.loads(_unb64(token.split(".")[0])))


def _flip(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]


def forge(rng: random.Random, genuine: str, other: str, secret_caller: str) -> tuple[str, str]:
    """A forgery of ``genuine`` (``other`` is another genuine token): ``(kind, token)``."""
    payload, mac = genuine.split(".")
    kind = rng.choice(
        [
            "random text",
            "payload bit flipped",
            "MAC bit flipped",
            "claims edited, old MAC",
            "claims edited, signed by another host",
            "payload and MAC of two tokens",
            "cut short",
            "extended",
        ]
    )
    if kind == "random text":
        size = rng.randint(0, 120)
        text = "".join(rng.choice(ALPHABET + ".=+/ \u00e9") for _ in range(size))
        return kind, text
    if kind == "payload bit flipped":
        return kind, f"{_b64(_flip(rng, _unb64(payload)))}.{mac}"
    if kind == "MAC bit flipped":
        return kind, f"{payload}.{_b64(_flip(rng, _unb64(mac)))}"
    claims = _claims(genuine)
    if kind.startswith("claims edited"):
        key = rng.choice(sorted(claims))
        edits = {
            "e": claims["e"] + rng.choice([60, 3600, 10**9]),
            "a": "an_" + "0" * 32,
            "n": "nb_" + "0" * 32,
            "c": secret_caller,
            "k": "cursor" if claims["k"] == "explain" else "explain",
            "o": 0,
        }
        claims[key] = edits.get(key, "x")
        if kind.endswith("old MAC"):
            return kind, f"{_b64(canonical_bytes(claims))}.{mac}"
        return kind, _sign(OTHER_SECRET, claims)
    if kind == "payload and MAC of two tokens":
        return kind, f"{other.split('.')[0]}.{mac}"
    if kind == "cut short":
        return kind, genuine[: rng.randrange(len(genuine))]
    return kind, genuine + rng.choice(ALPHABET)


def respell(rng: random.Random, genuine: str) -> str | None:
    """The same signed bytes spelled differently, or None if this token has no such spelling."""
    payload, mac = genuine.split(".")
    part = rng.choice(["payload", "mac"])
    text = payload if part == "payload" else mac
    how = rng.choice(["padding", "standard alphabet", "outside the alphabet", "trailing bits"])
    if how == "padding":
        if len(text) % 4 == 0:
            return None
        changed = text + "=" * (-len(text) % 4)
    elif how == "standard alphabet":
        if "-" not in text and "_" not in text:
            return None
        changed = text.replace("-", "+").replace("_", "/")
    elif how == "outside the alphabet":
        at = rng.randrange(len(text) + 1)
        changed = text[:at] + rng.choice("!*~") + text[at:]
    else:
        unused = {2: 4, 3: 2}.get(len(text) % 4, 0)  # bits of the last character not decoded
        if not unused:
            return None
        last = ALPHABET.index(text[-1])
        changed = text[:-1] + ALPHABET[last ^ rng.randrange(1, 1 << unused)]
    if changed == text:
        return None
    return f"{changed}.{mac}" if part == "payload" else f"{payload}.{changed}"


def run(directory: Path, forgeries: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    clock = FakeClock()
    host = Host(
        SqliteMemoryStore(directory / "memory.db"),
        SqliteKnowledgeStore(directory / "knowledge.db"),
        SqliteHostRegistry(directory / "knowledge.db"),
        clock=clock,
    )
    host.register_document("ann", "doc")
    host.register_document("bob", "bob-doc")
    a, _ = host.open_notebook("ann", "doc", "run-a")
    b, _ = host.open_notebook("ann", "doc", "run-b")
    c, _ = host.open_notebook("bob", "bob-doc", "run-c")
    agents = {nb.id: host.agent_token(nb.id) for nb in (a, b, c)}
    for nb in (a, b):
        names = [{"op": "add", "record": {"name": f"note:n{i}", "text": "x"}} for i in range(5)]
        changes = {"based_on": 0, "request_id": "fill", "changes": names}
        host.call_tool(agents[nb.id], "remember", changes)

    def genuine(notebook: str) -> dict[str, Any]:
        return host.call_tool(agents[notebook], "query", {"question": "current_notes", "limit": 2})

    def use(token: str, as_kind: str, notebook: str, caller: str | None = None) -> dict[str, Any]:
        arguments: dict[str, Any]
        if as_kind == "explain":
            arguments = {"token": token, "row": 0}
        else:
            arguments = {"question": "current_notes", "limit": 2, "cursor": token}
        tool = "explain" if as_kind == "explain" else "query"
        if caller is None:
            return host.call_tool(agents[notebook], tool, arguments)
        # Another caller of the same notebook: the tools, called as another principal.
        return host._tools.call(Caller(notebook, caller, "agent:impostor"), tool, arguments)

    tally: dict[str, list[int]] = {}  # kind -> [tried, accepted, wrong code]
    accepted_examples: list[str] = []
    respelled = [0, 0]

    def record(kind: str, result: dict[str, Any], wanted: set[str]) -> None:
        row = tally.setdefault(kind, [0, 0, 0])
        row[0] += 1
        code = result.get("error", {}).get("code")
        if code is None:
            row[1] += 1
            if len(accepted_examples) < 10:
                accepted_examples.append(kind)
        elif code not in wanted:
            row[2] += 1

    invalid = {"token_invalid"}
    for _ in range(forgeries):
        answer = genuine(a.id)
        other = genuine(b.id)
        as_kind = rng.choice(["explain", "cursor"])
        token = answer["token"] if as_kind == "explain" else answer["next_cursor"]
        other_token = other["token"] if as_kind == "explain" else other["next_cursor"]
        roll = rng.random()
        if roll < 0.6:
            kind, forged = forge(rng, token, other_token, f"agent:{b.id}")
            record(f"{as_kind}: {kind}", use(forged, as_kind, a.id), invalid)
        elif roll < 0.68:
            issued = clock.now
            clock.advance(minutes=10, seconds=rng.randint(0, 3600))
            record(f"{as_kind}: expired", use(token, as_kind, a.id), {"token_expired"})
            clock.now = issued
        elif roll < 0.76:
            record(f"{as_kind}: replayed in another notebook", use(token, as_kind, b.id), invalid)
        elif roll < 0.84:
            caller = rng.choice([f"agent:{b.id}", "agent:someone", f"agent:{a.id} "])
            record(f"{as_kind}: another caller", use(token, as_kind, a.id, caller), invalid)
        elif roll < 0.9:
            swapped = answer["next_cursor"] if as_kind == "explain" else answer["token"]
            record(f"{as_kind}: the other kind of token", use(swapped, as_kind, a.id), invalid)
        else:
            spelled = respell(rng, token)
            if spelled is None:
                continue
            respelled[0] += 1
            if "error" not in use(spelled, as_kind, a.id):
                respelled[1] += 1
    # Agent credentials against the host.
    mishandled: list[str] = []
    prefix = f"oha_{a.id}."
    mac = agents[a.id][len(prefix) :]
    other_mac = agents[b.id].split(".")[1]
    forged_agents = {
        "agent: MAC of zeros": prefix + "0" * 64,
        "agent: another notebook's MAC": prefix + other_mac,
        "agent: another host's MAC": prefix
        + hmac.new(OTHER_SECRET, b"agent:" + a.id.encode(), hashlib.sha256).hexdigest(),
        "agent: MAC upper case": prefix + mac.upper(),
        "agent: MAC cut short": prefix + mac[:-1],
        "agent: no MAC": prefix,
        "agent: two dots": prefix + mac + ".x",
        "agent: owner prefix": "oho_" + agents[a.id][4:],
        "agent: empty": "",
        "agent: very long": prefix + "a" * 100_000,
        "agent: non-ASCII MAC": prefix + mac[:-1] + "\u00e9",
        "agent: non-ASCII notebook": f"oha_{a.id}\u00e9.{mac}",
    }
    for label, token in forged_agents.items():
        try:
            result = host.call_tool(token, "query", {"question": "current_notes"})
        except Exception as exc:
            mishandled.append(f"{label}: {type(exc).__name__}: {exc}"[:200])
            tally.setdefault(label, [0, 0, 0])[0] += 1
            tally[label][2] += 1
            continue
        record(label, result, {"unauthenticated", "forbidden"})
    host.close()
    tried = sum(row[0] for row in tally.values())
    accepted = sum(row[1] for row in tally.values())
    wrong = sum(row[2] for row in tally.values())
    return {
        "suite": "tokens",
        "seed": seed,
        "forgeries": tried,
        "accepted": accepted,
        "refused_with_another_code": wrong,
        "same_bytes_other_spelling_accepted": f"{respelled[1]}/{respelled[0]}",
        "by_kind": {kind: f"{row[1]} accepted of {row[0]}" for kind, row in sorted(tally.items())},
        "accepted_examples": accepted_examples,
        "mishandled": mishandled,
        "figure": (
            f"accepted: {accepted} of {tried}; refused with another code: {wrong};"
            f" same token spelled otherwise accepted: {respelled[1]}/{respelled[0]}"
        ),
        "ok": accepted == 0 and wrong == 0,
    }


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--forgeries", type=int, default=20_000)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    with scratch("oh-tokens-", args.keep) as tmp:
        summary = run(tmp, args.forgeries, seed)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
