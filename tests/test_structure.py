"""The package's shape (issue 12): no import cycle among its modules at import time, and every
module past ~400 lines says in its docstring why it is one module."""

import ast
import os

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dnnperf")


def _modules() -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(PKG))[:-3].replace(os.sep, ".")
                out[rel[:-9] if rel.endswith(".__init__") else rel] = path
    return out


def _imports(mod: str, path: str, mods: dict) -> set[str]:
    """dnnperf modules ``mod`` imports at module level (what runs when it is imported); a package
    importing its own submodules is not a cycle."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = set()
    for node in tree.body:
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        out.update(n for n in names if n in mods and n != mod and not n.startswith(mod + "."))
    return out


def test_no_import_cycle_among_the_modules():
    mods = _modules()
    graph = {m: _imports(m, p, mods) for m, p in mods.items()}
    assert graph["dnnperf.scoring"] and graph["dnnperf.cli.app"]  # the walk sees real imports
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                cycles.append(stack[stack.index(v):] + [v])
            elif not state.get(v):
                visit(v)
        stack.pop()
        state[u] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m)
    assert cycles == []


def test_long_modules_say_why():
    for mod, path in _modules().items():
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        if text.count("\n") > 440:
            doc = ast.get_docstring(ast.parse(text)) or ""
            assert "Why one module" in doc, f"{mod}: {text.count(chr(10))} lines and no reason in its docstring"
