"""The background flusher on trio's clock (MockClock autojump: no real sleeps)."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from logfs import Store
from logfs.core.config import TopicConfig, flush_due
from logfs.core.log import FlushTicket
from logfs.daemon import Flusher


class FakeLog:
    """Just enough of a Log: counts, a real fd to fsync, a clock from trio."""

    def __init__(self, path, topic="t", partition=0, **config) -> None:
        self.topic, self.partition = topic, partition
        self.config = TopicConfig.from_properties(
            {k.replace("_", "."): v for k, v in config.items()}
        )
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT)
        self.next_offset = self.recovery_point = 0
        self.unflushed_messages = 0
        self.last_flush_ms = 0
        self.flushed_at: list[float] = []
        self.retention_at: list[float] = []
        self.fail = False
        self.aborted = 0

    def append(self, n: int = 1) -> None:
        self.next_offset += n
        self.unflushed_messages += n

    def flush_due(self, now: int) -> bool:
        return flush_due(
            self.config,
            unflushed=self.unflushed_messages,
            last_flush_ms=self.last_flush_ms,
            now_ms=now,
        )

    def prepare_flush(self) -> FlushTicket:
        fd = os.dup(self.fd)
        if self.fail:
            os.close(fd)
            fd = 10_000  # not open: fsync fails with EBADF
        return FlushTicket([fd], self.next_offset, self.unflushed_messages)

    def complete_flush(self, ticket: FlushTicket) -> None:
        if ticket.error is not None:
            self.aborted += 1
            raise ticket.error
        self.recovery_point = ticket.next_offset
        self.unflushed_messages -= ticket.messages
        self.last_flush_ms = now_ms()
        self.flushed_at.append(trio.current_time())

    def enforce_retention(self, now: int, keep_from: int | None = None) -> int:
        self.retention_at.append(trio.current_time())
        self.kept_from = keep_from
        return 0


class FakeStore:
    def __init__(self, *logs) -> None:
        self._logs = list(logs)
        self.checkpoints: list[float] = []

    def logs(self):
        return self._logs

    def checkpoint(self) -> None:
        self.checkpoints.append(trio.current_time())


def now_ms() -> int:
    return int(trio.current_time() * 1000)


def run(test) -> None:
    trio.run(test, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.fixture
def fd_path(tmp_path):
    return tmp_path / "segment"


async def sync_inline(ticket: FlushTicket) -> None:
    # A worker thread would let the autojump clock run ahead of the fsync.
    ticket.sync()
    await trio.lowlevel.checkpoint()


def flusher_for(store, **kwargs) -> Flusher:
    return Flusher(store, now_ms=now_ms, sync=sync_inline, **kwargs)


def test_flush_ms_bounds_the_age_of_unflushed_records(fd_path):
    log = FakeLog(fd_path, flush_ms=1000)
    flusher = flusher_for(FakeStore(log), tick=0.1)

    async def test():
        async with trio.open_nursery() as nursery:
            await nursery.start(flusher.run)
            await trio.sleep(0.55)
            log.append(5)
            await trio.sleep(0.4)
            assert log.flushed_at == []  # 0.95 s since the last flush
            await trio.sleep(0.2)
            assert log.recovery_point == 5 and log.unflushed_messages == 0
            assert 1.0 <= log.flushed_at[0] <= 1.1
            await trio.sleep(5)
            assert len(log.flushed_at) == 1  # nothing new: nothing to flush
            flusher.stop()

    run(test)


def test_flush_messages_flushes_within_a_tick(fd_path):
    log = FakeLog(fd_path, flush_ms=3_600_000, flush_messages=3)
    flusher = flusher_for(FakeStore(log), tick=0.1)

    async def test():
        async with trio.open_nursery() as nursery:
            await nursery.start(flusher.run)
            log.append(2)
            await trio.sleep(1)
            assert log.flushed_at == []
            log.append(1)
            await trio.sleep(0.15)
            assert log.recovery_point == 3
            flusher.stop()

    run(test)


def test_retention_and_checkpoints_run_at_their_intervals(fd_path):
    log = FakeLog(fd_path)
    store = FakeStore(log)
    flusher = flusher_for(store, tick=1, retention_interval=300, checkpoint_interval=60)

    async def test():
        async with trio.open_nursery() as nursery:
            await nursery.start(flusher.run)
            await trio.sleep(650)
            flusher.stop()

    run(test)
    assert [round(t) for t in log.retention_at] == [300, 600]
    assert [round(t) for t in store.checkpoints] == [60 * i for i in range(1, 11)]


def test_retention_keeps_what_a_mirror_has_not_forwarded(fd_path):
    mirrored = FakeLog(fd_path, topic="mirrored", partition=3)
    other = FakeLog(fd_path, topic="t", partition=3)
    flusher = flusher_for(
        FakeStore(mirrored, other), keep_from=lambda t, p: 42 if t == "mirrored" else None
    )

    async def test():
        flusher.enforce_retention()

    run(test)
    assert (mirrored.kept_from, other.kept_from) == (42, None)


def test_flushes_of_one_log_are_serialized(fd_path):
    log = FakeLog(fd_path)
    flusher = flusher_for(FakeStore(log))

    async def test():
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                log.append()
                nursery.start_soon(flusher.flush_log, log)
        assert log.recovery_point == 5 and log.unflushed_messages == 0
        assert flusher.statistics()["flushes"] == 5

    run(test)


def test_with_a_real_store(tmp_path):
    with Store(tmp_path / "data", defaults={"flush.ms": "0"}) as store:
        store.create_topic("t", partitions=2)
        store.log("t", 1).append([b"a", b"b"])
        flusher = Flusher(store)

        async def test():
            assert await flusher.flush_due() == 1

        trio.run(test)
        log = store.log("t", 1)
        assert log.recovery_point == log.next_offset == 2
        assert log.unflushed_messages == 0
