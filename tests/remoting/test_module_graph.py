"""remoting's modules import each other without a cycle, counting the imports made
only for type checking too: a connection knows its endpoint through the
``ConnectionOwner`` protocol it declares, channel events know a connection as
``Channel``, the invoker as ``CallTarget``."""

from __future__ import annotations

import ast
import pathlib

import trocket.remoting

PACKAGE = pathlib.Path(trocket.remoting.__file__).parent


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        if path.stem == "__init__":
            continue
        edges = graph.setdefault(path.stem, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                edges.add(node.module.split(".")[0])
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for nxt in sorted(graph.get(name, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state and (found := visit(name)):
            return found
    return None


def test_no_import_cycle_among_remoting_modules():
    graph = _graph()
    assert {"connection", "endpoint", "events", "invoker"} <= set(graph)
    assert "endpoint" not in graph["connection"] and "connection" not in graph["events"]
    assert "connection" not in graph["invoker"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
