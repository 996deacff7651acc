"""The rooms import one way (docs/architecture.md).

core <- groups <- the faces (mount, kafka; spark and mirror on core alone) <- daemon <- cli:
the faces never import each other, only the daemon room and the entry points (cli.py,
``__main__`` modules) wire them; groups never imports kio or a face; metrics (core <- groups <-
metrics <- daemon) never imports a face, which the daemon hands its books; core never imports
trio, pyfuse3 or Spark; spark never imports trio or pyfuse3 (it runs in Spark's Python workers).
Inside core: errors and config <- format <- storage <- log <- client <- access <- tools. Inside
mount: errnos <- files <- tree <- fuse, each of the three inner rooms importing another's exports
(its ``__init__``) only. A room imports what another room exports (its ``__init__``), never its
modules; no module imports another package's private module (``_name``: the compiled ones most
of all). No import circle anywhere, ``TYPE_CHECKING`` and function-level imports included.

Compiled modules are held to the same rules: their imports and cimports are read from the
``.pyx`` and ``.pxd`` files. And the owner keeps its books: no compiled module, and no Python
module of the append path, reaches into another object's private attributes (``x._name``).
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FACES = ("logfs.mount", "logfs.spark", "logfs.kafka")
ABOVE = ("logfs.daemon", "logfs.cli")  # what wires the faces
FORBIDDEN = {
    "core": (
        "logfs.groups",
        *FACES,
        *ABOVE,
        "trio",
        "pyfuse3",
        "pyspark",
        "pyarrow",
    ),  # fmt: skip
    "groups": (*FACES, *ABOVE, "kio", "pyfuse3", "pyspark", "pyarrow"),
    "mount": ("logfs.kafka", "logfs.spark", *ABOVE, "kio", "pyspark", "pyarrow"),
    "spark": ("logfs.groups", "logfs.mount", "logfs.kafka", *ABOVE, "trio", "pyfuse3"),
    "kafka": ("logfs.mount", "logfs.spark", *ABOVE, "pyspark", "pyarrow"),
    "daemon": ("logfs.spark", "logfs.cli", "pyspark", "pyarrow"),
    # the daemon's metrics: fed by the faces through the daemon, never importing one
    "metrics": (*FACES, *ABOVE, "kio", "pyfuse3", "pyspark", "pyarrow"),
    # the mirror runs in a daemon's worker thread or a process of its own: core's client
    # and store only, no event loop, no face
    "mirror": ("logfs.groups", *FACES, *ABOVE, "trio", "pyfuse3", "pyspark", "pyarrow"),
}
# The inner rooms of core and of mount, lowest first; a module may import its own floor and the
# ones below.
FLOORS = {
    "core": ("errors", "config", "format", "storage", "log", "client", "access", "tools"),
    "mount": ("errnos", "files", "tree", "fuse"),
}
# Inner rooms whose modules are theirs alone, inside their room too: core's from outside core,
# mount's from anywhere (their packages: the rest are single modules, like core's errors).
PRIVATE = {
    "core": ("format", "storage", "log", "client", "tools"),
    "mount": ("files", "tree", "fuse"),
}
# Rooms above core whose modules are theirs alone: others import their exports.
ROOMS = ("groups", "metrics", "mount", "kafka", "spark", "mirror", "daemon")


# Cython's import statements: ``from X cimport a, b``, ``from X import (a, b)``, ``cimport X``.
CYTHON_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+c?import[ \t]+(\([^)]*\)|.*)$", re.M)
CYTHON_IMPORT = re.compile(r"^[ \t]*c?import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)", re.M)
STRINGS = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'')


def _statements(path: Path) -> list[tuple[int, str, list[str]]]:
    """(level, module, names) of each import of a Python or Cython source."""
    if path.suffix == ".py":
        found = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [(0, alias.name, []) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                found.append((node.level, node.module or "", [a.name for a in node.names]))
        return found
    text = STRINGS.sub("", path.read_text())
    found = []
    for m in CYTHON_FROM.finditer(text):
        dots = len(m[1]) - len(m[1].lstrip("."))
        names = m[2].split("#")[0].strip("() \n").replace("\n", " ").split(",")
        names = [n.split()[0] for n in names if n.strip()]
        found.append((dots, m[1][dots:], names))
    for m in CYTHON_IMPORT.finditer(text):
        found += [(0, name.strip(), []) for name in m[1].split(",")]
    return found


def imported(path: Path, module: str) -> set[str]:
    """The absolute names of the modules ``path`` (module ``module``) imports
    (and, for Cython, cimports)."""
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    names = set()
    for level, base, aliases in _statements(path):
        if level:
            parent = package.rsplit(".", level - 1)[0] if level > 1 else package
            base = f"{parent}.{base}" if base else parent
        names.add(base)
        names.update(f"{base}.{alias}" for alias in aliases)
    return names


def modules(package_dir: Path) -> dict[str, list[Path]]:
    """Every module below ``package_dir`` by its dotted name, with its sources: a
    ``.py``, or a ``.pyx`` and its ``.pxd``, or a ``.pxd`` alone."""
    found: dict[str, list[Path]] = {}
    paths = (p for kind in ("*.py", "*.pyx", "*.pxd") for p in package_dir.rglob(kind))
    for path in sorted(paths):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        found.setdefault(".".join(parts[:-1] if parts[-1] == "__init__" else parts), []).append(
            path
        )
    return found


def _private_module(name: str, importer: str, everything: dict) -> bool:
    """Whether ``name`` is, or is in, a module private to a package (``_name``)
    that ``importer`` is not in."""
    parts = name.split(".")
    for i in range(2, len(parts) + 1):
        if ".".join(parts[:i]) not in everything:
            break
        if parts[i - 1].startswith("_") and not parts[i - 1].startswith("__"):
            package = ".".join(parts[: i - 1])
            return importer != package and not importer.startswith(package + ".")
    return False


def _floor(module: str) -> tuple[str, int] | None:
    """The room with inner rooms ``module`` is in, and the floor it is on."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in FLOORS or parts[2] not in FLOORS[parts[1]]:
        return None
    return parts[1], FLOORS[parts[1]].index(parts[2])


def exports(init: Path) -> set[str]:
    """The names a room's ``__init__`` lists in ``__all__``."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return {e.value for e in node.value.elts}
    return set()


def _forbidden(module: str) -> tuple[str, ...]:
    """What ``module`` may not import: its room's rule; the ``__main__`` entry
    points wire faces like the command line and have none."""
    parts = module.split(".")
    if parts[-1] == "__main__" or len(parts) < 2:
        return ()
    return FORBIDDEN.get(parts[1], ())


def _unexported(name: str, importer: str, everything: dict[str, list[Path]]) -> bool:
    """Whether ``name`` is a module of a room other than ``importer``'s that its
    ``__init__`` does not export (the inner rooms of `PRIVATE` count as rooms of their own:
    core's for a module outside core, mount's for any other module)."""
    parts, mine = name.split("."), importer.split(".")
    room = mine[1] if len(mine) > 1 else ""
    inner = PRIVATE.get(parts[1], ()) if len(parts) > 2 else ()
    if len(parts) > 1 and parts[1] in ROOMS and parts[1] != room:
        package, module = ".".join(parts[:2]), ".".join(parts[:3])
    elif parts[2:3] and parts[2] in inner and (room != "core" if parts[1] == "core" else True):
        package, module = ".".join(parts[:3]), ".".join(parts[:4])
        if mine[: len(package.split("."))] == package.split("."):
            return False  # its own inner room
    else:
        return False
    last = len(package.split("."))
    if module == package or module not in everything or package not in everything:
        return False
    init = next(p for p in everything[package] if p.suffix != ".pxd")  # its __init__.py
    return parts[last] not in exports(init)


def violations(package_dir: Path) -> list[str]:
    """``module imports name`` for every import that runs against the rooms' direction."""
    found = []
    everything = modules(package_dir)
    for module, paths in everything.items():
        floor = _floor(module)
        names = set().union(*(imported(path, module) for path in paths))
        for name in sorted(names):
            target = _floor(name)
            if any(name == bad or name.startswith(bad + ".") for bad in _forbidden(module)):
                found.append(f"{module} imports {name}")
            elif floor and target and floor[0] == target[0] and target[1] > floor[1]:
                found.append(f"{module} imports {name} (upward)")
            elif _private_module(name, module, everything):
                found.append(f"{module} imports {name} (another package's private module)")
            elif _unexported(name, module, everything):
                found.append(f"{module} imports {name} (a room's module, not its exports)")
    return found


def cycle(package_dir: Path) -> list[str]:
    """One import circle among the modules below ``package_dir``, or []."""
    everything = modules(package_dir)
    edges = {}
    for module, paths in everything.items():
        targets = set()
        for name in set().union(*(imported(path, module) for path in paths)):
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
    for room in ("core", "mount", "spark", *(f"core/{f}" for f in FLOORS["core"][2:])):
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


def test_only_the_daemon_and_the_entry_points_wire_faces(tmp_path):
    package = _package(tmp_path)
    for room in ("groups", "kafka", "daemon"):
        (package / room).mkdir()
    (package / "groups" / "__init__.py").write_text("from .coordinator import Coordinator\n")
    (package / "groups" / "coordinator.py").write_text("import trio\nfrom kio import x\n")
    (package / "kafka" / "__init__.py").write_text("__all__ = ['Broker']\n")
    (package / "kafka" / "broker.py").write_text(
        "from ..groups import Coordinator\n"  # the groups room's exports: fine
        "from ..groups.coordinator import Coordinator as C\n"  # its module: not
    )
    (package / "mount" / "__init__.py").write_text("__all__ = ['Operations']\n")
    (package / "mount" / "operations.py").write_text("from ..kafka import Broker\n")
    (package / "mount" / "__main__.py").write_text("from logfs.daemon import main\n")
    (package / "daemon" / "__init__.py").write_text("__all__ = ['main']\n")
    (package / "daemon" / "run.py").write_text(
        "from ..kafka import Broker\nfrom ..mount import Operations\n"
        "from ..mount.operations import Operations as O\n"
    )
    (package / "cli.py").write_text("from .daemon import main\nfrom .kafka import Broker\n")
    assert violations(package) == [
        "logfs.daemon.run imports logfs.mount.operations (a room's module, not its exports)",
        "logfs.daemon.run imports logfs.mount.operations.Operations (a room's module, "
        "not its exports)",
        "logfs.groups.coordinator imports kio",
        "logfs.groups.coordinator imports kio.x",
        "logfs.kafka.broker imports logfs.groups.coordinator (a room's module, not its exports)",
        "logfs.kafka.broker imports logfs.groups.coordinator.Coordinator (a room's module, "
        "not its exports)",
        "logfs.mount.operations imports logfs.kafka",
        "logfs.mount.operations imports logfs.kafka.Broker",
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


def test_compiled_modules_are_held_to_the_same_rules(tmp_path):
    package = _package(tmp_path)
    (package / "core" / "format" / "_fast.pyx").write_text("")
    (package / "core" / "format" / "binary.pxd").write_text("from libc.stdint cimport int64_t\n")
    (package / "core" / "storage" / "books.pyx").write_text(
        '"""from ..log import Log (a docstring, not an import)"""\n'
        "from ..format.binary cimport int64_t\n"  # a room's public .pxd: fine
        "from ..format._fast cimport loop\n"  # another room's private module
        "from ..log.store cimport Store\n"  # upward
    )
    (package / "core" / "storage" / "_own.pyx").write_text("")
    (package / "core" / "storage" / "segment.py").write_text(
        "from ._own import x\nfrom .books import Tail\n"  # its own room's: fine
    )
    (package / "core" / "log" / "store.py").write_text("")
    (package / "core" / "log" / "keys.py").write_text(
        "from ..format import _fast\n"  # another room's private module, by another spelling
    )
    assert violations(package) == [
        "logfs.core.log.keys imports logfs.core.format._fast (another package's private module)",
        "logfs.core.storage.books imports logfs.core.format._fast "
        "(another package's private module)",
        "logfs.core.storage.books imports logfs.core.format._fast.loop "
        "(another package's private module)",
        "logfs.core.storage.books imports logfs.core.log.store (upward)",
        "logfs.core.storage.books imports logfs.core.log.store.Store (upward)",
    ]


def test_the_real_compiled_modules_are_read():
    """The reader of Cython sources sees what the real ones import."""
    everything = modules(ROOT / "logfs")
    line = everything["logfs.core.log._line"]
    assert [p.suffix for p in line] == [".pxd", ".pyx"]
    names = set().union(*(imported(path, "logfs.core.log._line") for path in line))
    assert {"logfs.core.storage.books.SegmentTail", "logfs.core.format.binary.put_be"} <= names
    assert [p.suffix for p in everything["logfs.core.storage.books"]] == [".pxd", ".pyx"]
    # the mount's take of a line cimports the log room's classes from its __init__.pxd
    lines = everything["logfs.mount.fuse._lines"]
    assert "logfs.core.log.LineWriter" in imported(lines[0], "logfs.mount.fuse._lines")
    assert [p.suffix for p in everything["logfs.core.log"]] == [".pxd", ".py"]


# Another object's private attribute: ``x._name`` where x is not self or cls.
REACHING_IN = re.compile(r"\b(?!self\b)(?!cls\b)[A-Za-z_]\w*\._[a-z]\w*")
# NamedTuple's own methods, public despite their underscore.
NAMEDTUPLE = {"_replace", "_make", "_asdict", "_fields"}
APPEND_PATH = (
    "core/format",
    "core/storage",
    "core/log",
    "mount/files/appendfile.py",
    "mount/files/buffered.py",
    "mount/files/framing.py",
)


def reaching_in(path: Path) -> list[str]:
    """``line: text`` of each use of another object's private attribute: in
    Cython sources anywhere (the regex over the whole file), in Python code
    outside strings and comments."""
    if path.suffix != ".py":
        text = path.read_text()
        return [
            f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}"
            for m in REACHING_IN.finditer(text)
        ]
    found = []
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    for a, dot, b in zip(tokens, tokens[1:], tokens[2:], strict=False):
        if (
            a.type == tokenize.NAME
            and not keyword.iskeyword(a.string)  # ``from ._module import``
            and a.string not in ("self", "cls")
            and dot.string == "."
            and b.type == tokenize.NAME
            and b.string.startswith("_")
            and not b.string.startswith("__")
            and b.string not in NAMEDTUPLE
        ):
            found.append(f"{path.name}:{a.start[0]}: {a.string}.{b.string}")
    return found


def test_no_compiled_module_reaches_into_another_objects_privates():
    pyx = sorted((ROOT / "logfs").rglob("*.pyx")) + sorted((ROOT / "logfs").rglob("*.pxd"))
    assert len(pyx) >= 8
    assert [hit for path in pyx for hit in reaching_in(path)] == []


def test_nothing_on_the_append_path_reaches_into_another_objects_privates():
    paths = []
    for part in APPEND_PATH:
        where = ROOT / "logfs" / part
        paths += sorted(where.rglob("*.py")) if where.is_dir() else [where]
    assert [hit for path in paths for hit in reaching_in(path)] == []


def test_reaching_in_is_caught(tmp_path):
    (tmp_path / "a.pyx").write_text("x = log._unflushed.messages\ny = self._own\n")
    (tmp_path / "b.py").write_text(
        '"""Log._write, in a docstring"""\n'
        "n = segment._fd  # reached into\n"
        "h = header._replace(x=1)\n"
        "m = self._mine + cls._ours\n"
    )
    assert reaching_in(tmp_path / "a.pyx") == ["a.pyx:1: log._unflushed"]
    assert reaching_in(tmp_path / "b.py") == ["b.py:2: segment._fd"]


def test_the_mounts_inner_rooms_import_one_way_and_only_exports(tmp_path):
    """errnos <- files <- tree <- fuse; a Cython source's imports count as any other's."""
    package = _package(tmp_path)
    mount = package / "mount"
    for room in ("files", "tree", "fuse"):
        (mount / room).mkdir()
    (mount / "errnos.py").write_text("from .files import OpenFile\n")  # upward
    (mount / "files" / "__init__.py").write_text(
        "from .base import OpenFile\n__all__ = ['OpenFile']\n"
    )
    (mount / "files" / "base.py").write_text("from ..errnos import fail\n")  # the floor: fine
    (mount / "files" / "appendfile.py").write_text(
        "from .base import OpenFile\n"  # its own room's module: fine
        "from ..tree import View\n"  # upward
    )
    (mount / "tree" / "__init__.py").write_text("from .view import View\n__all__ = ['View']\n")
    (mount / "tree" / "view.py").write_text(
        "from ..files import OpenFile\n"  # the files room's exports: fine
        "from ..files.appendfile import AppendFile\n"  # its module: not
    )
    (mount / "fuse" / "__init__.py").write_text("__all__ = []\n")
    (mount / "fuse" / "_lines.pyx").write_text(
        '"""One-line writes.\n\nimport what the prose says, not a statement\n"""\n'
        "cimport cython\n"
        "from ..files cimport base\n"  # a module of the files room, cimported: not
        "from ..tree import (\n    View,\n)\n\n"
        "cdef class LineWrites:\n    cdef object ops\n"
    )
    assert violations(package) == [
        "logfs.mount.errnos imports logfs.mount.files (upward)",
        "logfs.mount.errnos imports logfs.mount.files.OpenFile (upward)",
        "logfs.mount.files.appendfile imports logfs.mount.tree (upward)",
        "logfs.mount.files.appendfile imports logfs.mount.tree.View (upward)",
        "logfs.mount.fuse._lines imports logfs.mount.files.base (a room's module, not its exports)",
        "logfs.mount.tree.view imports logfs.mount.files.appendfile (a room's module, "
        "not its exports)",
        "logfs.mount.tree.view imports logfs.mount.files.appendfile.AppendFile (a room's module, "
        "not its exports)",
    ]


MAX_LINES = 400  # STYLE.md: a module a reader takes in whole


def test_no_source_file_is_over_400_lines():
    sources = [*(ROOT / "logfs").rglob("*.py"), *(ROOT / "logfs").rglob("*.pyx")]
    sources += (ROOT / "logfs").rglob("*.pxd")
    assert len(sources) > 100  # the package's sources were found
    long = {
        str(path.relative_to(ROOT)): n
        for path in sources
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
