"""How the production settings are read from the environment: one set of rules for the prod
resources (``cdc_lake/resources/prod.py``) and the MSK Connect settings
(``cdc_lake/streaming/msk/settings.py``).

Values are stripped and an empty variable is unset (its default applies). A variable may have
fallbacks (``CDC_LAKE_AWS_REGION``, then ``AWS_REGION``): the first one set wins. An integer is
decimal digits only. Missing variables and bad values are collected while reading, then raised
together in one ``ProdSettingsError`` that names every one, so one fix round is enough. The
reader never logs a value; it is given no secret to read.
"""

from __future__ import annotations

from collections.abc import Mapping


class ProdSettingsError(ValueError):
    """A production setting is missing or invalid; the message names every variable."""


class EnvReader:
    """The environment as production reads it. Missing and bad variables are collected, then
    raised together by ``check``."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        self.missing: list[str] = []
        self.problems: list[str] = []

    def find(self, *names: str) -> tuple[str, str] | None:
        """The first of ``names`` that is set, and its value (later names are fallbacks)."""
        for name in names:
            value = self.environ.get(name, "").strip()
            if value:
                return name, value
        return None

    def get(self, *names: str) -> str | None:
        found = self.find(*names)
        return found[1] if found else None

    def require(self, *names: str) -> str:
        value = self.get(*names)
        if value is None:
            self.add_missing([names[0]])
        return value or ""

    def add_missing(self, names: list[str]) -> None:
        self.missing += [n for n in names if n not in self.missing]

    def integer(self, *names: str, what: str = "a whole number") -> int | None:
        """The value as an int; None when unset, or when bad (then named as a problem)."""
        found = self.find(*names)
        if found is None:
            return None
        name, value = found
        if not (value.isascii() and value.isdecimal()):
            self.problems.append(f"{name}={value!r} is not {what}")
            return None
        return int(value)

    def check(self, missing_intro: str, suffix: str = "") -> None:
        """Raise one ``ProdSettingsError`` naming every missing variable and bad value."""
        problems = list(self.problems)
        if self.missing:
            problems.insert(0, f"{missing_intro}: {', '.join(self.missing)}")
        if problems:
            raise ProdSettingsError(". ".join(problems) + suffix)
