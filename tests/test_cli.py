import subprocess
import sys

import pytest

from logfs import Store
from logfs.core.errors import CorruptRecordError, OffsetOutOfRangeError
from logfs.core.format.record import HEADER_SIZE, read_header


def logfs(*args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "logfs.cli", *map(str, args)], capture_output=True, text=True
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_create_list_describe(tmp_path):
    logfs("create", tmp_path, "orders", "--partitions", "2", "--config", "flush.ms=10")
    assert logfs("list", tmp_path).stdout == "orders\n"
    out = logfs("describe", tmp_path, "orders").stdout
    assert "PartitionCount: 2" in out and "flush.ms=10" in out and "LogEndOffset: 0" in out


def test_user_errors_are_one_line_without_traceback(tmp_path):
    cases = [
        ("create", tmp_path, "bad name"),
        ("create", tmp_path, "t", "--config", "nope=1"),
        ("describe", tmp_path / "missing"),
        ("dump", tmp_path / "missing.log"),
        ("check", tmp_path / "missing"),
    ]
    for args in cases:
        proc = logfs(*args, check=False)
        assert proc.returncode == 1, args
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert logfs("frobnicate", check=False).returncode == 2


def test_dump_and_check_and_repair(tmp_path):
    with Store(tmp_path) as store:
        store.create_topic("t", 1, {"index.interval.bytes": "100", "compression.type": "gzip"})
        for i in range(40):
            store.log("t", 0).append([b"line %d" % i, b"k\tv"])
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    out = logfs("dump", seg, "--print-data-log").stdout.splitlines()
    assert out[0] == f"Dumping {seg}"
    batches = [line for line in out if line.startswith("baseOffset:")]
    assert len(batches) == 40
    assert all("isvalid: true" in b and "compresscodec: gzip" in b for b in batches)
    assert out[7].startswith("| offset: 3 ") and out[7].endswith("payload: k\tv")
    index = logfs("dump", seg.with_suffix(".index"), "--index-sanity-check").stdout
    assert "offset:" in index and "MISMATCH" not in index
    assert logfs("check", tmp_path).stdout == "no problems found\n"

    blob = bytearray(seg.read_bytes())
    flipped = read_header(blob).size * 20 + HEADER_SIZE + 5  # inside the records of a batch
    damaged = 0  # the position of the batch holding the flipped byte
    while damaged + read_header(blob, damaged).size <= flipped:
        damaged += read_header(blob, damaged).size
    blob[flipped] ^= 0x55
    seg.write_bytes(bytes(blob))
    proc = logfs("check", tmp_path, check=False)
    [problem] = proc.stdout.splitlines()
    assert proc.returncode == 1 and problem.startswith(f"{seg}: batch at position {damaged}: ")
    assert "crc" in problem.removeprefix(f"{seg}: ")
    assert "isvalid: false" in logfs("dump", seg).stdout
    proc = logfs("check", tmp_path, "--repair")
    assert "no problems remain" in proc.stdout
    with Store(tmp_path, read_only=True) as store:
        log = store.log("t", 0)
        assert log.next_offset == 80  # the offsets handed out are never given again
        cut = read_header(blob, damaged).base_offset
        assert [r.value for r in log.scan(0, 2)] == [b"line 0", b"k\tv"]
        assert len(list(log.scan(0, cut))) == cut
        with pytest.raises(CorruptRecordError, match=f"t-0 at offset {cut}"):
            log.read(cut)  # the records cut: a gap at the log's end, not its end
        with pytest.raises(OffsetOutOfRangeError):
            log.read(80)


def test_every_command_explains_itself():
    """``logfs COMMAND --help`` gives a description, a sentence for every
    argument and option, and examples; no markup anywhere."""
    from logfs import __version__
    from logfs.cli import build_parser

    assert logfs("--version").stdout.strip() == f"logfs {__version__}"
    top = logfs("--help").stdout
    assert "``" not in top and "examples:" in top
    commands = build_parser()._subparsers._group_actions[0].choices
    assert set(commands) >= {
        "mount",
        "umount",
        "create",
        "list",
        "describe",
        "dump",
        "compact",
        "check",
    }
    for name, parser in commands.items():
        text = logfs(name, "--help").stdout
        assert "``" not in text and "examples:" in text and f"logfs {name}" in text, name
        assert parser.description, name
        for action in parser._actions:
            assert action.help and action.help != "None", (name, action.dest)
    mount = logfs("mount", "--help").stdout
    for option in ("ro", "allow_other", "default_permissions", "partitions=N", "uid=N", "umask=NNN",
                   "flush.ms", "retention.ms", "cleanup.policy"):  # fmt: skip
        assert option in mount, option


def test_a_list_of_servers_in_o_reads_as_written():
    """``-o mirror.to=kafka://a:1,b:2,mirror.topics=x``: a bare HOST:PORT after a
    value goes on that value; other bare words stay options of their own."""
    from logfs.cli import _key_values

    assert _key_values("mirror.to=kafka://a:1,b:2,c:3,mirror.topics=x,ro,allow_other") == {
        "mirror.to": "kafka://a:1,b:2,c:3",
        "mirror.topics": "x",
        "ro": "",
        "allow_other": "",
    }
    assert _key_values("a=1,,b=2") == {"a": "1", "b": "2"}


def test_own_processes_start_without_kio_test_extras():
    """kio imports hypothesis wherever it is installed (here: a test dependency) for test
    strategies nothing in logfs uses; logfs's own processes skip it, other importers not."""

    def imports(*args):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", *args], capture_output=True, text=True
        )
        loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
        return proc, loaded

    proc, loaded = imports("-m", "logfs.daemon")  # no arguments: every face loaded, then usage
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith("usage: python -m logfs.daemon")
    assert "kio.index" in loaded and "hypothesis.core" not in loaded
    _, loaded = imports("-c", "import logfs.daemon")  # a library user's process: untouched
    assert "kio.index" in loaded and "hypothesis.core" in loaded
