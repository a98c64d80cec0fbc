"""Names from the data as text shows them: escaped so that they cannot reorder, hide or
recolour what a terminal or a page shows around them, and read back as typed.

`printable` is the one rule for names shown in text output and on the dashboard's pages;
`from_printable` is its inverse and `typed_name` reads a name given on the command line;
`terminal_safe` escapes a message that is read, not typed back.
"""
from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Collection

#: Unicode categories shown escaped: control characters (C0, DEL, C1), format characters (the
#: bidirectional overrides, embeddings and isolates U+202A–U+202E, U+2066–U+2069, the marks
#: U+200E, U+200F, U+061C, zero-width characters), line and paragraph separators, surrogates.
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def printable(text: str) -> str:
    """`text` with every character of `ESCAPED_CATEGORIES` written as a visible escape
    (``\\u202e``, ``\\x1b``), so that a name from the data cannot reorder, hide or recolour
    what a terminal or a page shows around it, and every backslash doubled, so that two names
    never show alike (a control character and its escape typed out: ``\\x07`` and
    ``\\\\x07``). The one rule for names shown in text output and on the dashboard's pages;
    `from_printable` reads a name typed back as it was shown."""
    if text.isprintable() and text.isascii() and "\\" not in text:
        return text
    return "".join("\\\\" if char == "\\" else
                   _escape(char) if unicodedata.category(char) in ESCAPED_CATEGORIES else char
                   for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000
                                                 else f"\\U{code:08x}")


def terminal_safe(text: str) -> str:
    """`text` with the characters of `ESCAPED_CATEGORIES` escaped as `printable` escapes them,
    backslashes left as they are: for messages (an error naming a value from the data) that
    are read, not typed back."""
    if text.isprintable() and text.isascii():
        return text
    return "".join(_escape(char) if unicodedata.category(char) in ESCAPED_CATEGORIES else char
                   for char in text)


#: One escape of `printable`: a doubled backslash, or \xHH, \uHHHH, \UHHHHHHHH.
_ESCAPE = re.compile(r"\\(?:(\\)|x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))")


def from_printable(shown: str) -> str | None:
    """The name `printable` shows as `shown` (its inverse), or None where `shown` is not what
    `printable` shows of any name (a backslash that begins none of its escapes, an escape of
    a character it shows as it is)."""
    name = _ESCAPE.sub(_unescape, shown)
    return name if printable(name) == shown else None


def typed_name(typed: str, names: Collection[str]) -> str:
    """The name given on the command line as `typed`: the one of `names` that the text output
    shows as `typed` (`printable`), else `typed` itself (a name typed as it is, where no name
    shows so; `printable` is one-to-one, so a shown text means one name)."""
    name = from_printable(typed)
    return name if name is not None and name in names else typed


def _unescape(match: re.Match) -> str:
    """The character of one escape; an escape beyond U+10FFFF, which names none, as it is
    (`from_printable` then finds no name: `printable` would double its backslash)."""
    backslash, *codes = match.groups()
    if backslash:
        return "\\"
    code = int(next(code for code in codes if code), 16)
    return chr(code) if code <= sys.maxunicode else match.group(0)
