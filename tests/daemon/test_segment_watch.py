"""The watch on segment files: an active segment removed or replaced from
outside takes its partition offline as soon as the kernel reports it, long
before the flusher's next fsync; the daemon's own work (rolls, retention,
topics created and deleted) and harmless changes take nothing offline."""

from __future__ import annotations

import os

import pytest
import trio

from logfs import Store
from logfs.core.errors import LogFailedError
from logfs.core.storage import segment_name
from logfs.daemon.segment_watch import SegmentWatch


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t", 2)
        store.log("t", 0).append([b"a", b"b"])
        store.log("t", 1).append([b"c"])
        yield store


async def settled(watch: SegmentWatch, checks: int, deadline: float = 1.0) -> None:
    """Wait (real time, at most ``deadline``) until the watch has checked ``checks`` logs."""
    with trio.fail_after(deadline):
        while watch.checks < checks:
            await trio.sleep(0.001)


def run(store, scenario) -> None:
    async def main():
        watch = SegmentWatch(store)
        async with trio.open_nursery() as nursery:
            await nursery.start(watch.run)
            await scenario(watch)
            nursery.cancel_scope.cancel()

    trio.run(main)


def active_log_path(log) -> str:
    return log.segment_file(segment_name(log.active_base_offset, ".log"))


def test_an_active_segment_removed_goes_offline_before_any_fsync(store):
    log = store.log("t", 0)

    async def scenario(watch):
        os.unlink(active_log_path(log))
        await settled(watch, 1)
        assert "removed" in store.failures()["t-0"]
        with pytest.raises(LogFailedError):
            log.append([b"after"])
        assert store.log("t", 1).append([b"d"]) == 1  # its neighbour goes on

    run(store, scenario)
    assert (log.dir / segment_name(2, ".log")).exists()  # the next open starts at 2


def test_an_active_segment_renamed_over_goes_offline(store, tmp_path):
    log = store.log("t", 1)

    async def scenario(watch):
        other = log.dir / "elsewhere"
        other.write_bytes(b"")
        os.rename(other, active_log_path(log))
        await settled(watch, 1)
        assert "replaced" in store.failures()["t-1"]

    run(store, scenario)


def test_the_daemons_own_work_and_harmless_changes_take_nothing_offline(store):
    log = store.log("t", 0)

    async def scenario(watch):
        os.chmod(active_log_path(log), 0o600)  # not watched: nothing to check
        os.link(active_log_path(log), log.dir / "second-name.log")  # a link more: fine
        os.unlink(log.dir / "second-name.log")  # IN_DELETE of a .log: checked, and fine
        await settled(watch, 1)
        log.roll()
        log.append([b"x"])
        log.roll()
        assert log.delete_records(3) == 3  # a sealed segment's files removed by the log
        store.create_topic("new")  # watched from its IN_CREATE on
        store.delete_topic("t")
        await trio.sleep(0.05)
        new = store.log("new", 0)
        new.append([b"n"])
        before = watch.checks
        os.unlink(active_log_path(new))
        await settled(watch, before + 1)
        assert set(store.failures()) == {"new-0"}

    run(store, scenario)


def test_a_refused_inotify_leaves_the_check_to_the_flush(store, monkeypatch):
    from logfs.core.storage import inotify

    def refused(self):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(inotify.DirectoryWatch, "__init__", refused)
    log = store.log("t", 0)

    async def scenario(watch):
        os.unlink(active_log_path(log))
        await trio.sleep(0.05)
        assert store.failures() == {}
        with pytest.raises(LogFailedError):
            log.flush()

    run(store, scenario)
