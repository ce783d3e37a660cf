"""Vectors printed by Java 4.9.8's own classes: a program of ``tests/acceptance/scripts``
compiled against the bundle and run, its output returned, so a test can check that the
vectors committed beside it are what Java prints today (skipped without the bundle)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "acceptance" / "scripts"


def java_prints(program: str, timeout: float = 120) -> str:
    """What ``scripts/<program>.java``'s ``main`` prints; ``pytest.skip`` without Java."""
    java_dir = str(SCRIPTS.parent / "java")
    for folder in (str(SCRIPTS.parent), java_dir):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    from java_tools import find_bundle

    bundle, why = find_bundle()
    if bundle is None:
        pytest.skip(why)
    source = SCRIPTS / f"{program}.java"
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([bundle.javac, "-cp", bundle.classpath, "-d", out, str(source)], check=True)
        return subprocess.run([bundle.java, *bundle.jdk17_opts, "-cp", f"{bundle.classpath}:{out}", program],
                              check=True, capture_output=True, text=True, timeout=timeout).stdout
