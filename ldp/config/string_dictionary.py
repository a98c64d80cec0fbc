"""A string metric's candidate dictionary in the registry: inline or from a file.

`domain.strings.dictionary` lists the strings in the registry; `domain.strings.dictionary_file`
names a UTF-8 text file, relative to the registry file's folder, one string per line (LF or
CR LF; a blank line is the empty string; the file's last newline ends its last line).
`load_registry` reads each file once, through `read_dictionary_files`, which puts its strings in
the entry as `dictionary`: from then on both forms are one list, checked by
`dictionary_problem`. The dictionary is the server's decoding
choice and not in the fingerprint (ldp_telemetry.ldp.estimation.heavy_hitters).
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.protocols.pem import MAX_CANDIDATES, MAX_STRING_BYTES
from ldp_telemetry.ldp.protocols.string_keys import string_problem

#: Largest dictionary file: MAX_CANDIDATES lines of MAX_STRING_BYTES bytes and a CR LF.
MAX_DICTIONARY_FILE_BYTES = MAX_CANDIDATES * (MAX_STRING_BYTES + 2)


def dictionary_problem(values: Any, max_bytes: int) -> tuple[int | None, str] | None:
    """(position or None for the whole list, why) when `values` is not a usable dictionary for a
    metric of `max_bytes`: a list of at most MAX_CANDIDATES distinct strings that a client could
    report (string_keys.string_problem); None when it is."""
    if not isinstance(values, list):
        return None, f"must be a list of strings, got {type(values).__name__}"
    if len(values) > MAX_CANDIDATES:
        return None, (f"lists {len(values):,} strings, more than MAX_CANDIDATES "
                      f"({MAX_CANDIDATES:,})")
    seen: dict[bytes, int] = {}
    for position, value in enumerate(values):
        if not isinstance(value, str):
            return position, f"must be a string, got {value!r}"
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            return position, f"{value!r} is not valid Unicode (a lone surrogate)"
        problem = string_problem(data, max_bytes)
        if problem:
            return position, f"{value!r} {problem}"
        if data in seen:
            return position, f"{value!r} is listed twice (also at [{seen[data]}])"
        seen[data] = position
    return None


def read_dictionary_files(document: Any, folder: Path) -> Any:
    """`document` (a parsed registry) with every string metric's `dictionary_file`, in its
    current configuration and its history, read from `folder` into `dictionary`; the document
    itself when none names a file. RegistryError naming the field when a file cannot be read,
    is too large or is not UTF-8, or when an entry gives both fields."""
    metrics = document.get("metrics") if isinstance(document, Mapping) else None
    if not isinstance(metrics, list) or not any(_file_entries(metrics)):
        return document
    document = copy.deepcopy(document)
    for where, strings in _file_entries(document["metrics"]):
        field = f"{where}.domain.strings.dictionary_file"
        if "dictionary" in strings:
            raise RegistryError(f"{where}: give one of 'domain.strings.dictionary' and "
                                "'domain.strings.dictionary_file', not both", field)
        name = strings.pop("dictionary_file")
        if not isinstance(name, str) or not name:
            raise RegistryError(f"{where}: field 'domain.strings.dictionary_file' must be a "
                                f"file name relative to the registry's folder, got {name!r}",
                                field)
        values = _read_lines(folder / name, where, field)
        max_bytes = strings.get("max_bytes")
        if isinstance(max_bytes, int) and not isinstance(max_bytes, bool) and max_bytes > 0:
            problem = dictionary_problem(values, max_bytes)
            if problem:
                position, why = problem
                line = "" if position is None else f" line {position + 1}:"
                raise RegistryError(f"{where}: field 'domain.strings.dictionary_file' "
                                    f"({name}){line} {why}", field)
        strings["dictionary"] = values
    return document


def _file_entries(metrics: list) -> list[tuple[str, dict]]:
    """(path in the registry, its domain.strings object) of every entry naming a file."""
    found = []
    for position, entry in enumerate(metrics):
        if not isinstance(entry, Mapping):
            continue
        history = entry.get("history")
        earlier = history if isinstance(history, list) else []
        for where, config in [(f"metrics[{position}]", entry),
                              *((f"metrics[{position}].history[{i}]", e)
                                for i, e in enumerate(earlier))]:
            domain = config.get("domain") if isinstance(config, Mapping) else None
            strings = domain.get("strings") if isinstance(domain, Mapping) else None
            if isinstance(strings, dict) and "dictionary_file" in strings:
                found.append((where, strings))
    return found


def _read_lines(path: Path, where: str, field: str) -> list[str]:
    """The file's lines as strings (LF or CR LF; a blank line is the empty string)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_DICTIONARY_FILE_BYTES + 1)
    except OSError as error:
        raise RegistryError(f"{where}: field 'domain.strings.dictionary_file' cannot be read "
                            f"({path.name}: {error.strerror})", field) from None
    if len(data) > MAX_DICTIONARY_FILE_BYTES:
        raise RegistryError(f"{where}: field 'domain.strings.dictionary_file' names a file of "
                            f"more than MAX_DICTIONARY_FILE_BYTES ({MAX_DICTIONARY_FILE_BYTES:,})"
                            " bytes", field)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise RegistryError(f"{where}: field 'domain.strings.dictionary_file': {path.name} is "
                            f"not UTF-8 text (line {line}: {error.reason})", field) from None
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines[-1] == "" else lines
