"""Shell completion: the real ``trocket`` command answering as bash's completion asks it
(argcomplete's protocol: ``_ARGCOMPLETE`` and ``COMP_LINE`` in the environment, the
candidates written to a file)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def complete(tmp_path, line: str) -> list[str]:
    out = tmp_path / "completions"
    env = dict(os.environ, _ARGCOMPLETE="1", _ARGCOMPLETE_STDOUT_FILENAME=str(out), COMP_LINE=line,
               COMP_POINT=str(len(line)), _ARGCOMPLETE_IFS="\n")
    done = subprocess.run([sys.executable, "-m", "trocket"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [c.strip() for c in out.read_text().split("\n") if c.strip()]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("trocket sen", {"send"}),
        ("trocket send --ti", {"--timeout"}),
        ("trocket admin ", {"topic", "group", "cluster", "broker", "msg"}),
    ],
)
def test_the_command_completes_subcommands_and_options(tmp_path, line, expected):
    got = set(complete(tmp_path, line))
    assert expected <= got, got


def test_without_the_shell_asking_the_command_runs_as_usual(tmp_path):
    done = subprocess.run([sys.executable, "-m", "trocket", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip()
