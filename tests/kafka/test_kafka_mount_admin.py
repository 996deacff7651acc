"""What the Kafka face's admin calls look like on the mount: after DeleteRecords
an ``offset/<n>`` below the new log start is gone (ENOENT, even one read
before), ``stream`` starts there; a consumer group of either protocol shows
its type and state on its ``groups/<group>`` files."""

from __future__ import annotations

import os
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from kafka_helpers import mounted

from logfs.core.client import names


def test_delete_records_is_seen_by_the_mount(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt) as (_, bootstrap):
        os.mkdir(mnt / "dr")
        with open(mnt / "dr" / "0" / "append", "w") as f:
            f.write("".join(f"line {i}\n" for i in range(30)))
        before = (mnt / "dr" / "0" / "offset" / "5").read_bytes()
        assert before == b"line 5"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        result = admin.delete_records([ck.TopicPartition("dr", 0, 10)])
        assert next(iter(result.values())).result(30).low_watermark == 10
        for n in (0, 5, 9):
            with pytest.raises(FileNotFoundError):
                (mnt / "dr" / "0" / "offset" / str(n)).read_bytes()
        assert (mnt / "dr" / "0" / "offset" / "10").read_bytes() == b"line 10"
        lines = (mnt / "dr" / "0" / "stream").read_text().splitlines()
        assert lines == [f"line {i}" for i in range(10, 30)]


def test_groups_files_show_each_groups_type_and_state(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt, "group.consumer.heartbeat.interval.ms=5000") as (_, bootstrap):
        os.mkdir(mnt / "g")
        with open(mnt / "g" / "0" / "append", "w") as f:
            f.write("a\nb\nc\n")
        consumers = {}
        for protocol in ("consumer", "classic"):
            c = ck.Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"by-{protocol}",
                    "group.protocol": protocol,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            c.subscribe(["g"])
            deadline = time.monotonic() + 60
            while (m := c.poll(0.2)) is None or m.error():
                assert time.monotonic() < deadline, f"{protocol}: nothing read"
            c.commit(m, asynchronous=False)
            consumers[protocol] = c
        for protocol, c in consumers.items():
            path = os.fsencode(mnt / "g" / "0" / "groups" / f"by-{protocol}")
            assert os.getxattr(path, names.GROUP_TYPE_XATTR) == protocol.encode()
            assert os.getxattr(path, names.GROUP_STATE_XATTR) == b"Stable"
            c.close()
