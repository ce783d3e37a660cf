"""codecs/namespace.py is Java 4.9.8's NamespaceUtil: every row of
``data/namespace_vectors.json`` (printed by Java's own class,
``tests/acceptance/scripts/NamespaceVectors.java``) holds; the last test runs that
program again when Java is here and checks the file is what it prints."""

from __future__ import annotations

import json
from pathlib import Path

from trocket.codecs.namespace import (
    is_already_with_namespace,
    without_namespace,
    wrap_namespace,
    wrap_namespace_and_retry,
)

from ..java_vectors import java_prints

VECTORS = Path(__file__).resolve().parent / "data" / "namespace_vectors.json"
ROWS = json.loads(VECTORS.read_text())

FUNCTIONS = {
    "wrap": lambda ns, name: wrap_namespace(ns, name),
    "without": lambda ns, name: without_namespace(name, ns),
    "already": lambda ns, name: is_already_with_namespace(name, ns),
    "retry": lambda ns, name: wrap_namespace_and_retry(ns, name),
    "without_any": lambda ns, name: without_namespace(name),
}


def test_every_row_is_java_s_answer():
    wrong = [(fn, ns, name, want, FUNCTIONS[fn](ns, name)) for fn, ns, name, want in ROWS
             if FUNCTIONS[fn](ns, name) != want]
    assert len(ROWS) > 400 and wrong == []


def test_vectors_file_is_what_java_prints():
    """Java's classes, run now, print exactly the committed vectors."""
    assert json.loads(java_prints("NamespaceVectors")) == ROWS
