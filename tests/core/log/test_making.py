"""Topics and partitions made in steps (core/log/making.py) and deleted with their
directories' removal last, so that a daemon does the file work off its loop."""

from __future__ import annotations

import errno
import threading

import pytest

from logfs.core.errors import (
    InvalidConfigError,
    PartitionLimitError,
    TopicExistsError,
    UnknownTopicError,
)
from logfs.core.log import Limits, Store, deletion, making


def dirs(data, topic: str) -> list[str]:
    """The partition directories of ``topic`` (not ones renamed aside)."""
    return sorted(p.name for p in data.glob(f"{topic}-*") if p.name.split("-")[-1].isdigit())


def test_a_topic_being_made_is_unlisted_and_its_name_taken(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        new = store.begin_topic("t", 3, config={"retention.ms": "1000"})
        assert "t" not in store.topics()
        with pytest.raises(TopicExistsError):
            store.create_topic("t")
        with pytest.raises(UnknownTopicError):
            store.delete_topic("t")
        builder = threading.Thread(target=new.build)  # as a daemon builds it
        builder.start()
        builder.join()
        assert "t" not in store.topics()  # built, not yet adopted
        store.finish(new)
        assert store.topics()["t"] == 3
        assert store.topic_config("t").retention_ms == 1000
        store.log("t", 2).append([b"a", b"b"])
        assert store.log("t", 2).read(1).value == b"b"
    with Store(data) as store:  # and it is all on disk
        assert store.topics()["t"] == 3
        assert store.log("t", 2).read(1).value == b"b"


def test_partitions_being_made_count_against_the_limits(tmp_path):
    with Store(tmp_path / "data", limits=Limits(max_partitions=5)) as store:
        new = store.begin_topic("a", 3)
        with pytest.raises(PartitionLimitError, match="with those being made"):
            store.create_topic("b", 3)
        store.make(new)
        with pytest.raises(PartitionLimitError):
            store.create_topic("b", 3)
        store.create_topic("b", 2)
        assert store.topics() == {"a": 3, "b": 2}


def test_a_topic_is_grown_by_one_request_at_a_time(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
        new = store.begin_partitions("t", 3)
        with pytest.raises(InvalidConfigError, match="being given partitions"):
            store.add_partitions("t", 4)
        assert store.partitions("t") == [0]
        store.make(new)
        assert store.partitions("t") == [0, 1, 2]


def test_a_build_that_fails_leaves_nothing(tmp_path, monkeypatch):
    data = tmp_path / "data"
    real = making.Log

    def log(path, topic, partition, config):
        if partition == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, topic, partition, config)

    with Store(data) as store:
        monkeypatch.setattr(making, "Log", log)
        with pytest.raises(OSError):
            store.create_topic("t", 4, config={"retention.ms": "1000"})
        store.create_topic("u")
        with pytest.raises(OSError):
            store.add_partitions("u", 4)
        monkeypatch.undo()
        assert store.topics() == {"u": 1}
        assert dirs(data, "t") == [] and dirs(data, "u") == ["u-0"]
        assert not (data / "config/t.properties").exists()
        store.create_topic("t", 4)  # the name is free again
        store.add_partitions("u", 4)
        assert store.topics() == {"t": 4, "u": 4}


def test_a_topic_deleted_while_its_partitions_are_made(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t")
        new = store.begin_partitions("t", 3)
        store.delete_topic("t")
        new.build()
        with pytest.raises(UnknownTopicError, match="deleted meanwhile"):
            store.finish(new)
        assert "t" not in store.topics() and dirs(data, "t") == []
        store.create_topic("t")  # a new topic of that name starts with its own partition
        assert store.partitions("t") == [0]


def test_a_deleted_topic_is_gone_before_its_directories_are_removed(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", 3)
        store.log("t", 1).append([b"x"] * 10)
        remove = store.begin_deletion("t")
        assert "t" not in store.topics() and dirs(data, "t") == []
        asides = [p for p in data.iterdir() if deletion.DELETE_DIR.fullmatch(p.name)]
        assert len(asides) == 3
        assert not list(data.glob(deletion.DELETING_FILE + "*"))  # no longer marked
        store.create_topic("t")  # the name is free while the old directories go
        remove()
        assert not any(p.exists() for p in asides)
        assert store.partitions("t") == [0]


def test_directories_left_by_a_deletion_go_at_the_next_open(tmp_path):
    """A crash after the topic was forgotten, before its directories were removed."""
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", 3)
        store.create_topic("kept")
        store.begin_deletion("t")  # its removal never runs
    with Store(data) as store:
        assert store.topics() == {"kept": 1}
    assert not [p for p in data.iterdir() if deletion.DELETE_DIR.fullmatch(p.name)]
    assert dirs(data, "t") == [] and dirs(data, "kept") == ["kept-0"]
