import pytest

from logfs.core.config import (
    TopicConfig,
    flush_due,
    read_properties,
    should_roll,
    write_properties,
)
from logfs.core.errors import InvalidConfigError


def test_kafka_defaults():
    config = TopicConfig()
    assert config.segment_bytes == 1 << 30
    assert config.index_interval_bytes == 4096
    assert config.max_message_bytes == 1048588
    assert config.retention_ms == 604800000
    assert config.flush_ms == 1000


def test_layers_override_in_order():
    config = TopicConfig.from_properties({"flush.ms": "5"}, {"flush.ms": "7", "segment.ms": "9"})
    assert (config.flush_ms, config.segment_ms) == (5, 9)
    assert config.overrides() == {"flush.ms": "5", "segment.ms": "9"}


@pytest.mark.parametrize(
    "key, value",
    [
        ("no.such.key", "1"),
        ("segment.bytes", "abc"),
        ("segment.bytes", "13"),
        ("flush.messages", "0"),
        ("retention.ms", "-2"),
        ("compression.type", "brotli"),
        ("cleanup.policy", "compact"),
        ("message.timestamp.type", "Now"),
        ("parse.key", "yes"),
        ("key.separator", ""),
    ],
)
def test_bad_keys_and_values_are_rejected(key, value):
    with pytest.raises(InvalidConfigError, match=key.split(".")[0]):
        TopicConfig.from_properties({key: value})


def test_properties_round_trip_keeps_tabs_and_spaces():
    props = {"key.separator": "\t", "segment.ms": "10"}
    assert read_properties(write_properties(props)) == props
    assert read_properties("# comment\n\nkey.separator= \n") == {"key.separator": " "}
    with pytest.raises(InvalidConfigError):
        read_properties("no equals sign")


ROLL = [
    # segment size, batch size, age, index full, overflow -> roll?
    # (segment.bytes=1000, segment.ms=100)
    (0, 5000, 0, False, False, False),  # an empty segment takes any batch
    (500, 500, 0, False, False, False),
    (501, 500, 0, False, False, True),
    (10, 10, 101, False, False, True),
    (10, 10, 100, False, False, False),
    (0, 10, 10_000, False, False, False),  # an empty segment never rolls on age
    (10, 10, 0, True, False, True),
    (10, 10, 0, False, True, True),
]


@pytest.mark.parametrize("size, batch, age, full, overflow, expected", ROLL)
def test_should_roll(size, batch, age, full, overflow, expected):
    config = TopicConfig(segment_bytes=1000, segment_ms=100)
    assert (
        should_roll(
            config,
            segment_size=size,
            batch_size=batch,
            segment_age_ms=age,
            index_full=full,
            relative_offset_overflow=overflow,
        )
        is expected
    )


FLUSH = [
    # unflushed, last flush, now -> due?  (flush.messages=10, flush.ms=1000)
    (0, 0, 10_000, False),
    (9, 0, 999, False),
    (10, 0, 0, True),
    (1, 0, 1000, True),
    (1, 500, 1499, False),
]


@pytest.mark.parametrize("unflushed, last, now, expected", FLUSH)
def test_flush_due(unflushed, last, now, expected):
    config = TopicConfig(flush_messages=10, flush_ms=1000)
    assert flush_due(config, unflushed=unflushed, last_flush_ms=last, now_ms=now) is expected
