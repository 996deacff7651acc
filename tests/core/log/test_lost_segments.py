"""A segment file removed or replaced under a live writer, or missing at the
next open: the partition goes offline with the reason, nothing more is made
durable or appended, `check` reports it, and no offset is handed out twice."""

from __future__ import annotations

import os

import pytest

from logfs import Store
from logfs.core.errors import LogFailedError
from logfs.core.tools.offline import check


def filled(data, n: int = 100, **config) -> None:
    with Store(data) as store:
        store.create_topic("t", 1, {k.replace("_", "."): v for k, v in config.items()})
        store.create_topic("other")
        store.log("t", 0).append([b"r%d" % i for i in range(n)])
        store.log("other", 0).append([b"o"])


def remove_segments(data, topic: str = "t") -> None:
    directory = data / f"{topic}-0"
    for name in os.listdir(directory):
        if name.endswith((".log", ".index", ".timeindex")):
            os.unlink(directory / name)


def test_a_partition_whose_segments_are_gone_opens_offline_and_stays_so(tmp_path):
    data = tmp_path / "data"
    filled(data)
    remove_segments(data)
    for _ in range(2):  # and again: the checkpoint still says how far offsets went
        with Store(data) as store:
            log = store.log("t", 0)
            reason = store.failures()["t-0"]
            assert "offsets up to 100 were handed out" in reason
            with pytest.raises(LogFailedError):
                log.append([b"again"])
            assert log.next_offset < 100  # nothing appended: no offset below 100 given again
            store.log("other", 0).append([b"fine"])  # the others are untouched
        assert any("before its recovery point 100" in p for p in check(data))


def test_the_active_segment_removed_under_a_live_writer(tmp_path):
    data = tmp_path / "data"
    filled(data)
    with Store(data) as store:
        log = store.log("t", 0)
        log.flush()
        os.unlink(log.segment_file(log.segment_names()[1]))  # its .log
        log.append([b"into a removed file"])
        with pytest.raises(LogFailedError):
            log.flush()
        assert "removed" in store.failures()["t-0"]
        with pytest.raises(LogFailedError):
            log.append([b"more"])
    with Store(data) as store:  # the next open: offline, not back at offset 0
        assert "offsets up to 100 were handed out" in store.failures()["t-0"]
        with pytest.raises(LogFailedError):
            store.log("t", 0).append([b"x"])


def test_the_active_segment_replaced_under_a_live_writer(tmp_path):
    data = tmp_path / "data"
    filled(data)
    with Store(data) as store:
        log = store.log("t", 0)
        path = log.segment_file(log.segment_names()[1])
        log.append([b"one more"])
        log.flush()  # the file is open
        other = tmp_path / "other.log"
        other.write_bytes(b"")
        os.replace(other, path)
        log.append([b"after the swap"])
        with pytest.raises(LogFailedError):
            log.flush()
        assert "replaced" in store.failures()["t-0"]
        assert "other-0" not in store.failures()
