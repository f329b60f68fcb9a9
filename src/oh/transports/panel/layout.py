"""The panel's HTML shell: escaping, the page layout, error pages, times and small fragments.

Every value that comes from a caller — note text, names, owners, reasons, passages — goes
through ``esc`` (``html.escape`` with quotes) before it reaches the markup; templates are
plain f-strings whose only unescaped parts are other fragments built here.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oh.core.clock import from_utc_text

__all__ = [
    "Chrome",
    "error_page",
    "esc",
    "hidden_csrf",
    "hidden_in",
    "hidden_warning",
    "human_time",
    "locator_text",
    "not_found_page",
    "page",
    "pager",
    "remaining",
    "time_tag",
]


# Characters that reorder or hide what is displayed (bidirectional controls, zero-width and
# other invisible characters, the C0 and C1 controls but tab and newline): a note's text may hold
# them, and shown as they are, ``report-42\u202egpj.exe`` would read ``report-42exe.jpg``. The
# panel shows each as a visible mark naming it instead.
_SHOWN_VISIBLY = {
    code: f"⟦U+{code:04X}⟧"
    for code in (
        *range(0x09),
        *range(0x0B, 0x20),
        *range(0x7F, 0xA0),
        0x00AD,
        0x061C,
        0x180E,
        0x200B,
        0x200E,
        0x200F,
        *range(0x202A, 0x202F),
        *range(0x2060, 0x2065),
        *range(0x2066, 0x206A),
        0xFEFF,
    )
}


def hidden_in(value: Any) -> list[str]:
    """The characters of ``value`` that ``esc`` shows as marks, as ``U+202E``, in order of
    first appearance."""
    found: dict[str, None] = {}
    for char in str(value):
        if ord(char) in _SHOWN_VISIBLY:
            found.setdefault(f"U+{ord(char):04X}", None)
    return list(found)


def hidden_warning(*values: Any) -> str:
    """A warning beside text that holds characters ``esc`` shows as marks (none: "")."""
    codes = [code for value in values for code in hidden_in(value)]
    if not codes:
        return ""
    names = ", ".join(dict.fromkeys(codes))
    return (
        '<p class="hidden-chars" role="note"><strong>⚠ Hidden characters.</strong> This text'
        f" holds characters that are invisible or reorder what is shown ({names}). Each is"
        " shown as a mark naming it, such as ⟦U+202E⟧, and never obeyed; they are stored as"
        " they were written.</p>"
    )


def esc(value: Any) -> str:
    """Text safe in element content and in quoted attribute values, every invisible or
    reordering character shown as a visible mark (``⟦U+202E⟧``)."""
    return html.escape(str(value).translate(_SHOWN_VISIBLY), quote=True)


@dataclass(frozen=True, slots=True)
class Chrome:
    """What every page's frame needs: where the panel lives, who is signed in, their CSRF."""

    base: str  # the app's root path, "" unless mounted under a prefix
    asset_version: str
    owner: str | None = None
    csrf: str | None = None


def hidden_csrf(chrome: Chrome) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(chrome.csrf or "")}">'


def page(chrome: Chrome, title: str, body: str, *, main_attrs: str = "") -> str:
    """A whole document: head, a header with navigation, ``body`` in ``<main>``."""
    base = esc(chrome.base)
    if chrome.owner is not None:
        account = (
            f'<span class="who">Signed in as <strong>{esc(chrome.owner)}</strong></span>'
            f'<form method="post" action="{base}/panel/logout" class="inline">'
            f'{hidden_csrf(chrome)}<button type="submit">Log out</button></form>'
        )
        nav = (
            f'<a href="{base}/panel/notebooks">Notebooks</a>'
            f' <a href="{base}/panel/review">Review</a>'
        )
    else:
        account, nav = "", ""
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="same-origin">\n'
        f"<title>{esc(title)} · Oh</title>\n"
        f'<link rel="stylesheet" href="{base}/panel/static/panel.css?v={chrome.asset_version}">\n'
        f'<script src="{base}/panel/static/panel.js?v={chrome.asset_version}" defer></script>\n'
        "</head>\n<body>\n"
        '<a class="skip" href="#main">Skip to content</a>\n'
        '<header class="site">\n'
        f'<p class="brand">Oh <span>agent memory</span></p>\n'
        f'<nav aria-label="Panel">{nav}</nav>\n'
        f'<div class="account">{account}</div>\n'
        "</header>\n"
        f'<main id="main"{main_attrs}>\n{body}\n</main>\n'
        "</body>\n</html>\n"
    )


def error_page(chrome: Chrome, status: int, code: str, message: str, back: str = "") -> str:
    """A small page for an error: the status, the stable code and the message; no traceback."""
    link = f'<p><a href="{esc(back)}">Go back</a></p>' if back else ""
    body = (
        f'<section class="error" aria-labelledby="error-title">\n'
        f'<h1 id="error-title">Error {status}</h1>\n'
        f'<p>Code: <code class="code">{esc(code)}</code></p>\n'
        f"<p>{esc(message)}</p>\n{link}\n</section>"
    )
    return page(chrome, f"Error {status}", body)


def not_found_page(chrome: Chrome, message: str) -> str:
    """A 404 for a signed-in owner: what they asked for is not found *for this account*. It
    reads the same whether it does not exist or belongs to another owner."""
    body = (
        '<section class="error" aria-labelledby="error-title">\n'
        '<h1 id="error-title">Not found for this account</h1>\n'
        f"<p>Signed in as <strong>{esc(chrome.owner or '')}</strong>, the panel has nothing"
        " at this address: it does not exist, or it is not yours. The panel does not say"
        " which.</p>\n"
        '<p>Code: <code class="code">not_found</code> (error 404)</p>\n'
        f"<p>{esc(message)}</p>\n"
        f'<p><a href="{esc(chrome.base)}/panel/notebooks">Your documents and notebooks</a></p>\n'
        "</section>"
    )
    return page(chrome, "Not found for this account", body)


PAGER_WORDS = ("First", "Previous", "Next", "Last")


def pager(
    label: str,
    number: int,
    pages: int,
    href: Callable[[int], str],
    words: tuple[str, str, str, str] = PAGER_WORDS,
    current: str = ' aria-current="page"',
    classes: str = "pager",
) -> str:
    """Links to the other pages of a list (``words``: to the first, previous, next and last),
    around "Page N of M", in a ``<nav>`` named ``label``; "" for a list of one page."""
    if pages <= 1:
        return ""

    def to(page_number: int, word: str, rel: str = "") -> str:
        return f'<a href="{esc(href(page_number))}"{rel}>{word}</a>'

    first, previous, following, last = words
    links = []
    if number > 1:
        links += [to(1, first), to(number - 1, previous, ' rel="prev"')]
    links.append(f'<span class="current"{current}>Page {number} of {pages}</span>')
    if number < pages:
        links += [to(number + 1, following, ' rel="next"'), to(pages, last)]
    return f'<nav class="{classes}" aria-label="{esc(label)}">{" ".join(links)}</nav>'


def human_time(stamp: str) -> str:
    """``2026-11-29T22:52:20.123456Z`` → ``2026-11-29 22:52:20 UTC``."""
    try:
        moment = from_utc_text(stamp)
    except ValueError:
        return stamp
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def time_tag(stamp: str, extra: str = "") -> str:
    return f'<time datetime="{esc(stamp)}"{extra}>{esc(human_time(stamp))}</time>'


def remaining(until: str, now: datetime) -> str:
    """How long until ``until``, in words, as the page shows it before the script takes over."""
    try:
        seconds = int((from_utc_text(until) - now).total_seconds())
    except ValueError:
        return ""
    if seconds <= 0:
        return "now"
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"in {hours} h {minutes:02d} min"
    if minutes:
        return f"in {minutes} min {seconds:02d} s"
    return f"in {seconds} s"


def locator_text(locator: Any) -> str:
    """A source locator as words: text as it is, an object as ``page 4, section 2``."""
    if isinstance(locator, str):
        return locator
    if isinstance(locator, dict):
        return ", ".join(f"{key} {value}" for key, value in locator.items())
    return json.dumps(locator)
