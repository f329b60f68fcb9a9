"""Profiles (docs/packs.md): value codecs, the pack format, and installing packs per owner.

A profile is a vocabulary for reviewed knowledge (kinds, their fields, each field's codec),
distributed as a pack. ``codecs`` validates and canonicalizes typed values; ``packs`` reads,
verifies and seals pack files and holds the ``Schema`` records are checked against;
``installs`` previews and installs packs into an owner's knowledge base. Three packs ship with
Oh: ``research``, ``language`` and ``finance``.
"""

from oh.profiles.codecs import Codec, Codecs, Params, default_codecs
from oh.profiles.installs import (
    InstalledPack,
    InstallResult,
    LeftInvalid,
    PackChange,
    Preview,
    Profiles,
    plan,
)
from oh.profiles.packs import (
    PACK_FORMAT,
    SHIPPED_PACKS,
    Field,
    Kind,
    Pack,
    Schema,
    Version,
    find_pack,
    load_pack,
    parse_pack,
    read_pack,
    seal,
    shipped_pack,
)

__all__ = [
    "PACK_FORMAT",
    "SHIPPED_PACKS",
    "Codec",
    "Codecs",
    "Field",
    "InstallResult",
    "InstalledPack",
    "Kind",
    "LeftInvalid",
    "Pack",
    "PackChange",
    "Params",
    "Preview",
    "Profiles",
    "Schema",
    "Version",
    "default_codecs",
    "find_pack",
    "load_pack",
    "parse_pack",
    "plan",
    "read_pack",
    "seal",
    "shipped_pack",
]
