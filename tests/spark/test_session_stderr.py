"""The JVM's stderr passes through this process until an interrupt mutes it
(spark/session.py ``_ForwardedStderr``), shown with a child process in the JVM's place."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyspark")

CHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    from trocket.spark.session import _ForwardedStderr
    forwarded = _ForwardedStderr()
    with forwarded.inherited():  # as PySpark launches its JVM: it inherits fd 2
        jvm = subprocess.Popen([sys.executable, "-c",
            "import os, sys, time; os.write(2, b'before\\\\n'); sys.stdin.readline(); os.write(2, b'after\\\\n')"],
            stdin=subprocess.PIPE)
    print("ours while it runs", file=sys.stderr, flush=True)
    time.sleep(0.5)
    if sys.argv[1] == "mute":
        forwarded.mute()
    jvm.stdin.close()
    jvm.wait()
    time.sleep(0.3)  # the forwarding thread copies what it read
    print("ours at the end", file=sys.stderr, flush=True)
    """
)


@pytest.mark.parametrize("mode", ["forward", "mute"])
def test_the_jvms_stderr_is_forwarded_until_muted(mode):
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "before" in lines and "ours while it runs" in lines and lines[-1] == "ours at the end", lines
    assert ("after" in lines) is (mode == "forward"), lines
