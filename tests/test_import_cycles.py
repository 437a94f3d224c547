"""No import cycles among estflow's modules, not even hidden ones.

The module graph is built statically with ``ast`` from every ``.py`` file of the packages that
pyproject's ``[tool.setuptools.package-dir]`` maps to ``estflow.*``, counting every import: at
the top of a module, inside a function, and under ``if TYPE_CHECKING:``. A function-local or
type-checking-only import does not make a cycle go away; it only hides it from the interpreter
(and from ``lint-imports``, which sees neither direction as wrong).

Edges: ``import a.b`` is an edge to ``a.b``; ``from a import b`` is an edge to ``a.b`` when
``a.b`` is a module, else to ``a`` (a package's ``__init__``); relative imports resolve against
the importing module's package. The parent packages that Python runs on the way to a module are
not edges. A cycle is a strongly connected component of more than one module (or a module
importing itself).
"""

import ast
import textwrap
import tomllib
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    """Every importable ``estflow.*`` module: dotted name -> file (``__init__.py`` for a package)."""
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    # A file belongs to the most specific mapping holding it: components/estimator/ is
    # estflow.estimator, not estflow.components.estimator.
    roots = sorted(((p, REPO / d) for p, d in package_dir.items()), key=lambda r: -len(r[1].parts))
    modules: dict[str, Path] = {}
    for _, top in roots:
        for path in top.rglob("*.py"):
            package, root = next((p, r) for p, r in roots if path.is_relative_to(r))
            parts = path.relative_to(root).parts
            # Only files reachable through packages: every folder on the way has an __init__.py.
            if not all((root.joinpath(*parts[:i]) / "__init__.py").is_file()
                       for i in range(len(parts))):
                continue
            names = parts[:-1] if parts[-1] == "__init__.py" else (*parts[:-1], path.stem)
            modules[".".join((package, *names))] = path
    return modules


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterable[str]:
    """The estflow modules that ``module`` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name:
                    yield name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    yield f"{source}.{alias.name}"
                elif source in modules:
                    yield source


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: set(_imports(m, p, modules)) for m, p in modules.items()}


def strongly_connected_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is a few hundred modules deep at most)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    return sorted(c for c in strongly_connected_components(graph)
                  if len(c) > 1 or c[0] in graph[c[0]])


def _describe(cycle: list[str], graph: dict[str, set[str]]) -> str:
    members = set(cycle)
    edges = [f"    {a} -> {b}" for a in cycle for b in sorted(graph[a] & members)]
    return "  cycle of " + str(len(cycle)) + ": " + ", ".join(cycle) + "\n" + "\n".join(edges)


def test_the_graph_sees_every_kind_of_import():
    """The walker finds the modules and edges it must: a guard against a graph that finds no
    cycle because it sees nothing."""
    graph = import_graph()
    assert "estflow.dsl" in graph and "estflow.estimator" in graph
    assert "estflow.components.estimator" not in graph
    assert len(graph) > 100
    assert sum(map(len, graph.values())) > len(graph)


def test_every_kind_of_import_is_an_edge(tmp_path):
    """Top-level, function-local and ``TYPE_CHECKING`` imports, absolute and relative; a
    submodule named by ``from pkg import name``; a package's ``__init__``; not a name."""
    path = tmp_path / "mod.py"
    path.write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        import p.top
        from p import sub
        from p.names import NAME
        from . import sibling
        from .. import upper_name
        if TYPE_CHECKING:
            from p.typed import Typed
        def f():
            import p.local.deep.missing
            from .rel import g
    """))
    modules = {m: tmp_path for m in ("p", "p.top", "p.sub", "p.names", "p.typed", "p.local",
                                     "p.pkg", "p.pkg.sibling", "p.pkg.rel", "p.pkg.mod")}
    assert sorted(set(_imports("p.pkg.mod", path, modules))) == [
        "p", "p.local", "p.names", "p.pkg.rel", "p.pkg.sibling", "p.sub", "p.top", "p.typed"]


def test_scc_finds_a_cycle_hidden_in_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c"], ["e"]]


def test_no_import_cycles_among_estflow_modules():
    graph = import_graph()
    cycles = _cycles(graph)
    assert not cycles, (
        f"{len(cycles)} import cycle(s) among estflow modules (counting function-local and "
        "TYPE_CHECKING imports): move what both sides share into a lower module\n"
        + "\n".join(_describe(c, graph) for c in cycles))
