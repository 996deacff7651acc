"""A Fetch that waits (``max_wait`` with ``min_bytes`` unmet) ends at its deadline
whatever the clock did between the look at it and the wait: a deadline passed in
between ends the wait at once, as an empty answer, not as an internal error that
closes the client's connection."""

from __future__ import annotations

import random

import trio
import trio.testing
from kafka_helpers import encode_request
from kio.serial import entity_reader
from test_kafka_protocol import fetch_request

from logfs import Store
from logfs.groups import Coordinator
from logfs.kafka import Broker
from logfs.kafka.access import Client
from logfs.kafka.protocol import FETCH, read_request, schema


def test_a_fetch_whose_deadline_passes_before_its_wait_answers_empty(tmp_path):
    # A clock a hundred thousand times faster than the machine: every step of the
    # handler moves it on by tenths of a second, so that the deadline often falls
    # between the handler's look at the clock and its wait.
    clock = trio.testing.MockClock(rate=100_000)
    rng = random.Random(7)
    answers = []
    m = schema(FETCH, 11)

    async def main() -> None:
        with Store(tmp_path / "data") as store:
            store.create_topic("t", 1)
            broker = Broker(store, groups=Coordinator(store))
            client = Client("127.0.0.1", 9092, None)
            for _ in range(100):
                body = fetch_request("t", {0: 0}, max_wait_ms=rng.randrange(1, 2000), min_bytes=1)
                request = read_request(memoryview(encode_request(FETCH, 11, body)[4:]))
                reply = await broker.handle(request, client)
                frame = b"".join(reply.parts)  # no records: bytes only
                body, _ = entity_reader(m.FetchResponse)(memoryview(frame), 4 + 4)
                [topic] = body.responses
                [partition] = topic.partitions
                answers.append((partition.error_code.value, bytes(partition.records)))

    trio.run(main, clock=clock)
    assert answers == [(0, b"")] * 100  # each an empty answer, none an error
