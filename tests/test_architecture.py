"""The layout is the architecture (docs/architecture.md): each module imports only from its
own layer or those below, and the benchmarks stay out of the library's import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "slm"

#: Lowest first. A module may import its own layer and the layers below it, never above.
LAYERS: list[set[str]] = [
    {"errors", "models", "validate", "contract", "release"},
    {"embed", "store", "index", "ingest", "settings"},
    {"channels"},
    {"recall", "learn", "calibrate"},
    {"engine", "inputs", "related", "profiles", "aio", "copy"},
    {"cli", "server", "integrations", "hosts", "__init__", "__main__"},
]  # fmt: skip


def layer(module: str) -> int:
    top = module.split(".")[1] if module.startswith("slm.") else module
    for number, names in enumerate(LAYERS):
        if top in names:
            return number
    raise AssertionError(f"slm.{top} is in no layer of tests/test_architecture.py")


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "slm" or name.startswith("slm.")}


def test_no_module_imports_a_higher_layer() -> None:
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        module = "slm." + ".".join(path.relative_to(SRC).with_suffix("").parts)
        own = layer(module)
        for target in imports(path):
            if target != "slm" and layer(target) > own:
                upward.append(f"{module} imports {target}")
    assert upward == []


def module_graph() -> dict[str, set[str]]:
    """Each module of slm and the modules of slm it imports, type-only imports included
    (``from slm.store import derived`` names the module ``slm.store.derived``)."""
    modules = {
        "slm." + ".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): p
        for p in SRC.rglob("*.py")
    }
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    inner = f"{node.module}.{alias.name}"
                    target = inner if inner in modules else node.module
                    if target in modules and target != name:
                        graph[name].add(target)
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules)
    return graph


def test_no_import_cycle_type_only_imports_included() -> None:
    graph = module_graph()
    cycles = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycles.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert cycles == []


#: STYLE.md's "modules stay under ~600 lines": a module past it holds two concepts. Below
#: it, size is reported, not enforced: a module is never split or merged to meet a number.
MODULE_LINES = 600


def test_modules_stay_small(capsys: pytest.CaptureFixture[str]) -> None:
    """Keyed by path: the three base.py and every __init__.py are measured each."""
    sizes = {
        str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines())
        for p in SRC.rglob("*.py")
    }
    assert len(sizes) == len(list(SRC.rglob("*.py")))
    with capsys.disabled():
        largest = sorted(sizes.items(), key=lambda item: -item[1])[:10]
        print("\nlargest modules:", ", ".join(f"{name} {n}" for name, n in largest))
    assert {name: n for name, n in sizes.items() if n > MODULE_LINES} == {}


def test_importing_slm_loads_no_benchmark_no_fitting_and_no_adapter_extra(
    tmp_path: Path,
) -> None:
    """Importing slm and its command line, and storing and recalling, load none of them."""
    store = str(tmp_path / "m.db")
    code = (
        "import sys, slm, slm.cli; "
        f"m = slm.Memory({store!r}, settings=slm.Settings(embedder='fake')); "
        "m.remember('the boiler is serviced in May'); m.recall('boiler'); m.close(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'slm_bench', 'slm_fit', 'fastapi', 'mcp', 'psycopg', 'matplotlib', 'sklearn'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_folder_of_modules_is_a_package() -> None:
    """A folder without ``__init__.py`` works from a checkout but is left out of the wheel."""
    folders = {path.parent for path in SRC.rglob("*.py") if "__pycache__" not in path.parts}
    assert sorted(str(f) for f in folders if not (f / "__init__.py").exists()) == []


def test_no_adapter_reaches_into_the_store() -> None:
    """The command line, the servers and the framework adapters use Memory's public API:
    none reads a Memory's ``.store``."""
    reached = []
    for folder in ("cli", "server", "integrations"):
        for path in sorted((SRC / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr == "store":
                    reached.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert reached == []
