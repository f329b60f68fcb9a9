"""Every command but `oh serve` and `oh token create` refuses data that is not there.

A mistyped `--data` (or `OH_DATA`, or an embedded `--memory-url`/`--knowledge-url` file) must
not yield fresh empty databases that `oh verify` calls OK: the command exits 2 with one
`oh COMMAND: not_found: ...` line and creates nothing. Only the two commands that start a data
directory create one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oh.cli import main
from oh.config import Locations, is_postgres_url, open_knowledge_store, open_memory_store


@pytest.fixture(autouse=True)
def _no_locations_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OH_DATA", "OH_MEMORY_URL", "OH_KNOWLEDGE_URL", "OH_AGENT_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real export files of both kinds, made by the commands themselves."""
    where = tmp_path_factory.mktemp("exports")
    data = where / "data"
    data.mkdir()
    assert main(["demo", "--data", str(data)]) == 0
    memory, knowledge = where / "memory.jsonl", where / "knowledge.jsonl"
    common = ["--data", str(data), "--quiet", "--out"]
    assert main(["export", "--notebooks", *common, str(memory)]) == 0
    assert main(["export", "--knowledge", *common, str(knowledge)]) == 0
    return {"memory": memory, "knowledge": knowledge}


def _commands(exports: dict[str, Path]) -> dict[str, list[str]]:
    return {
        "verify": ["verify"],
        "verify --json": ["verify", "--json"],
        "purge": ["purge"],
        "purge --every": ["purge", "--every", "5m"],
        "index rebuild": ["index", "rebuild"],
        "export notebooks": ["export", "--notebooks"],
        "export knowledge": ["export", "--knowledge"],
        "import notebooks": ["import", str(exports["memory"]), "--quiet"],
        "import knowledge": ["import", str(exports["knowledge"]), "--quiet"],
        "profile preview --owner": ["profile", "preview", "research", "--owner", "ann"],
        "profile install": ["profile", "install", "research", "--owner", "ann"],
        "profile list": ["profile", "list", "--owner", "ann"],
        "mcp": ["mcp", "--notebook", "nb_0123456789abcdef"],
        "document put": ["document", "put", "report-42", "--owner", "ann"],
        "notebook open": ["notebook", "open", "--owner", "ann", "--document", "d", "--run", "r"],
        "demo": ["demo"],
    }


COMMANDS = list(_commands({"memory": Path(), "knowledge": Path()}))


def _tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


def _refused(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    # oh mcp checks its agent token first; give it one so the locations are what is refused.
    monkeypatch.setenv("OH_AGENT_TOKEN", "agent-token-of-some-notebook")
    capsys.readouterr()
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 2, (argv, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_data_dir_that_does_not_exist_is_refused_and_nothing_is_created(
    command: str,
    exports: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = tmp_path / "typo" / "oh-data"
    argv = [*_commands(exports)[command], "--data", str(missing)]
    line = _refused(argv, capsys, monkeypatch)
    assert line == (
        f"oh {argv[0]}: not_found: data directory {missing} does not exist"
        " (only oh serve and oh token create start one)"
    )
    assert _tree(tmp_path) == set()


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "demo"])
def test_a_database_file_that_does_not_exist_is_refused_and_nothing_is_created(
    command: str,
    exports: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Both URLs name missing files, in a missing directory: whichever database the command
    # opens first is refused, and neither file nor directory appears.
    missing = tmp_path / "typo" / "oh.db"
    urls = ["--memory-url", str(missing), "--knowledge-url", f"file:{missing}"]
    line = _refused([*_commands(exports)[command], *urls], capsys, monkeypatch)
    assert line.endswith(
        f": not_found: database {missing} does not exist"
        " (only oh serve and oh token create start one)"
    )
    assert _tree(tmp_path) == set()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://oh_app:s3cret@db.internal:5432/oh",
        "postgres://oh_app@db.internal/oh",
        "postgresql:///oh?host=/run/postgresql",
        "postgres://",
    ],
)
def test_a_postgresql_url_starts_with_postgresql_or_postgres_then_two_slashes(url: str) -> None:
    assert is_postgres_url(url)


@pytest.mark.parametrize(
    "url",
    [
        None,
        "",
        "postgres",
        "postgresql",
        "postgresql:oh",
        "postgres:/db/oh",
        "POSTGRESQL://oh_app@db.internal/oh",  # libpq reads the scheme in lower case only
        "Postgres://oh_app@db.internal/oh",
        " postgresql://oh_app@db.internal/oh",
        "file:postgresql://oh_app@db.internal/oh",
        "libsql:postgres://x",
        "oh-data/memory.db",
    ],
)
def test_anything_else_is_not_a_postgresql_url(url: str | None) -> None:
    assert not is_postgres_url(url)


def test_a_bare_postgres_is_a_file_name_and_an_upper_case_scheme_has_no_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _refused(["verify", "--memory-url", "postgres"], capsys, monkeypatch) == (
        "oh verify: not_found: database postgres does not exist"
        " (only oh serve and oh token create start one)"
    )
    upper = ["verify", "--memory-url", "POSTGRESQL://oh_app@db.internal/oh"]
    assert _refused(upper, capsys, monkeypatch) == (
        "oh verify: invalid_argument: no storage backend for POSTGRESQL:// URLs in this install"
    )
    assert _tree(tmp_path) == set()


@pytest.mark.parametrize("command", ["verify", "index rebuild", "mcp"])
def test_a_command_of_both_databases_refused_the_second_creates_not_even_the_first(
    command: str,
    exports: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    missing = tmp_path / "typo.db"
    argv = [*_commands(exports)[command], "--data", str(data), "--knowledge-url", str(missing)]
    line = _refused(argv, capsys, monkeypatch)
    assert f"not_found: database {missing} does not exist" in line
    assert _tree(tmp_path) == {"data"}


def test_oh_data_from_the_environment_is_held_to_the_same_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OH_DATA", str(tmp_path / "typo"))
    line = _refused(["verify"], capsys, monkeypatch)
    assert f"data directory {tmp_path / 'typo'} does not exist" in line
    assert _tree(tmp_path) == set()


def test_the_default_data_dir_is_not_created_by_a_command_that_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _refused(["verify"], capsys, monkeypatch)
    assert line.startswith("oh verify: not_found: data directory oh-data does not exist")
    assert _tree(tmp_path) == set()


def test_a_data_dir_that_is_a_file_is_refused_by_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    in_the_way = tmp_path / "oh-data"
    in_the_way.write_text("not a directory")
    line = _refused(["verify", "--data", str(in_the_way)], capsys, monkeypatch)
    assert f"not_found: data directory {in_the_way} is not a directory" in line
    line = _refused(
        ["token", "create", "--owner", "ann", "--data", str(in_the_way)], capsys, monkeypatch
    )
    assert line.startswith(f"oh token: invalid_argument: cannot create data directory {in_the_way}")
    assert in_the_way.read_text() == "not a directory"


def test_oh_token_create_starts_a_data_dir_that_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "new" / "oh-data"
    assert main(["token", "create", "--owner", "ann", "--data", str(data)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1]
    assert {"knowledge.db", "memory.db"} <= set(os.listdir(data))
    # It started the master key too (beside the data directory): open the stores as oh does.
    open_memory_store(Locations(data, create=False)).close()
    open_knowledge_store(Locations(data, create=False)).close()


def test_a_preview_without_an_owner_opens_no_database_so_needs_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo"
    assert main(["profile", "preview", "research", "--data", str(missing)]) == 0
    assert "verdict: can be installed" in capsys.readouterr().out
    assert _tree(tmp_path) == set()


def test_an_import_file_that_does_not_exist_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "memory.jsonl"
    line = _refused(["import", str(missing), "--data", str(tmp_path)], capsys, monkeypatch)
    assert line == f"oh import: not_found: no export file at {missing}"
    assert _tree(tmp_path) == set()


def test_an_export_into_a_directory_that_does_not_exist_is_one_line_not_a_traceback(
    exports: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = exports["memory"].parent / "data"
    out = tmp_path / "typo" / "memory.jsonl"
    argv = ["export", "--notebooks", "--data", str(data), "--out", str(out)]
    line = _refused(argv, capsys, monkeypatch)
    assert line == f"oh export: invalid_argument: cannot write {out}: No such file or directory"
    assert _tree(tmp_path) == set()
