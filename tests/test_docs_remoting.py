"""docs/remoting.md is true: its Python blocks run, in order, in one module, and each
prints exactly the ``text`` block that follows it; its benchmark command runs."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import subprocess
import sys
import types

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "remoting.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```\n", re.M | re.S)


def blocks() -> list[tuple[str, str, int]]:
    """(language, code, line) of every fenced block, in order."""
    text = DOC.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in _BLOCK.finditer(text)]


def test_every_python_block_runs_and_prints_what_the_page_shows():
    found = blocks()
    module = types.ModuleType("remoting_tutorial")
    sys.modules[module.__name__] = module  # the tutorial's classes live in a real module
    try:
        ran = 0
        for i, (lang, code, line) in enumerate(found):
            if lang != "python":
                continue
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{DOC}:{line}", "exec"), module.__dict__)
            ran += 1
            following = found[i + 1] if i + 1 < len(found) else None
            if following is not None and following[0] == "text":
                assert out.getvalue() == following[1], f"the block at line {line} printed {out.getvalue()!r}"
            else:
                assert out.getvalue() == "", f"the block at line {line} printed output the page does not show"
        assert ran >= 8
    finally:
        del sys.modules[module.__name__]


def test_the_benchmark_command_runs():
    (command,) = [code for lang, code, _ in blocks() if lang == "console" and "remoting_echo" in code]
    argv = command.strip().removeprefix("$ ").split()
    assert argv[:2] == [".venv/bin/python", "benchmarks/remoting_echo.py"]
    root = DOC.parents[1]
    done = subprocess.run(
        [sys.executable, str(root / argv[1]), *argv[2:], "--seconds", "0.05", "--rounds", "1"],
        capture_output=True, text=True, timeout=300, cwd=root,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "typed/s" in lines[1] and "cpu cost" in lines[1]
    assert [line.split()[0] for line in lines[2:]] == ["ROCKETMQ"] * 5
