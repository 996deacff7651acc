"""logfs as a user installs it from wheels: mount_scripts/build_wheels.sh builds the wheelhouse
(logfs and the dependencies PyPI serves only as source, repaired to manylinux tags), pip
installs it into a new venv with nothing compiled, and from that venv, in another directory
with a minimal environment, a Spark job finds ``format("logfs")`` and `logfs mount` mounts.

The wheelhouse and the venv are made once for the module; pip's cache keeps the wheels it
builds from source (pyfuse3, pyspark), so a second run only recompiles logfs's codec."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from spark_helpers import JOB

from logfs import Store

ROOT = Path(__file__).resolve().parents[2]
# What a login shell has: no venv, no VIRTUAL_ENV, no PYSPARK_PYTHON, no PYTHONPATH.
# The compiled modules a wheel holds (each .pyx of the checkout, and the C library), and the
# sources the sdist holds: every .pyx, .pxd (the ones without a .pyx too) and the C source.
SOURCES = sorted(
    str(p.relative_to(ROOT)) for kind in ("*.pyx", "*.pxd") for p in (ROOT / "logfs").rglob(kind)
) + ["logfs/mount/fuse/_fuseinit.c"]
COMPILED = [s.rsplit(".", 1)[0] for s in SOURCES if s.endswith((".pyx", ".c"))]
PLAIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def plain_env(**extra: str) -> dict[str, str]:
    env = {"PATH": PLAIN_PATH, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    if "JAVA_HOME" in os.environ and not shutil.which("java", path=PLAIN_PATH):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]  # the user's Java, nothing of logfs
    return {**env, **extra}


def run(args, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    env = {
        **os.environ,
        "PYTHON": sys.executable,  # wheels for the Python that runs the suite
        "LOGFS_DIST": str(out / "dist"),
    }
    run(["bash", str(ROOT / "mount_scripts/build_wheels.sh"), str(out)], env=env, timeout=900)
    return out


@pytest.fixture(scope="module")
def venv(wheelhouse, tmp_path_factory) -> Path:
    """A new venv with logfs[spark] from the wheelhouse, PyPI's wheels for the rest; pip runs
    with a PATH that has no compiler and may build nothing."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    run([sys.executable, "-m", "venv", str(venv)], timeout=120)
    nothing = venv.parent / "empty-bin"
    nothing.mkdir()
    path = f"{venv / 'bin'}:{nothing}"
    assert not any(shutil.which(cc, path=path) for cc in ("cc", "gcc", "clang", "c++"))
    logfs_wheel = next(wheelhouse.glob("logfs-*.whl"))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    run(
        [
            str(venv / "bin/python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "--find-links",
            str(wheelhouse),
            f"{logfs_wheel}[spark]",
        ],
        env={**env, "PATH": path},
        cwd=venv.parent,
        timeout=900,
    )
    return venv


def test_the_wheels_are_manylinux_and_logfs_holds_its_codec(wheelhouse):
    wheels = sorted(p.name for p in wheelhouse.glob("*.whl"))
    names = {w.split("-")[0] for w in wheels}
    assert {"logfs", "pyfuse3", "pyspark"} <= names, wheels
    for whl in wheels:  # compiled wheels repaired; pure ones (pyspark) are for any platform
        platform = whl.removesuffix(".whl").split("-")[-1]
        assert platform == "any" or platform.startswith("manylinux"), whl
    logfs = next(wheelhouse.glob("logfs-*.whl"))
    assert "manylinux" in logfs.name
    with zipfile.ZipFile(logfs) as z:
        files = z.namelist()
        pth = z.read("logfs-pyspark-python.pth").decode()
    assert len(COMPILED) > 5
    for module in COMPILED:
        assert any(f.startswith(module + ".") and f.endswith(".so") for f in files), module
    assert "pyspark_logfs.py" in files
    assert 'setdefault("PYSPARK_PYTHON", sys.executable)' in pth
    with zipfile.ZipFile(next(wheelhouse.glob("pyfuse3-*.whl"))) as z:
        assert any(f.startswith("pyfuse3.libs/libfuse3") for f in z.namelist())
    # python -m build made the sdist beside the wheel; it holds the codec's sources only
    sdist = next((wheelhouse / "dist").glob("logfs-*.tar.gz"))
    listing = run(["tar", "tzf", str(sdist)]).stdout.split()
    for source in SOURCES:
        assert any(f.endswith("/" + source) for f in listing), source
    generated = tuple(s.replace(".pyx", ".c") for s in SOURCES if s.endswith(".pyx"))
    assert not any(f.endswith((".so", *generated)) for f in listing)


@pytest.mark.spark
def test_a_spark_job_elsewhere_with_nothing_set_reads_and_writes(venv, tmp_path):
    python = str(venv / "bin/python")
    # The python3 of a plain PATH has no logfs: only the wheel's .pth can make Spark find it.
    bare = subprocess.run(["python3", "-c", "import logfs"], env=plain_env(), capture_output=True)
    assert bare.returncode != 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "job.py").write_text(JOB)
    data = tmp_path / "data"
    done = subprocess.run(
        [python, "job.py", str(data)],
        cwd=elsewhere,
        env=plain_env(SPARK_LOCAL_IP="127.0.0.1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert done.returncode == 0 and "ROWS" in out, done.stdout + done.stderr[-4000:]
    rows = json.loads(out["ROWS"])
    assert [r[:2] for r in rows] == [["k1", "a"], ["k2", "b"], [None, "c"]]
    assert sorted(r[2] for r in rows) == [0, 1, 2]
    assert json.loads(out["NOT_IMPORTED"]) is True  # Spark found the source by itself
    with Store(data, read_only=True) as store:
        assert sorted(r.value for r in store.log("t", 0).scan()) == [b"a", b"b", b"c"]


def test_a_users_pyspark_python_wins(venv, tmp_path):
    show = "import os; print(os.environ['PYSPARK_PYTHON'])"
    python = str(venv / "bin/python")
    ours = run([python, "-c", show], env=plain_env(), cwd=tmp_path).stdout.strip()
    assert ours == python
    theirs = run([python, "-c", show], env=plain_env(PYSPARK_PYTHON="/opt/py/bin/python3"))
    assert theirs.stdout.strip() == "/opt/py/bin/python3"


@pytest.mark.mount
def test_logfs_mount_from_the_venv(venv, tmp_path):
    """The venv's logfs mounts with the libfuse3 its pyfuse3 wheel carries, the shell
    appends and reads a line, and the CLI and the Store API of the same venv see it."""
    logfs = str(venv / "bin/logfs")
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    env = plain_env()
    run([logfs, "mount", str(data), str(mnt)], env=env, cwd=tmp_path, timeout=120)
    try:
        pid = int(os.getxattr(mnt, "user.logfs.pid"))
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        fuse = {line.split()[-1] for line in maps if "libfuse3" in line}
        site = venv / "lib"
        assert fuse and all(Path(f).is_relative_to(site) for f in fuse), fuse
        sh = ["sh", "-c"]
        run([*sh, f"mkdir '{mnt}/greetings' && echo hello >> '{mnt}/greetings/0/append'"], env=env)
        assert run(["cat", str(mnt / "greetings/0/offset/0")], env=env).stdout == "hello"
    finally:
        done = subprocess.run([logfs, "umount", str(mnt)], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 30
    while os.path.ismount(mnt) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.ismount(mnt)
    listed = run([logfs, "list", str(data)], env=env, cwd=tmp_path).stdout
    assert "greetings" in listed
    read = (
        "import sys, logfs; from logfs import Store\n"
        "with Store(sys.argv[1], read_only=True) as s: print(s.log('greetings', 0).read(0).value)\n"
        "print(logfs.__file__)"
    )
    done = run([str(venv / "bin/python"), "-c", read, str(data)], env=env, cwd=tmp_path)
    value, where = done.stdout.splitlines()
    assert value == "b'hello'"
    assert Path(where).is_relative_to(venv / "lib")  # the wheel's logfs, not the checkout's
