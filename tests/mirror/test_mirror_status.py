"""What a daemon's retention keeps for mirrors run as processes of their own, read
from their status files in DATA (`RetentionFloors`)."""

from __future__ import annotations

import os

from logfs.mirror import RetentionFloors
from logfs.mirror.status import status_path, write_status


def status(mirror_id: str, topics: str, positions: dict, **fields) -> dict:
    return {
        "id": mirror_id, "to": "kafka://127.0.0.1:1", "pid": os.getpid(), "topics": topics,
        "retention_wait": True, "error": None, "topic_errors": {},
        "partitions": {name: {"position": p} for name, p in positions.items()}, **fields,
    }  # fmt: skip


def test_the_lowest_position_of_the_mirrors_that_forward_a_partition(tmp_path):
    clock = [0.0]
    floors = RetentionFloors(tmp_path, own="daemon's", clock=lambda: clock[0])
    assert floors("t", 0) is None  # no mirror
    write_status(status_path(tmp_path, "a"), status("a", "t|u", {"t-0": 50, "u-0": 7}))
    write_status(status_path(tmp_path, "b"), status("b", "t.*", {"t-0": 20}))
    write_status(status_path(tmp_path, "daemon's"), status("daemon's", ".*", {"t-0": 1}))
    write_status(status_path(tmp_path, "c"), status("c", ".*", {}, retention_wait=False))
    write_status(
        status_path(tmp_path, "d"), status("d", "v", {}, topic_errors={"v": "3 partitions there"})
    )
    assert floors("t", 0) is None  # read at most once a second
    clock[0] = 1.0
    assert floors("t", 0) == 20  # b's; the daemon's own mirror is asked directly
    assert floors("t", 1) == 0  # matched, not listed yet: everything is kept
    assert floors("u", 0) == 7
    assert floors("w", 0) is None  # no mirror forwards w
    assert floors("v", 0) is None  # d refuses v (another partition count there)
    assert floors("__consumer_offsets", 0) is None  # internal topics are never mirrored
    follower = status("f", "t", {"t-0": 3})
    del follower["to"]
    write_status(status_path(tmp_path, "f"), follower | {"from": "kafka://127.0.0.1:1"})
    (tmp_path / "logfs-mirror.e.json").write_text("{not json")
    clock[0] = 2.0
    assert floors("t", 0) == 20  # a file that does not parse is no mirror
