"""A topic while another request makes it: Metadata answers LEADER_NOT_AVAILABLE (ask
again, as Kafka answers while a new topic's leaders are chosen), and a second client
creating the same topic meanwhile is told it exists and then finds it, as two Spark
tasks writing to one new topic do."""

from __future__ import annotations

import threading
import time

from kafka_helpers import Served

from logfs.core.client.wire import Wire
from logfs.core.errors import KafkaCode

WIDE = 3000  # partitions: seconds to make, so the second client asks meanwhile


def test_two_clients_creating_one_topic_both_find_it(tmp_path):
    data = tmp_path / "data"
    with Served(data, f"partitions={WIDE}") as served:
        address = f"kafka://{served.bootstrap}"
        first, second = Wire(address, timeout=120), Wire(address, timeout=120)
        found: dict[str, tuple] = {}
        creating = threading.Thread(target=lambda: found.update(first=first.topic_created("t")))
        creating.start()
        try:
            deadline = time.monotonic() + 60
            while not (data / "t-0").exists():  # the first client's making has begun
                assert time.monotonic() < deadline and creating.is_alive()
                time.sleep(0.001)
            code, count = second.listing("t")
            assert creating.is_alive(), "the making ended before the question: too quick"
            assert (code, count) == (KafkaCode.LEADER_NOT_AVAILABLE, 0)
            found["second"] = second.topic_created("t")  # "exists", then waits for it
        finally:
            creating.join(120)
        assert found["first"][0] == found["second"][0] == WIDE
        assert second.listing("t") == (KafkaCode.NONE, WIDE)
        assert second.listing("nothing") == (KafkaCode.UNKNOWN_TOPIC_OR_PARTITION, 0)
        first.close()
        second.close()
