"""The layers of docs/design.md, checked from the real imports of every module.

Every module of every layer is parsed (``ast``; the accelerator's ``.pyx`` by its
``import`` lines), relative imports resolved, and every import counted: at module
level, inside functions, under ``if TYPE_CHECKING:``. The rules:

* codecs/ is pure: no trio, sockets, threads, processes, clocks or file-system modules
  (:data:`IO_MODULES`); readers over byte streams a caller opened are fine. It imports
  nothing of trocket above it.
* codecs' *wire part* (:data:`WIRE`: frames, the command, the two header serializers,
  serialize, errors, the HashMap order, Java's integer bounds, the accelerator and the
  custom-header machinery) imports only the wire part: no RocketMQ header, no message format.
* remoting/ imports only the wire part of codecs (plus the capture record its tap
  writes), and nothing of broker, client, conformance or spark; a subprocess checks
  that ``import trocket.remoting`` loads no other codecs module.
* client/ never imports broker/, broker/ never imports client/.
* spark/ imports codecs only; conformance/ imports neither broker nor client.
* No layer imports the command side, ``trocket/`` (the CLI, its helpers), but for
  :data:`COMMAND_SIDE_ALLOWED`: ``trocket._version``, a leaf of the standard library
  that reads the package metadata (checked here too).

remoting's own modules import each other without a cycle:
``tests/remoting/test_module_graph.py``.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator

import attrs
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: codecs' wire part: what remoting may import. Packages stand for their modules.
WIRE = frozenset({
    "trocket.codecs",
    "trocket.codecs.command",
    "trocket.codecs.frame",
    "trocket.codecs.header_binary",
    "trocket.codecs.header_json",
    "trocket.codecs.serialize",
    "trocket.codecs.errors",
    "trocket.codecs.java_hashmap",
    "trocket.codecs.java_ints",
    "trocket.codecs.accel",
    "trocket.codecs._accel",
    "trocket.codecs.custom_header",
})

#: What remoting may import of codecs beyond the wire part, and why.
REMOTING_ALSO = {"trocket.codecs.capture": "the native capture record remoting's tap writes"}

#: Modules that do I/O, run concurrently or read clocks: none of them in codecs.
IO_MODULES = frozenset({
    "trio", "anyio", "asyncio", "socket", "ssl", "select", "selectors", "threading", "_thread",
    "multiprocessing", "concurrent", "subprocess", "signal", "mmap", "fcntl", "termios", "time",
    "os", "pathlib", "shutil", "tempfile", "glob", "io", "logging", "urllib", "http",
})

#: (codecs module, I/O module) pairs allowed, and why.
IO_ALLOWED = {
    ("trocket.codecs.accel", "os"): "reads the TROCKET_PURE switch from os.environ, once, at import",
}

LAYERS = ("codecs", "remoting", "broker", "client", "conformance", "spark")

#: What the layers may import of the command side (``trocket/``), and why.
COMMAND_SIDE_ALLOWED = {
    "trocket._version": "the distribution's version from the package metadata (the broker reports it); "
                        "a leaf of the standard library",
}


@attrs.frozen
class Import:
    module: str  # the importing module
    target: str  # what it imports: a module, or a package when that is all it names
    line: int


# -- reading the tree ------------------------------------------------------------------------


def package_dirs() -> dict[str, pathlib.Path]:
    """Package name -> folder, from pyproject.toml's package-dir (the installed layout)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {pkg: ROOT / folder for pkg, folder in config["tool"]["setuptools"]["package-dir"].items()}


def module_files() -> dict[str, pathlib.Path]:
    """Every module of every layer: dotted name -> file (``.py``, and ``.pyx`` sources)."""
    out: dict[str, pathlib.Path] = {}
    for pkg, folder in package_dirs().items():
        if pkg.count(".") != 1 or pkg.split(".")[1] not in LAYERS:
            continue
        for path in sorted([*folder.rglob("*.py"), *folder.rglob("*.pyx")]):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((pkg, *parts))] = path
    return out


_PYX_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+(\([^)]*\)|[\w, ]+)|import\s+([\w.]+))", re.M)


def imports_of(module: str, source: str, *, is_package: bool, pyx: bool, known: Iterable[str]) -> Iterator[Import]:
    """The imports in ``source`` of module ``module``, resolved to dotted names.

    ``from P import name`` counts as importing ``P.name`` when that is a module of
    ``known``, else ``P``."""
    known = set(known)
    package = module if is_package else module.rpartition(".")[0]

    def resolve(base: str | None, level: int, names: list[str], line: int) -> Iterator[Import]:
        if level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        assert base is not None
        for name in names:
            full = f"{base}.{name}"
            yield Import(module, full if full in known else base, line)

    if pyx:  # Cython: its cimports are C-level; the Python imports have this plain shape
        for m in _PYX_IMPORT.finditer(source):
            line = source.count("\n", 0, m.start()) + 1
            if m.group(3):
                yield Import(module, m.group(3), line)
            else:
                names = [n.split(" as ")[0].strip() for n in m.group(2).strip("()").replace("\n", " ").split(",") if n.strip()]
                yield from resolve(m.group(1), 0, names, line)
        return
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            yield from resolve(node.module, node.level, [a.name for a in node.names], node.lineno)


def all_imports() -> list[Import]:
    files = module_files()
    out: list[Import] = []
    for module, path in files.items():
        out += imports_of(
            module, path.read_text(), is_package=path.stem == "__init__", pyx=path.suffix == ".pyx", known=files
        )
    return out


# -- the rules ---------------------------------------------------------------------------------


def layer(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "trocket":
        return None
    return parts[1] if len(parts) > 1 else "trocket"


def in_wire(name: str) -> bool:
    return any(name == w or name.startswith(w + ".") for w in WIRE if w != "trocket.codecs") or name == "trocket.codecs"


def violations(imports: Iterable[Import]) -> list[str]:
    """One line per import that breaks a rule: the module, the line, the import, the rule."""
    found: list[str] = []

    def broken(imp: Import, rule: str) -> None:
        found.append(f"{imp.module} (line {imp.line}) imports {imp.target}: {rule}")

    for imp in imports:
        src, dst = layer(imp.module), layer(imp.target)
        top = imp.target.split(".")[0]
        if src == "codecs":
            if top in IO_MODULES and (imp.module, top) not in IO_ALLOWED:
                broken(imp, f"codecs/ does no I/O ({top} is one of the I/O modules: tests/test_layers.IO_MODULES)")
            if dst is not None and dst != "codecs":
                broken(imp, "codecs/ imports nothing of trocket above it")
            if in_wire(imp.module) and dst == "codecs" and not in_wire(imp.target):
                broken(imp, "codecs' wire part imports only the wire part (tests/test_layers.WIRE)")
        elif src == "remoting":
            if dst == "codecs" and not in_wire(imp.target) and imp.target not in REMOTING_ALSO:
                broken(imp, "remoting/ imports only codecs' wire part (tests/test_layers.WIRE)")
            elif dst not in (None, "codecs", "remoting"):
                broken(imp, f"remoting/ imports nothing of {dst}/ (only codecs' wire part)")
        elif src == "client" and dst == "broker":
            broken(imp, "client/ never imports broker/")
        elif src == "broker" and dst == "client":
            broken(imp, "broker/ never imports client/")
        elif src == "spark" and dst not in (None, "codecs", "spark"):
            broken(imp, f"spark/ imports codecs only, not {dst}/")
        elif src == "conformance" and dst in ("broker", "client"):
            broken(imp, f"conformance/ imports no {dst}/")
        if src in LAYERS and dst is not None and dst not in LAYERS and imp.target not in COMMAND_SIDE_ALLOWED:
            broken(imp, "no layer imports the command side, trocket/ (tests/test_layers.COMMAND_SIDE_ALLOWED)")
    return found


# -- the tests ---------------------------------------------------------------------------------


def test_every_layer_keeps_its_rules():
    imports = all_imports()
    modules = {imp.module for imp in imports}
    assert {"trocket.codecs.serialize", "trocket.codecs._accel", "trocket.remoting.connection",
            "trocket.broker.processors.send", "trocket.client.producer", "trocket.spark.job",
            "trocket.conformance.replay"} <= modules  # the whole tree was read
    problems = violations(imports)
    assert not problems, "\n".join(["layer rules broken (docs/design.md, tests/test_layers.py):", *problems])


def test_the_allowed_command_side_modules_are_standard_library_leaves():
    for module in COMMAND_SIDE_ALLOWED:
        path = ROOT / "trocket" / (module.rpartition(".")[2] + ".py")
        targets = {imp.target.split(".")[0] for imp in imports_of(module, path.read_text(), is_package=False,
                                                                       pyx=False, known=())}
        assert targets and targets <= sys.stdlib_module_names, f"{module} imports {targets - sys.stdlib_module_names}"


def test_the_declared_wire_part_exists():
    files = module_files()
    assert WIRE <= set(files) and set(REMOTING_ALSO) <= set(files)
    assert all(module in files for module, _ in IO_ALLOWED)


@pytest.mark.parametrize("pure", ["0", "1"], ids=["accelerated", "pure"])
def test_importing_remoting_loads_only_the_wire_part(pure):
    code = (
        "import sys, trocket.remoting\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('trocket.codecs'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True,
        env={**os.environ, "TROCKET_PURE": pure},
    ).stdout.split()
    assert "trocket.codecs.headers" not in out
    assert "trocket.codecs.custom_header" in out and "trocket.codecs.serialize" in out
    beyond = [m for m in out if not in_wire(m) and m not in REMOTING_ALSO]
    assert not beyond, f"import trocket.remoting loaded {beyond}: remoting uses only codecs' wire part"


# -- the checker can fail ------------------------------------------------------------------------

KNOWN = ["trocket.codecs.command", "trocket.codecs.headers", "trocket.codecs.headers.send", "trocket.codecs.frame"]


def _check(module: str, source: str, *, is_package: bool = False) -> list[str]:
    return violations(imports_of(module, source, is_package=is_package, pyx=False, known=KNOWN))


def test_the_checker_finds_each_kind_of_violation():
    found = _check("trocket.codecs.frame", "def f():\n    import socket\n")
    assert found == ["trocket.codecs.frame (line 2) imports socket: codecs/ does no I/O "
                     "(socket is one of the I/O modules: tests/test_layers.IO_MODULES)"]
    assert _check("trocket.codecs.serialize", "from .headers import send") == [
        "trocket.codecs.serialize (line 1) imports trocket.codecs.headers.send: "
        "codecs' wire part imports only the wire part (tests/test_layers.WIRE)"
    ]
    assert _check("trocket.codecs.describe", "from .headers import send") == []  # not wire: may
    tc = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trocket.codecs.headers import X\n"
    assert _check("trocket.remoting.hooks", tc) == [
        "trocket.remoting.hooks (line 3) imports trocket.codecs.headers: "
        "remoting/ imports only codecs' wire part (tests/test_layers.WIRE)"
    ]
    assert "remoting/ imports nothing of broker/" in _check("trocket.remoting.x", "from ..broker import y")[0]
    assert _check("trocket.client.x", "import trocket.broker.store") == [
        "trocket.client.x (line 1) imports trocket.broker.store: client/ never imports broker/"
    ]
    assert "broker/ never imports client/" in _check("trocket.broker.a.b", "from ...client import c")[0]
    assert "spark/ imports codecs only, not remoting/" in _check("trocket.spark.job", "from trocket.remoting import x")[0]
    assert "conformance/ imports no broker/" in _check("trocket.conformance", "from ..broker import z", is_package=True)[0]
    assert "codecs/ imports nothing of trocket above it" in _check("trocket.codecs.x", "from trocket import cli")[0]
    assert _check("trocket.codecs.accel", "import os") == []  # the one allowed, with its reason
    assert _check("trocket.remoting.tap", "from trocket.codecs.capture import X") == []
    assert "no layer imports the command side" in _check("trocket.conformance.proxy", "from trocket import interrupt")[0]
    assert "no layer imports the command side" in _check("trocket.client.x", "import trocket.cli_client")[0]
    assert _check("trocket.broker.controller", "from trocket._version import version") == []


def test_relative_imports_resolve():
    got = list(imports_of("trocket.codecs.headers", "from . import send\nfrom ..frame import F\nfrom .. import command",
                          is_package=True, pyx=False, known=KNOWN))
    assert [i.target for i in got] == ["trocket.codecs.headers.send", "trocket.codecs.frame", "trocket.codecs.command"]
    pyx = "from cpython.ref cimport Py_INCREF\nimport zlib\n    from trocket.codecs.frame import sniff\n"
    got = list(imports_of("trocket.codecs._accel", pyx, is_package=False, pyx=True, known=KNOWN))
    assert [(i.target, i.line) for i in got] == [("zlib", 2), ("trocket.codecs.frame", 3)]
