"""The commands the README and the guides in docs/ show still parse, and the README's test
command is exactly what CI runs.

Nothing runs and no stack is needed. Each ```bash, ```sh or ```console block is split into
commands (``&&``, ``||``, ``;``, ``|``, ``\\`` continuations, ``#`` comments). A ``cdc-lake``
command goes through the real ``cdc-lake`` parser: ``cdc_lake.ops.cli.main`` with the parser stopped
right after parsing, so an unknown subcommand, flag or value fails as it would for a reader. A
``python -m bench`` command goes through ``bench.__main__.cli_parser``. For the other tools
(pip, ruff, pyright, pytest, dg, ...) only the executable must be one the docs may name.
``[--flag]`` in a command (``stack status [--json]``) is checked with and without the flag.
docs/benchmarks-log.md is left out: it records the commands of past runs as they were.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import re
import shlex
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NoReturn
from unittest import mock

import pytest

from cdc_lake.ops import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README] + sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "benchmarks-log.md")
SHELL_LANGUAGES = {"bash", "sh", "console", "shell"}
# Executables whose arguments are not checked here: their own tools check them.
KNOWN = {
    "python3.11", "python", "python3", "pip", "ruff", "pyright", "lint-imports", "pytest",
    "dg", "dagster", "dagster-daemon", "dagster-webserver", "npx",
}  # fmt: skip
# python -m modules that are not the project's own.
KNOWN_MODULES = {"venv", "pip", "pytest"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<lang>[\w+-]*)[ \t]*$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
OPTIONAL = re.compile(r"^\[(?P<inner>[^\[\]]+)\]$")
SEPARATORS = {"&&", "||", ";", "|", "&"}
REDIRECTS = {">", ">>", "<", "&>"}


@dataclass(frozen=True)
class Command:
    where: str  # file:line of the command
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: {shlex.join(self.argv)}"


def shell_blocks(path: Path) -> list[tuple[int, str]]:
    """(line of the block's first line, its text) for each shell block of a Markdown file."""
    blocks: list[tuple[int, str]] = []
    lines = path.read_text().split("\n")
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, lang = opening["indent"], opening["fence"], opening["lang"].lower()
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.fullmatch(rf"[ \t]*{fence}`*[ \t]*", lines[i]):
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        if lang in SHELL_LANGUAGES:
            blocks.append((i - len(body) + 1, "\n".join(body)))
        i += 1
    return blocks


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(offset of its first line, text) of each line, a ``\\`` continuation joined to the next."""
    out: list[tuple[int, str]] = []
    start, parts = 0, []
    for offset, line in enumerate(text.split("\n")):
        if not parts:
            start = offset
        parts.append(line.removesuffix("\\"))
        if not line.endswith("\\"):
            out.append((start, " ".join(parts)))
            parts = []
    if parts:
        out.append((start, " ".join(parts)))
    return out


def split_commands(text: str) -> list[tuple[int, list[str]]]:
    """(line offset, argv) of each command in a block of shell text."""
    commands: list[tuple[int, list[str]]] = []
    for offset, line in logical_lines(text):
        if line.lstrip().startswith("$ "):  # a console prompt
            line = line.lstrip()[2:]
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        current: list[str] = []
        tokens = iter(lexer)
        for token in tokens:
            if token in SEPARATORS:
                if current:
                    commands.append((offset, current))
                current = []
            elif token in REDIRECTS:
                next(tokens, None)  # the file it redirects to
            else:
                current.append(token)
        if current:
            commands.append((offset, current))
    return commands


def commands_of(path: Path) -> list[Command]:
    found: list[Command] = []
    for start, text in shell_blocks(path):
        for offset, argv in split_commands(text):
            while argv and ASSIGNMENT.match(argv[0]):  # NAME=value before the command
                argv = argv[1:]
            if argv:
                found.append(Command(f"{path.relative_to(ROOT)}:{start + offset}", tuple(argv)))
    return found


def variants(argv: tuple[str, ...]) -> list[list[str]]:
    """The argv with each ``[--flag]`` left out and put in."""
    options: list[list[list[str]]] = []
    for token in argv:
        optional = OPTIONAL.match(token)
        options.append([[], shlex.split(optional["inner"])] if optional else [[token]])
    return [
        [t for part in combination for t in part] for combination in itertools.product(*options)
    ]


class _Parsed(Exception):
    def __init__(self, namespace: argparse.Namespace) -> None:
        super().__init__()
        self.namespace = namespace


def _parse(parse: Any, argv: list[str], what: str) -> argparse.Namespace:
    """``parse(argv)``, failing the test with argparse's own message on a usage error."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            return parse(argv)
    except SystemExit as e:
        if e.code == 0:  # --help
            return argparse.Namespace()
        pytest.fail(f"{what} does not parse:\n{stderr.getvalue().strip()}")


def parse_cdc_lake(argv: list[str]) -> argparse.Namespace:
    """``cdc-lake ARGV`` through ``cdc_lake.ops.cli.main``, stopped once its parser has parsed."""
    real = argparse.ArgumentParser.parse_args

    def parse_only(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        raise _Parsed(real(self, *args, **kwargs))

    def run(argv: list[str]) -> argparse.Namespace:
        with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_only):
            try:
                cli.main(argv)
            except _Parsed as parsed:
                return parsed.namespace
        raise AssertionError("cdc_lake.ops.cli.main returned without parsing its arguments")

    return _parse(run, argv, "cdc-lake " + shlex.join(argv))


@cache
def bench_parser() -> argparse.ArgumentParser:
    from bench.__main__ import cli_parser  # imports Dagster and Spark helpers: only when needed

    return cli_parser()


@cache
def extras() -> frozenset[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return frozenset(project.get("optional-dependencies", {}))


def check_python(args: list[str], command: str) -> None:
    if len(args) < 2 or args[0] != "-m":
        return  # a script or -c: nothing to check here
    module, rest = args[1], args[2:]
    if module == "bench":
        _parse(bench_parser().parse_args, rest, command)
    elif module.split(".")[0] not in KNOWN_MODULES:
        path = ROOT / Path(*module.split("."))
        assert path.with_suffix(".py").is_file() or (path / "__main__.py").is_file(), (
            f"{command}: no module {module} in the project"
        )


def check_pip(args: list[str], command: str) -> None:
    for arg in args:
        wanted = re.fullmatch(r"\.\[(?P<names>[\w,-]+)\]", arg)
        if wanted:
            missing = set(wanted["names"].split(",")) - extras()
            assert not missing, f"{command}: pyproject.toml has no extra {sorted(missing)}"


def check(argv: list[str]) -> None:
    """Fail unless the command is one the project's tools would accept."""
    command = shlex.join(argv)
    name = Path(argv[0]).name
    if name == "cdc-lake":
        parse_cdc_lake(argv[1:])
        return
    assert name in KNOWN, f"{command}: {name} is neither cdc-lake nor a tool the docs may name"
    if name.startswith("python"):
        check_python(argv[1:], command)
    elif name == "pip":
        check_pip(argv[1:], command)


ALL = [c for doc in DOCS for c in commands_of(doc)]


@pytest.mark.parametrize("command", ALL, ids=str)
def test_the_command_parses(command: Command):
    for argv in variants(command.argv):
        check(argv)


def test_the_readme_test_command_is_what_ci_runs():
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip()]
    fenced = [
        line for _, text in shell_blocks(README) for line in text.splitlines() if "pytest" in line
    ]
    assert len(fenced) == 1, f"the README should show one test command, not {fenced}"
    assert fenced[0] == ci[-1], "README's test command and .ci/run's differ"


def test_the_readme_and_guides_commands_are_found():
    readme = {shlex.join(c.argv) for c in commands_of(README)}
    assert {".venv/bin/cdc-lake demo", ".venv/bin/pytest", "python3.11 -m venv .venv"} <= readme
    # A guide's indented fences (in a list item) are read too; their sql/python are not shell.
    assert any(c.argv[:2] == ("python3.11", "-m") for c in ALL)
    assert any(Path(c.argv[0]).name == "cdc-lake" and c.argv[1] == "lake" for c in ALL)


@pytest.mark.parametrize(
    "argv",
    [
        ["cdc-lake", "stak", "up"],  # no such subcommand
        ["cdc-lake", "stack", "statuss"],  # no such action
        ["cdc-lake", "stack", "status", "--jsn"],  # no such flag
        ["cdc-lake", "lake", "replay", "--from-offset", "x"],  # not a number
        ["cdc-lake", "source", "resnapshot", "--table", "datalake.nothing"],  # not captured
        ["pip", "install", "-e", ".[nosuchextra]"],
        ["make", "all"],  # a tool the docs may not name
        ["python3.11", "-m", "bench.nosuchmodule"],
        [".venv/bin/python", "-m", "bench", "--only", "nosuchbenchmark"],
    ],
    ids=shlex.join,
)
def test_a_wrong_command_fails(argv: list[str]):
    with pytest.raises((pytest.fail.Exception, AssertionError)):
        check(argv)


def test_continuations_separators_comments_and_optional_flags_are_read():
    text = "A=1 tool --x 1 \\\n    --y 2  # a comment\ncdc-lake a && cdc-lake b [--c] > out.txt\n"
    assert split_commands(text) == [
        (0, ["A=1", "tool", "--x", "1", "--y", "2"]),
        (2, ["cdc-lake", "a"]),
        (2, ["cdc-lake", "b", "[--c]"]),
    ]
    assert variants(("cdc-lake", "b", "[--c]")) == [["cdc-lake", "b"], ["cdc-lake", "b", "--c"]]
