"""oh.keys on its own: master keys, wrapping, and sealed text that admits exactly one spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from oh.errors import IntegrityError, InvalidArgument
from oh.keys import SEALED, MasterKey, MasterKeys, NotebookCipher

ALPHABET = "ABZaz09+/={}é "


def test_a_master_key_round_trips_through_its_text_and_never_shows_in_repr() -> None:
    key = MasterKey.generate()
    assert MasterKey.parse(key.text()) == key
    assert MasterKey.parse(f"  {key.text()}\n") == key
    assert key.text() not in repr(key) and key.secret.hex() not in repr(key)
    assert len(key.id) == 16 and key.id != MasterKey.generate().id


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ohmk1:",
        "ohmk2:" + "A" * 43,
        "ohmk1:" + "A" * 42,
        "ohmk1:" + "*" * 43,
        "ohmk1:" + "A" * 44,
    ],
)
def test_a_malformed_master_key_is_invalid_argument(text: str) -> None:
    with pytest.raises(InvalidArgument):
        MasterKey.parse(text)


def test_a_data_key_unwraps_only_under_its_master_key_and_for_its_notebook() -> None:
    key, other = MasterKey.generate(), MasterKey.generate()
    data_key = bytes(range(32))
    wrapped = key.wrap(data_key, "nb_a")
    assert key.unwrap(wrapped, "nb_a") == data_key
    for wrong in (lambda: other.unwrap(wrapped, "nb_a"), lambda: key.unwrap(wrapped, "nb_b")):
        with pytest.raises(IntegrityError):
            wrong()
    with pytest.raises(IntegrityError):
        key.unwrap(wrapped[:-1] + bytes([wrapped[-1] ^ 1]), "nb_a")


def test_knowledge_macs_match_under_the_keys_configured_only() -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    mac = MasterKeys(old).mac(b"purpose", b"data")
    assert MasterKeys(new, (old,)).mac_matches(b"purpose", b"data", mac)
    assert not MasterKeys(new).mac_matches(b"purpose", b"data", mac)
    assert not MasterKeys(old).mac_matches(b"other purpose", b"data", mac)
    assert not MasterKeys(old).mac_matches(b"purpose", b"datA", mac)
    for junk in (None, 7, "", "nocolon", mac + "0"):
        assert not MasterKeys(old).mac_matches(b"purpose", b"data", junk)


@pytest.mark.parametrize("length", range(9))
def test_every_changed_character_of_sealed_text_is_refused(length: int) -> None:
    """Including the stray bits of the last base64 group and the padding: a database holding a
    sealed value spelled any other way than Oh wrote it is altered, and reads say so."""
    cipher = NotebookCipher("nb_a", bytes(32))
    text = "x" * length
    sealed = cipher.seal(text, "note:a", 3, "d" * 64)
    assert sealed.startswith(SEALED)
    assert cipher.open(sealed, "note:a", 3, "d" * 64) == text
    for at in range(len(sealed)):
        for character in ALPHABET:
            changed = sealed[:at] + character + sealed[at + 1 :]
            if changed != sealed:
                with pytest.raises(IntegrityError):
                    cipher.open(changed, "note:a", 3, "d" * 64)
    for changed in (sealed + "=", sealed[:-1], sealed + "\n", " " + sealed):
        with pytest.raises(IntegrityError):
            cipher.open(changed, "note:a", 3, "d" * 64)


def test_a_sealed_value_opens_only_where_it_was_sealed() -> None:
    cipher = NotebookCipher("nb_a", bytes(32))
    sealed = cipher.seal("{}", "note:a", 3, "d" * 64)
    for name, version, digest in (
        ("note:b", 3, "d" * 64),
        ("note:a", 4, "d" * 64),
        ("note:a", 3, "e" * 64),
    ):
        with pytest.raises(IntegrityError):
            cipher.open(sealed, name, version, digest)
    with pytest.raises(IntegrityError):
        NotebookCipher("nb_b", bytes(32)).open(sealed, "note:a", 3, "d" * 64)
    with pytest.raises(IntegrityError):
        cipher.open_field(sealed, "note:a", "rows")  # a note's seal is no answer's
    assert cipher.seal("{}", "note:a", 3, "d" * 64) == sealed  # one spelling per value
    for value in (None, 7, b"oh1:", "{}", "oh1"):
        with pytest.raises(IntegrityError):
            cipher.open(value, "note:a", 3, "d" * 64)


def test_a_token_is_the_same_for_the_same_value_and_opens_only_where_it_was_made() -> None:
    key = bytes(range(32))
    cipher, again = NotebookCipher("nb_a", key), NotebookCipher("nb_a", key)
    name = "finding:patient-0042-status"
    token = cipher.token(name, "name")
    assert token.startswith(SEALED) and name not in token
    assert again.token(name, "name") == token  # deterministic: the database compares tokens
    assert again.untoken(token, "name") == name
    assert cipher.token(name, "kind") != token  # bound to the column
    assert NotebookCipher("nb_b", key).token(name, "name") != token  # and to the notebook
    for wrong in (
        lambda: NotebookCipher("nb_a", key).untoken(token, "digest"),
        lambda: NotebookCipher("nb_b", key).untoken(token, "name"),
        lambda: NotebookCipher("nb_a", bytes(32)).untoken(token, "name"),
        lambda: NotebookCipher("nb_a", key).untoken(name, "name"),
        lambda: NotebookCipher("nb_a", key).untoken(None, "name"),
        lambda: NotebookCipher("nb_a", key).untoken(token.encode(), "name"),
    ):
        with pytest.raises(IntegrityError):
            wrong()


def test_a_value_spelled_like_a_token_is_never_taken_for_one() -> None:
    """Request ids are any text: one spelled like another's token gets its own token, though
    the cipher remembers both directions of what it made."""
    cipher = NotebookCipher("nb_a", bytes(range(32)))
    first = cipher.token("r-1", "request")
    spelled = cipher.token(first, "request")
    assert spelled != first and spelled != "r-1"
    assert cipher.untoken(spelled, "request") == first
    assert cipher.untoken(first, "request") == "r-1"
    assert NotebookCipher("nb_a", bytes(range(32))).token(first, "request") == spelled


def test_destroying_a_key_empties_what_the_ciphers_remember(tmp_path: Path) -> None:
    from oh.keys import Keyring
    from oh.storage.sqlite.keys import SqliteKeyStore

    keyring = Keyring(MasterKeys(MasterKey.generate()), SqliteKeyStore(tmp_path / "keys.db"))
    try:
        cipher = keyring.create("nb_a")
        token = cipher.token("finding:patient-0042-status", "name")
        keyring.create("nb_b").token("note:other", "name")
        assert any("finding:patient-0042-status" in key for key in keyring._values)
        keyring.destroy(["nb_a"])
        assert not keyring._values  # no value of a forgotten notebook stays in memory
        with pytest.raises(IntegrityError):
            keyring.cipher("nb_b").untoken(token, "name")
    finally:
        keyring.close()
