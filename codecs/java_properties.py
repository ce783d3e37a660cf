"""Java ``.properties`` text (``key=value`` lines): what ``broker.conf`` files and the
configuration codes' bodies (UPDATE_BROKER_CONFIG 25, GET_BROKER_CONFIG 26, the name
server's 318/319) hold, read as ``java.util.Properties.load`` reads them."""

from __future__ import annotations

__all__ = ["parse_properties"]


def parse_properties(text: str) -> list[tuple[int, str, str]]:
    """Java ``.properties`` -> ``[(line number, key, value)]``: ``#``/``!`` comments,
    ``key=value``, ``key: value`` or ``key value``, backslash line continuation and the
    usual escapes (``\\t \\n \\uXXXX``)."""
    out: list[tuple[int, str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        # continuation: an odd number of trailing backslashes
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        key_chars: list[str] = []
        j = 0
        while j < len(line):
            c = line[j]
            if c == "\\" and j + 1 < len(line):
                key_chars.append(line[j : j + 2])
                j += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            j += 1
        rest = line[j:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        out.append((lineno, _unescape("".join(key_chars)), _unescape(rest).rstrip()))
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    j = 0
    while j < len(s):
        c = s[j]
        if c == "\\" and j + 1 < len(s):
            n = s[j + 1]
            if n == "u" and j + 6 <= len(s):
                try:
                    out.append(chr(int(s[j + 2 : j + 6], 16)))
                    j += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(n, n))
            j += 2
            continue
        out.append(c)
        j += 1
    return "".join(out)
