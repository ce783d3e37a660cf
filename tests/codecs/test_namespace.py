"""codecs/namespace.py is Java 4.9.8's NamespaceUtil: every row of
``data/namespace_vectors.json`` (printed by Java's own class,
``tests/acceptance/scripts/NamespaceVectors.java``) holds; the last test runs that
program again when Java is here and checks the file is what it prints."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from trocket.codecs.namespace import (
    is_already_with_namespace,
    without_namespace,
    wrap_namespace,
    wrap_namespace_and_retry,
)

VECTORS = Path(__file__).resolve().parent / "data" / "namespace_vectors.json"
SOURCE = Path(__file__).resolve().parent.parent / "acceptance" / "scripts" / "NamespaceVectors.java"
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
    sys.path.insert(0, str(SOURCE.parent.parent))
    sys.path.insert(0, str(SOURCE.parent.parent / "java"))
    from java_tools import find_bundle

    bundle, why = find_bundle()
    if bundle is None:
        pytest.skip(why)
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([bundle.javac, "-cp", bundle.classpath, "-d", out, str(SOURCE)], check=True)
        printed = subprocess.run([bundle.java, *bundle.jdk17_opts, "-cp", f"{bundle.classpath}:{out}",
                                  "NamespaceVectors"], check=True, capture_output=True, text=True, timeout=120).stdout
    assert json.loads(printed) == ROWS
