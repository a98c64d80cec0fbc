"""Errors a user can fix, and the one base class the command line catches.

Everything this package raises because of what a user gave it (a registry, a flag, an input
file, a store URL, a job's output folder) is a `UserError`: it names the `field` at fault (a
registry field such as ``metrics[2].epsilon``, a job setting such as ``window``) and says what
is wrong in the library's own words, never in the vocabulary of one front end. The command line
maps `field` to its flag (``window`` -> ``--window``) in one table and exits with status 2;
any other exception is a bug and keeps its traceback (exit status 1).

`UserError` subclasses ValueError, so callers that caught ValueError before still do.
"""
from __future__ import annotations


class UserError(ValueError):
    """A problem in what the user gave: `field` names it (None when no single field does)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def __reduce__(self) -> tuple[type, tuple[str, str | None]]:
        return type(self), (self.message, self.field)


class ConfigError(UserError):
    """A job or command setting is invalid (`field`: the setting, e.g. ``window``)."""


class RegistryError(UserError):
    """The metric registry is invalid (`field`: the path of the field in the registry)."""


class InputError(UserError):
    """An input file (CSV of true values, estimates, reports given by name) cannot be used."""


class StoreError(UserError):
    """An estimate store cannot be opened, created or written (`field` is usually ``store``)."""
