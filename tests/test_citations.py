"""Citations a reader can follow: the code and the documents cite papers by key
(`[Fang25] eq. 4`), every key resolves in docs/references.md, and no file names a paper by the
name of a private copy."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["ldp", "schemas", "transforms", "pipelines", "runners", "benchmarks", "demo", "docs",
           "README.md", "setup.py"]
TEXT_SUFFIXES = {".py", ".md", ".avsc", ".json", ".sh", ".txt", ".cfg", ".toml", ".ini"}
#: Names of local paper copies (stems, with or without an extension), written in pieces so that
#: this file does not match itself.
PAPER_FILES = re.compile("|".join(re.escape(stem) for stem in (
    "consistency-" + "norm-hyb", "consistency-" + "arxiv", "square-" + "wave-ems",
    "wiener-" + "deconvolution", "rws-" + "frequency-protocols")))
KEY = re.compile(r"\[([A-Z][A-Za-z]+\d{2})\]")
#: [Wang20] with an equation, section, table, algorithm or appendix must name its version.
WANG20_WITHOUT_VERSION = re.compile(r"\[Wang20\]\s+(?:eq|§|Table|Algorithm|Appendix|Theorem)")


def scanned_files() -> list[Path]:
    files = []
    for name in SCANNED:
        path = REPO_ROOT / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(p for p in path.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES
                         and "__pycache__" not in p.parts)
    return sorted(files)


def test_the_scan_sees_the_project():
    names = {p.relative_to(REPO_ROOT).as_posix() for p in scanned_files()}
    assert {"README.md", "docs/references.md", "ldp/protocols/base.py"} <= names


@pytest.mark.parametrize("path", scanned_files(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_no_paper_is_cited_by_file_name(path):
    text = path.read_text(encoding="utf-8")
    found = [(text.count("\n", 0, m.start()) + 1, m.group()) for m in PAPER_FILES.finditer(text)]
    assert not found, f"cite by key ([Fang25] eq. 4), not by file name: line, name {found}"


def test_every_cited_key_is_in_the_references():
    defined = set(KEY.findall((REPO_ROOT / "docs" / "references.md").read_text(encoding="utf-8")))
    assert {"Wang20", "Li20", "Fang23", "Fang25"} <= defined
    for path in scanned_files():
        text = path.read_text(encoding="utf-8")
        unknown = set(KEY.findall(text)) - defined
        assert not unknown, f"{path}: keys {sorted(unknown)} are not in docs/references.md"
        missing_version = WANG20_WITHOUT_VERSION.findall(text)
        assert not missing_version, f"{path}: [Wang20] numbers must say 'journal' or 'NDSS'"
