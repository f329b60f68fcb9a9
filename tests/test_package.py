"""The package's shape: the public surface, the import direction, and documented commands."""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import oh
from oh.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "oh"

# Lower layers never import higher ones: core <- storage <- services <- tools/host <- transports
# <- config <- cli. Only the command line imports config (the one module that picks concrete
# backends and opens them), and nothing imports the command line.
LAYERS = {
    "_version": 0,
    "errors": 0,
    "core": 1,
    "keys": 1,  # master keys, data keys, seals: below the storage that seals with them
    "storage": 2,
    "services": 3,  # notebooks, knowledge, access, query, view
    "verify": 3,
    "transfer": 3,
    "recall": 3,
    "profiles": 3,
    "tools": 4,
    "host": 4,
    "transports": 5,  # http, openapi, mcp, panel
    "client": 5,
    "testing": 5,
    "config": 6,
    "cli": 7,
    "__main__": 7,
}
ROOT_LAYER = 4  # the package root re-exports the library: never a transport, config or the CLI


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "oh":
        return None
    if len(parts) == 1:
        return ROOT_LAYER
    return LAYERS.get(parts[1])


def test_the_public_surface_is_exactly_all() -> None:
    exported = {
        name
        for name, value in vars(oh).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert exported <= set(oh.__all__)
    for name in oh.__all__:
        assert hasattr(oh, name), name


def test_the_root_imports_each_public_name_from_where_the_type_checker_sees_it() -> None:
    """``oh/__init__.py`` lists each name twice, for the type checker and for the lazy import:
    the two lists are the same, and ``__all__`` is exactly them."""
    tree = ast.parse((SRC / "__init__.py").read_text())
    checked = next(
        node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node)
    )
    typed = {
        alias.name: node.module
        for node in checked.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == oh._HOME
    assert oh.__all__ == sorted(["__version__", *typed])
    assert dir(oh) == sorted(set(dir(oh)) | set(oh.__all__))
    with pytest.raises(AttributeError):
        oh.no_such_name  # noqa: B018


def test_imports_flow_one_way() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        own = _layer(module)
        assert own is not None, f"{module} has no layer in LAYERS"
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                layer = _layer(target)
                if target == "oh":  # the version has its own module, so nothing needs the root
                    offenders.append(f"{module} imports the package root")
                elif layer is not None and layer > own:
                    offenders.append(f"{module} imports {target}")
    assert offenders == []


def test_only_the_command_line_parses_arguments_or_prints() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "cli") or path == SRC / "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
                offenders.append(f"{path.relative_to(SRC)} imports argparse")
            elif isinstance(node, ast.ImportFrom) and node.module == "argparse":
                offenders.append(f"{path.relative_to(SRC)} imports from argparse")
            elif isinstance(node, ast.Name) and node.id == "print":
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno} prints")
    assert offenders == []


def test_core_uses_only_the_standard_library_and_the_canonicalizer() -> None:
    allowed = set(sys.stdlib_module_names) | {"oh", "rfc8785"}
    for path in (SRC / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                assert node.module.split(".")[0] in allowed, (path, node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in allowed, (path, alias.name)


def test_every_cli_command_is_documented() -> None:
    documented = set(
        re.findall(r"^## `oh ([a-z-]+)", (ROOT / "docs" / "cli.md").read_text(), re.MULTILINE)
    )
    assert set(COMMANDS) | {"profile"} <= documented


def test_oh_version_prints_the_package_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "oh.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"oh {oh.__version__}"


def test_the_version_is_written_once_in_its_own_module() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    source = project["tool"]["setuptools"]["dynamic"]["version"]
    assert source == {"attr": "oh._version.__version__"}


def test_the_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:sh|bash|console)\n(.*?)```", readme.split("## ", 2)[1], re.S)
    commands = [line for block in blocks for line in block.splitlines() if line.strip()]
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test" in ci and "scripts/test" in commands[1]


def test_the_host_is_a_facade_with_no_public_store_or_service() -> None:
    """Transports use Host's methods, each of which checks who asks; none reaches through it
    into a store, the review service, the tools or the credentials."""
    from oh.profiles import Profiles
    from oh.services.access import Credentials, Documents
    from oh.services.knowledge import Knowledge
    from oh.services.notebooks import Notebooks
    from oh.storage.memory import InMemoryHostRegistry, InMemoryKnowledgeStore, InMemoryStore
    from oh.testing.hosts import in_memory_host
    from oh.testing.lifecycle import FakeClock
    from oh.tools import Tools

    host, _ = in_memory_host(FakeClock())
    inner = (
        InMemoryStore,
        InMemoryKnowledgeStore,
        InMemoryHostRegistry,
        Knowledge,
        Notebooks,
        Profiles,
        Tools,
        Credentials,
        Documents,
    )
    public = {name: value for name, value in vars(host).items() if not name.startswith("_")}
    assert not [name for name, value in public.items() if isinstance(value, inner)]
    for transport in (SRC / "transports").rglob("*.py"):
        assert not re.search(r"host\._\w+", transport.read_text()), transport


def test_the_shipped_code_and_docs_never_cite_a_document_the_project_does_not_ship() -> None:
    """The contracts are written in docs/; no docstring or page sends a user to "SPEC §n"."""
    shipped = [*SRC.rglob("*.py"), *SRC.rglob("*.sql"), *(ROOT / "docs").glob("*.md")]
    shipped += [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    citing = [str(p.relative_to(ROOT)) for p in shipped if re.search(r"\bSPEC\b", p.read_text())]
    assert citing == []


def test_the_distribution_is_oh_memory_and_no_page_tells_a_user_to_install_oh() -> None:
    """``oh`` on the package index is another project (a TCP/UDP echo server)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "oh-memory"
    assert project["scripts"] == {"oh": "oh.cli:main"}
    wrong = re.compile(r"pip install (-U |--upgrade )?['\"]?oh(\[|['\"\s]|$)", re.MULTILINE)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    sources = sorted((ROOT / "src" / "oh").rglob("*.py"))
    told = [
        f"{path.relative_to(ROOT)}: {hit.group()!r}"
        for path in [*pages, *sources]
        for hit in wrong.finditer(path.read_text())
        if "never" not in path.read_text()[max(0, hit.start() - 80) : hit.start()].lower()
        and "fetches another" not in path.read_text()[hit.end() : hit.end() + 40]
    ]
    assert told == []


def test_the_command_line_needs_no_extra_and_names_the_one_a_command_needs(tmp_path: Path) -> None:
    """On a core install (no numpy, no server packages) ``oh`` starts, and a command that needs
    an extra says which one to install, exit status 2, no traceback."""
    # A module set to None in sys.modules cannot be imported: ModuleNotFoundError, as on a core
    # install.
    missing = ("numpy", "uvicorn", "fastapi", "mcp", "libsql")
    hide = f"import sys; [sys.modules.__setitem__(m, None) for m in {missing!r}]"
    listing = subprocess.run(
        [sys.executable, "-c", f"{hide}; import oh.cli; oh.cli.build_parser(); print('ok')"],
        capture_output=True,
        text=True,
    )
    assert listing.stdout.strip() == "ok", listing.stderr
    cases = (
        (["serve"], "server", {}),
        (["index", "rebuild"], "server", {}),
        (["verify"], "libsql", {"OH_EMBEDDED_DRIVER": "libsql"}),
    )
    for argv, extra, environ in cases:
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                f"{hide}; from oh.cli import main; raise SystemExit(main(sys.argv[1:]))",
                *argv,
                "--data",
                str(tmp_path / "data"),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, **environ},
        )
        assert run.returncode == 2, run.stderr
        assert f"needs the {extra} extra" in run.stderr and "oh-memory[" in run.stderr
        assert "Traceback" not in run.stderr


def test_no_shell_block_of_the_docs_runs_an_oh_or_python_that_is_not_on_path() -> None:
    """After the README's install, ``oh`` and the project's Python are in ``.venv/bin``, not on
    ``PATH``: a page's shell block names them so, or it does not run as written."""
    fence = re.compile(r"^```(?:sh|bash|console)\n(.*?)^```$", re.S | re.M)
    bare = re.compile(r"^\s*(oh|python)\s|\|\s*oh\s", re.M)
    found = [
        f"{page.relative_to(ROOT)}: {line.strip()}"
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
        for block in fence.findall(page.read_text())
        for line in block.splitlines()
        if bare.search(line)
    ]
    assert found == []
