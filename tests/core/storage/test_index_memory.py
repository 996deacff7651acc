"""The sparse indexes' memory over all segments is bounded: sealed indexes (of
segments no longer appended to) drop their arrays past the bound and read
their files again when used, with the same answers."""

from __future__ import annotations

import gc
import random

import pytest

from logfs import Store
from logfs.core.storage.indexmemory import INDEX_MEMORY


@pytest.fixture
def small_budget(monkeypatch):
    # The budget is the process's: indexes of earlier tests' segments that only the
    # cycle collector would free still count until it runs. Run it now.
    gc.collect()
    monkeypatch.setattr(INDEX_MEMORY, "capacity", 4 << 10)
    return INDEX_MEMORY


def test_lookups_read_dropped_indexes_back(tmp_path, small_budget):
    rng = random.Random(3)
    values = [b"value %06d " % i + b"x" * rng.randrange(50) for i in range(20_000)]
    with Store(tmp_path / "data") as store:
        store.create_topic(
            "t", 1, {"segment.bytes": "65536", "index.interval.bytes": "64"}
        )  # an entry a batch, about 45 a segment
        log = store.log("t", 0)
        for i in range(0, len(values), 20):
            log.append(values[i : i + 20], timestamp=1_000_000 + i)
        assert log.segment_count > 10
        # the sealed indexes hold at most the budget, whatever the log holds
        assert small_budget.used <= small_budget.capacity + (8 << 10), small_budget.used
        dropped = sum(s.offset_index._arrays is None for s in log.segments[:-1])
        assert dropped > 0
        for n in rng.sample(range(len(values)), 300):
            assert log.read(n).value == values[n]
        for i in rng.sample(range(0, len(values), 20), 100):
            assert log.offset_for_time(1_000_000 + i) == i
        assert [r.value for r in log.scan(0, 2000)] == values[:2000]
        assert small_budget.used <= small_budget.capacity + (8 << 10)
    with Store(tmp_path / "data") as store:  # the files were never changed by it
        log = store.log("t", 0)
        assert [r.value for r in log.scan()] == values


def test_the_active_index_is_never_dropped(tmp_path, small_budget):
    with Store(tmp_path / "data") as store:
        store.create_topic("t", 1, {"index.interval.bytes": "64"})
        log = store.log("t", 0)
        for i in range(3000):
            log.append([b"%05d" % i + b"y" * 80])
        active = log.segments[-1]
        assert not active.offset_index.sealed
        assert active.offset_index._arrays is not None
        assert log.read(1234).value == b"01234" + b"y" * 80
