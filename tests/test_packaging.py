"""The wheel installs the repository's folders as subpackages of ``trocket``."""

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SUBPACKAGES = ["codecs", "remoting", "broker", "client", "conformance", "spark"]


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True, capture_output=True,
    )
    [wheel] = dist.glob("trocket-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    # Apache-2.0 as SPDX metadata, with the license and notice files in the wheel
    assert {f"{info}/licenses/LICENSE", f"{info}/licenses/NOTICE"} <= set(names)
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], capture_output=True, text=True)
    assert pip.returncode == 0, f"pip install of the wheel failed:\n{pip.stdout}\n{pip.stderr}"
    code = (
        "import importlib, trocket\n"
        f"for name in {SUBPACKAGES!r}:\n"
        "    mod = importlib.import_module('trocket.' + name)\n"
        "    print(mod.__name__, mod.__file__)\n"
        "import trocket.codecs.serialize, trocket.conformance.golden\n"
        "from importlib.resources import files\n"
        "assert (files('trocket.conformance') / 'golden' / 'java-4.9.8' / 'manifest.json').is_file()\n"
        "assert (files('trocket.conformance') / 'golden' / 'captures' / 'cpp-produce-pull' / 'manifest.json').is_file()\n"
        "assert (files('trocket.conformance') / 'captures' / 'js-produce-consume.pcap').is_file()\n"
    )
    out = subprocess.run([str(py), "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [f"trocket.{n}" for n in SUBPACKAGES]
    for line in lines:  # imported from the venv, not from this checkout
        assert str(env_dir) in line.split()[1]
    ok = subprocess.run([str(env_dir / "bin" / "trocket"), "--version"], capture_output=True, text=True)
    assert ok.returncode == 0
    # The wheel carries the compiled codec accelerator, and the installed trocket uses it
    # (unless this run forces the pure path: TROCKET_PURE is inherited).
    check = "from trocket.codecs import accel; print(accel.ACTIVE, accel.REASON)"
    active = subprocess.run([str(py), "-c", check], cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    if os.environ.get("TROCKET_PURE", "") in ("", "0"):
        assert active.startswith("True"), f"the wheel's accelerator is not in use: {active}"
        assert any(n.startswith("trocket/codecs/_accel.") and n.endswith(".so") for n in zipfile.ZipFile(wheel).namelist())
    # The standard library's codecs module is not shadowed.
    std = subprocess.run([str(py), "-c", "import codecs; print(codecs.__file__)"], capture_output=True, text=True)
    assert "site-packages" not in std.stdout
