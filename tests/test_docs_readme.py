"""The README stays a newcomer's page (issue 21): short, with the manuals in docs/, and
every link of the README and of docs/*.md points at a file (and a heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "examples" / "README.md"]
#: ``[text](target)``, not images, not absolute URLs
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
README_MAX_LINES = 200


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of ``page``'s headings: lower case, punctuation but ``-`` and
    ``_`` dropped, spaces to ``-``."""
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # code blocks hold no links
    found = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            found.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            found.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return found


def test_the_readme_is_short():
    lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: manuals go to docs/ (at most {README_MAX_LINES})"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page):
    assert broken_links(page) == []


def test_the_link_checker_finds_a_broken_link(tmp_path):
    (tmp_path / "b.md").write_text("# A heading, here\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#a-heading-here) [gone](c.md) [bad](b.md#elsewhere) [web](https://x.org/y)\n"
                    "```\n[in code](nothere.md)\n```\n")
    assert broken_links(page, tmp_path) == ["a.md: c.md (no such file)", "a.md: b.md#elsewhere (no such heading)"]
