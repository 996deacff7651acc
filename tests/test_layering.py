"""The rooms import one way (docs/architecture.md): core <- mount, core <- spark,
everything <- cli. core never imports trio, pyfuse3 or Spark; spark never
imports trio or pyfuse3 (it runs in Spark's Python workers)."""

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
}


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


def violations(package_dir: Path) -> list[str]:
    """``module imports name`` for every import that runs against the rooms' direction."""
    found = []
    for room, forbidden in FORBIDDEN.items():
        for path in sorted((package_dir / room).rglob("*.py")):
            parts = path.relative_to(package_dir.parent).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            for name in sorted(imported(path, module)):
                if any(name == bad or name.startswith(bad + ".") for bad in forbidden):
                    found.append(f"{module} imports {name}")
    return found


def test_rooms_import_one_way():
    assert violations(ROOT / "logfs") == []


def test_a_wrong_import_is_caught(tmp_path):
    package = tmp_path / "logfs"
    for room in FORBIDDEN:
        (package / room).mkdir(parents=True)
        (package / room / "__init__.py").write_text("")
    (package / "core" / "bad.py").write_text(
        "from ..mount.operations import Operations\nfrom . import record\n"
    )
    (package / "core" / "lazy.py").write_text("def f():\n    import trio\n")
    (package / "spark" / "bad.py").write_text("from pyfuse3 import FUSEError\n")
    (package / "mount" / "ok.py").write_text("from ..core import record\nimport trio\n")
    assert violations(package) == [
        "logfs.core.bad imports logfs.mount.operations",
        "logfs.core.bad imports logfs.mount.operations.Operations",
        "logfs.core.lazy imports trio",
        "logfs.spark.bad imports pyfuse3",
        "logfs.spark.bad imports pyfuse3.FUSEError",
    ]


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
