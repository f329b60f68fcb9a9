"""Database URLs as Oh reads and shows them: which name a PostgreSQL database, and how one is
shown without its password."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["is_postgres_url", "masked_url"]


def is_postgres_url(url: str | None) -> bool:
    """Whether ``url`` names a PostgreSQL database: it starts ``postgresql://`` or
    ``postgres://``, exactly as libpq reads a connection URI (lower case only). Anything else,
    a bare ``postgres`` included, is for the embedded backend to take as a path or refuse."""
    return url is not None and url.startswith(("postgresql://", "postgres://"))


def masked_url(url: str) -> str:
    """A database URL as Oh shows it (banners, messages, logs): its password as ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
