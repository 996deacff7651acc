"""The one part of the build that pyproject.toml cannot state: a ``.pth`` file installed into
``site-packages`` beside logfs, by a wheel and by an editable install alike.

Spark starts its Python processes (the lookup that finds ``format("logfs")``, then every task's
worker) with ``$PYSPARK_PYTHON``, else ``python3`` from ``PATH``, which need not have logfs. The
JVM copies the driver's environment when the session starts, before any logfs code runs, so
only something that runs at every start of the interpreter can name it: a ``.pth`` line, run by
``site`` before the job's first line. It names the interpreter that has logfs unless the user set
the variable (docs/spark.md, "Install and register").
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH_NAME = "logfs-pyspark-python.pth"
PTH_LINE = (
    'import os, sys; sys.executable and os.environ.setdefault("PYSPARK_PYTHON", sys.executable)\n'
)


class BuildPyWithPth(build_py):
    """build_py that also writes the ``.pth`` file at the top of what is installed."""

    def run(self):
        super().run()
        for target in self._pth_targets():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(PTH_LINE)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), *map(str, self._pth_targets())]

    def _pth_targets(self):
        if not self.editable_mode:
            return [Path(self.build_lib, PTH_NAME)]
        # An editable wheel holds a path .pth instead of build_lib's files; what lies in the
        # directory being packed as the wheel's top level (install_lib) is installed as is.
        install = self.get_finalized_command("install")
        return [Path(install.install_lib, PTH_NAME)]


setup(cmdclass={"build_py": BuildPyWithPth})
