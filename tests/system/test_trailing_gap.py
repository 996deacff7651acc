"""A gap at a log's end read through the mount (trailing_gap.py makes one): the
records cut are lost offsets below the log end, with nothing after them, and
every reader that reaches them is told so (``EIO``), never that the log ends
there, while a read at the log end answers as at any log's end (``ENOENT``, the
end of ``from/<n>``)."""

from __future__ import annotations

import errno
import subprocess

import pytest
from mount_helpers import Daemon
from trailing_gap import END, LOST, torn

pytestmark = [pytest.mark.mount, pytest.mark.timeout(180)]


def test_the_mount_reads_a_gap_at_the_end_as_eio(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    values = torn(data)
    mnt.mkdir()
    with Daemon(data, mnt):
        p0 = mnt / "t" / "0"
        assert (p0 / "offset" / str(LOST - 1)).read_bytes() == values[LOST - 1]
        for offset in (LOST, END - 1):
            with pytest.raises(OSError) as e:
                (p0 / "offset" / str(offset)).read_bytes()
            assert e.value.errno == errno.EIO, offset
        with pytest.raises(FileNotFoundError):
            (p0 / "offset" / str(END)).read_bytes()
        for name, first in (("stream", 0), (f"from/{LOST - 3}", LOST - 3)):
            cat = subprocess.run(["cat", str(p0 / name)], capture_output=True)
            # every record before the gap, then EIO: never a quiet end of file
            assert cat.stdout == b"".join(v + b"\n" for v in values[first:LOST]), name
            assert cat.returncode != 0 and b"Input/output error" in cat.stderr, cat
        with pytest.raises(OSError) as e:
            (p0 / "from" / str(LOST)).read_bytes()
        assert e.value.errno == errno.EIO
        assert (p0 / "from" / str(END)).read_bytes() == b""  # the log end: nothing lost
        with open(p0 / "append", "ab") as f:
            f.write(b"after\n")
        assert (p0 / "offset" / str(END)).read_bytes() == b"after"
        assert (p0 / "from" / str(END)).read_bytes() == b"after\n"
        cat = subprocess.run(["cat", str(p0 / "stream")], capture_output=True)
        assert cat.returncode != 0 and b"Input/output error" in cat.stderr, cat
