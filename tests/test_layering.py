"""The rooms import one way (docs/architecture.md).

Between the faces: core <- mount, core <- spark, core <- kafka <- mount (the daemon starts the
listener), everything <- cli; core never imports trio,
pyfuse3 or Spark; spark never imports trio or pyfuse3 (it runs in Spark's Python workers).
Inside core: errors and config <- format <- storage <- log <- client <- tools. A face imports
what a room exports (its ``__init__``), never a room's modules. No import circle anywhere,
``TYPE_CHECKING`` and function-level imports included.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "core": ("logfs.mount", "logfs.spark", "logfs.cli", "trio", "pyfuse3", "pyspark", "pyarrow"),
    "mount": ("logfs.spark", "logfs.cli", "pyspark", "pyarrow"),
    "spark": ("logfs.mount", "logfs.cli", "trio", "pyfuse3"),
    "kafka": ("logfs.mount", "logfs.spark", "logfs.cli", "pyspark", "pyarrow"),
}
# core's inner rooms, lowest first; a module may import its own floor and the ones below.
FLOORS = ("errors", "config", "format", "storage", "log", "client", "tools")
FACES = ("mount", "spark", "kafka", "cli")


def imported(path: Path, module: str) -> set[str]:
    """The absolute names of the modules ``path`` (module ``module``) imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def modules(package_dir: Path) -> dict[str, Path]:
    """Every module below ``package_dir`` by its dotted name."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _floor(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 3 or parts[1] != "core":
        return None
    return FLOORS.index(parts[2]) if parts[2] in FLOORS else None


def exports(init: Path) -> set[str]:
    """The names a room's ``__init__`` lists in ``__all__``."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return {e.value for e in node.value.elts}
    return set()


def violations(package_dir: Path) -> list[str]:
    """``module imports name`` for every import that runs against the rooms' direction."""
    found = []
    everything = modules(package_dir)
    for module, path in everything.items():
        room = module.split(".")[1] if "." in module else ""
        floor = _floor(module)
        for name in sorted(imported(path, module)):
            target = _floor(name)
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN.get(room, ())):
                found.append(f"{module} imports {name}")
            elif floor is not None and target is not None and target > floor:
                found.append(f"{module} imports {name} (upward)")
            elif room in FACES and target is not None and target >= FLOORS.index("format"):
                parts = name.split(".")
                room_exports = exports(everything[".".join(parts[:3])])
                if (
                    len(parts) > 3
                    and ".".join(parts[:4]) in everything
                    and (parts[3] not in room_exports)
                ):
                    found.append(f"{module} imports {name} (a room's module, not its exports)")
    return found


def cycle(package_dir: Path) -> list[str]:
    """One import circle among the modules below ``package_dir``, or []."""
    everything = modules(package_dir)
    edges = {}
    for module, path in everything.items():
        targets = set()
        for name in imported(path, module):
            while name and name not in everything:
                name = name.rpartition(".")[0]
            # a package and its own modules are one place; their imports are not a circle
            if (
                name
                and name != module
                and not (name.startswith(module + ".") or module.startswith(name + "."))
            ):
                targets.add(name)
        edges[module] = sorted(targets)
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for target in edges[node]:
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in edges:
        if node not in state and (found := visit(node)):
            return found
    return []


def test_rooms_import_one_way():
    assert violations(ROOT / "logfs") == []


def test_no_import_circle():
    assert cycle(ROOT / "logfs") == []


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "logfs"
    for room in ("core", "mount", "spark", *(f"core/{f}" for f in FLOORS[2:])):
        (package / room).mkdir(parents=True)
        (package / room / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "core" / "errors.py").write_text("")
    return package


def test_a_wrong_import_is_caught(tmp_path):
    package = _package(tmp_path)
    (package / "core" / "bad.py").write_text(
        "from ..mount.operations import Operations\nfrom . import errors\n"
    )
    (package / "core" / "lazy.py").write_text("def f():\n    import trio\n")
    (package / "spark" / "bad.py").write_text("from pyfuse3 import FUSEError\n")
    (package / "mount" / "ok.py").write_text("from ..core.format import Record\nimport trio\n")
    assert violations(package) == [
        "logfs.core.bad imports logfs.mount.operations",
        "logfs.core.bad imports logfs.mount.operations.Operations",
        "logfs.core.lazy imports trio",
        "logfs.spark.bad imports pyfuse3",
        "logfs.spark.bad imports pyfuse3.FUSEError",
    ]


def test_an_upward_import_inside_core_is_caught(tmp_path):
    package = _package(tmp_path)
    (package / "core" / "storage" / "segment.py").write_text(
        "from ..format import record\n"  # downward: fine
        "from ..log.store import Store\n"  # upward
    )
    (package / "core" / "format" / "record.py").write_text("from ..tools import check\n")
    (package / "core" / "log" / "store.py").write_text("from ..storage import segment\n")
    assert violations(package) == [
        "logfs.core.format.record imports logfs.core.tools (upward)",
        "logfs.core.format.record imports logfs.core.tools.check (upward)",
        "logfs.core.storage.segment imports logfs.core.log.store (upward)",
        "logfs.core.storage.segment imports logfs.core.log.store.Store (upward)",
    ]


def test_a_face_reaching_into_a_room_is_caught(tmp_path):
    package = _package(tmp_path)
    (package / "core" / "log" / "store.py").write_text("")
    (package / "mount" / "view.py").write_text(
        "from ..core.log import Store\nfrom ..core.log.store import Store as S\n"
    )
    assert violations(package) == [
        "logfs.mount.view imports logfs.core.log.store (a room's module, not its exports)",
        "logfs.mount.view imports logfs.core.log.store.Store (a room's module, not its exports)",
    ]


def test_a_circle_is_caught_even_behind_type_checking(tmp_path):
    package = _package(tmp_path)
    (package / "core" / "log" / "a.py").write_text("from . import b\n")
    (package / "core" / "log" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n"
    )
    assert cycle(package) == ["logfs.core.log.a", "logfs.core.log.b", "logfs.core.log.a"]


def test_core_and_spark_load_without_trio_or_pyfuse3():
    """What a Spark worker imports pulls in no FUSE or trio module at run time."""
    code = (
        "import pkgutil, sys, importlib\n"
        "import logfs.core, logfs.spark\n"
        "for package in (logfs.core, logfs.spark):\n"
        "    for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "import pyspark_logfs\n"
        "print(sorted({'trio', 'pyfuse3', 'logfs.mount'} & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
