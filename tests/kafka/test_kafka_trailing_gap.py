"""A gap at a log's end read through the listener (trailing_gap.py makes one): a
Fetch of a lost offset below the log end answers ``CORRUPT_MESSAGE``, never an
empty answer a consumer would wait on; at the log end, as at any log's end."""

from __future__ import annotations

from kafka_helpers import Served, call
from test_kafka_protocol import FETCH, fetch_request
from trailing_gap import END, LOST, torn

from logfs.core.errors import KafkaCode


def test_a_fetch_of_a_gap_at_the_end_answers_corrupt_message(tmp_path):
    data = tmp_path / "data"
    torn(data)
    with Served(data) as served:

        def fetch(offset: int):
            answer = call(served.address, FETCH, 11, fetch_request("t", {0: offset}))
            return answer.responses[0].partitions[0]

        first = fetch(0)
        assert first.error_code == KafkaCode.NONE and first.records
        assert first.high_watermark == END  # the floor: never lower
        for offset in (LOST, END - 1):
            lost = fetch(offset)
            assert lost.error_code == KafkaCode.CORRUPT_MESSAGE, offset
            assert not lost.records
        at_end = fetch(END)
        assert at_end.error_code == KafkaCode.NONE and not at_end.records
        past = fetch(END + 1)
        assert past.error_code == KafkaCode.OFFSET_OUT_OF_RANGE
