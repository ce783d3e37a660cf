"""The installed distribution's version, for every layer that reports it (the
``trocket --version`` line, the broker's GET_BROKER_RUNTIME_INFO).

A leaf: it imports only the standard library, so the broker reads the version here
instead of importing the ``trocket`` package's command-line side. The version is
declared once, in ``pyproject.toml``; an installed (or editable) tree reads it from the
package metadata, an uninstalled source tree from that ``pyproject.toml``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import tomllib
from pathlib import Path

__all__ = ["DISTRIBUTION", "UNKNOWN", "version"]

DISTRIBUTION = "trocket"
#: what :func:`version` says when neither the metadata nor a ``pyproject.toml`` knows
UNKNOWN = "0+unknown"


@functools.cache
def version() -> str:
    """``importlib.metadata.version("trocket")``; for an uninstalled source tree, the
    ``[project] version`` of the ``pyproject.toml`` beside this package's folder."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return _source_tree_version(Path(__file__).resolve().parent.parent / "pyproject.toml")


def _source_tree_version(pyproject: Path) -> str:
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return UNKNOWN
    if project.get("name") != DISTRIBUTION or not isinstance(project.get("version"), str):
        return UNKNOWN
    return project["version"]
