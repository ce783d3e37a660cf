"""The version: declared once in pyproject.toml, read from the package metadata."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

import trocket
from trocket import _version

ROOT = Path(__file__).resolve().parent.parent


def test_the_version_is_the_metadata_s_and_pyproject_s():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _version.version() == importlib.metadata.version("trocket") == declared
    assert trocket.__version__ == declared


def test_an_uninstalled_tree_reads_its_pyproject(tmp_path):
    assert _version._source_tree_version(ROOT / "pyproject.toml") == _version.version()
    other = tmp_path / "pyproject.toml"
    assert _version._source_tree_version(other) == _version.UNKNOWN  # no file
    other.write_text('[project]\nname = "something-else"\nversion = "9.9"\n')
    assert _version._source_tree_version(other) == _version.UNKNOWN  # not ours
    other.write_text("[project\n")
    assert _version._source_tree_version(other) == _version.UNKNOWN  # not TOML


def test_other_missing_attributes_still_raise_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        trocket.no_such_thing  # noqa: B018
    assert not hasattr(trocket, "no_such_thing")
