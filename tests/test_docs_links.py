"""Links a reader can follow: every relative link of the checkout's documents (README.md,
CONTRIBUTING.md, CHANGELOG.md, docs/*.md) names a file or folder of the repository, and every
`#anchor` names a heading of its target, as GitHub renders it.

The documents are located relative to this file: the test is about the checkout, not the
installed package. Links inside code (fenced blocks and `inline code`) are not links; absolute
URLs (`https:`, `mailto:`, ...) are not checked.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/*.md"]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+).*?\1")
#: [text](target) and ![alt](target); the target may carry a "title" after a space.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
#: [label]: target, optionally followed by a quoted title and nothing else (a reference
#: definition; "[a, b]: the rest of a sentence" is not one).
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?"
                       r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*$")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def documents() -> list[Path]:
    found = []
    for pattern in DOCUMENTS:
        found.extend(sorted(REPO_ROOT.glob(pattern)))
    return found


def outside_fences(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        lines.append((number, line))
    return lines


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code blanked out."""
    return [(number, INLINE_CODE.sub(lambda m: " " * len(m.group()), line))
            for number, line in outside_fences(text)]


def heading_anchor(heading: str) -> str:
    """GitHub's anchor of a heading's text: links reduced to their text, code marks and other
    punctuation dropped (letters, digits, '-', '_' and spaces kept), lower case, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    kept = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file; a repeated heading gets -1, -2, ... as on
    GitHub."""
    seen: dict[str, int] = {}
    result = set()
    for _, line in outside_fences(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        anchor = heading_anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        result.add(anchor if count == 0 else f"{anchor}-{count}")
    return result


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every relative link of a Markdown file."""
    links = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        targets = [m.group(1) for m in INLINE_LINK.finditer(line)]
        reference = REFERENCE.match(line)
        if reference:
            targets.append(reference.group(1))
        links.extend((number, target) for target in targets
                     if target and not SCHEME.match(target) and not target.startswith("//"))
    return links


def problem(document: Path, target: str) -> str | None:
    """Why a relative link of `document` does not resolve, or None when it does."""
    location, _, anchor = target.partition("#")
    if location:
        resolved = (document.parent / unquote(location)).resolve()
        if not resolved.is_relative_to(REPO_ROOT):
            return f"{target}: leaves the repository"
        if not resolved.exists():
            return f"{target}: no such file"
    else:
        resolved = document
    if anchor:
        if resolved.is_dir() or resolved.suffix != ".md":
            return f"{target}: an anchor into a file that is not Markdown"
        if unquote(anchor) not in anchors(resolved):
            return f"{target}: no heading with this anchor in {resolved.relative_to(REPO_ROOT)}"
    return None


def test_the_documents_are_found():
    names = {p.relative_to(REPO_ROOT).as_posix() for p in documents()}
    assert {"README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/cli.md",
            "docs/getting-started.md", "docs/references.md"} <= names


def test_anchors_follow_github():
    assert heading_anchor("Live run (`ldp run --follow`)") == "live-run-ldp-run---follow"
    assert heading_anchor("6. Compare with the truth") == "6-compare-with-the-truth"
    assert heading_anchor("Pub/Sub on Dataflow") == "pubsub-on-dataflow"
    assert heading_anchor("Example queries (Grafana / Superset panels)") == \
        "example-queries-grafana--superset-panels"
    assert heading_anchor("[Wiener](wiener.md) estimators") == "wiener-estimators"


def test_links_in_code_are_not_links(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```\n[a](missing.md)\n```\n`[b](missing.md)` [c](#title)\n"
                    "[d]: other.md\n[0, 1]: the unit interval\n", encoding="utf-8")
    assert relative_links(page) == [(6, "#title"), (7, "other.md")]


@pytest.mark.parametrize("document", documents(),
                         ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_resolves(document):
    broken = [f"line {number}: {reason}" for number, target in relative_links(document)
              if (reason := problem(document, target))]
    assert broken == [], f"{document.relative_to(REPO_ROOT)}: broken links {broken}"
