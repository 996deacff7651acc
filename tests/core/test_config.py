import pytest

from logfs.core.config import (
    TopicConfig,
    flush_due,
    flush_messages_reached,
    read_properties,
    segments_to_delete,
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
    default = TopicConfig().to_properties()
    changed = {k: v for k, v in config.to_properties().items() if default[k] != v}
    assert changed == {"flush.ms": "5", "segment.ms": "9"}


@pytest.mark.parametrize(
    "key, value",
    [
        ("no.such.key", "1"),
        ("segment.bytes", "abc"),
        ("segment.bytes", "13"),
        ("flush.messages", "0"),
        ("retention.ms", "-2"),
        ("compression.type", "brotli"),
        ("cleanup.policy", "compact,squash"),
        ("message.timestamp.type", "Now"),
        ("parse.key", "yes"),
        ("key.separator", ""),
        # Kafka's parser takes ASCII digits only; Python's int() and float() take more
        ("segment.bytes", "1_000_000"),
        ("segment.bytes", "\uff11\uff10\uff10\uff10\uff10"),  # full-width 10000
        ("flush.ms", "\u0661\u0662"),  # Arabic-Indic 12
        ("min.cleanable.dirty.ratio", "0_5"),
        ("min.cleanable.dirty.ratio", "nan"),
        # bytes that were not UTF-8 (decoded with surrogateescape) cannot be a value
        ("key.separator", "\udcff"),
    ],
)
def test_bad_keys_and_values_are_rejected(key, value):
    with pytest.raises(InvalidConfigError, match=key.split(".")[0]):
        TopicConfig.from_properties({key: value})


@pytest.mark.parametrize("text", ["key.separator=\\ud800\n", "key.separator=\\U00110000\n"])
def test_escapes_naming_no_character_are_refused(text):
    with pytest.raises(InvalidConfigError, match="names no Unicode character"):
        read_properties(text)


def test_plain_numbers_still_parse():
    config = TopicConfig.from_properties(
        {"segment.bytes": " +1048576 ", "min.cleanable.dirty.ratio": ".25", "flush.ms": "-0"}
    )
    assert (config.segment_bytes, config.min_cleanable_dirty_ratio, config.flush_ms) == (
        1 << 20,
        0.25,
        0,
    )


def test_properties_round_trip_keeps_tabs_and_spaces():
    props = {"key.separator": "\t", "segment.ms": "10"}
    assert read_properties(write_properties(props)) == props
    assert read_properties("# comment\n\nkey.separator= \n") == {"key.separator": " "}
    with pytest.raises(InvalidConfigError):
        read_properties("no equals sign")


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


FLUSH_MESSAGES = [
    # unflushed -> reached?  (flush.messages=10)
    (0, False),
    (9, False),
    (10, True),  # at least flush.messages, not more than
    (11, True),
]


@pytest.mark.parametrize("unflushed, expected", FLUSH_MESSAGES)
def test_flush_messages_reached(unflushed, expected):
    config = TopicConfig(flush_messages=10)
    assert flush_messages_reached(config, unflushed=unflushed) is expected


def test_flush_messages_default_is_never():
    assert not flush_messages_reached(TopicConfig(), unflushed=10**12)


NOW = 1_000_000
RETENTION = [
    # retention.ms, retention.bytes, segment sizes, their max timestamps -> how many to delete
    # (oldest first, the active segment last; now = 1_000_000)
    (-1, -1, [100, 100, 100], [0, 0, 0], 0),  # no limits
    (1000, -1, [100, 100, 100], [NOW - 1001, NOW - 1001, NOW - 1001], 2),  # never the active
    (1000, -1, [100, 100, 100], [NOW - 1000, NOW - 1000, NOW], 0),  # exactly retention.ms: kept
    (1000, -1, [100, 100, 100], [NOW - 5000, NOW, NOW - 5000], 1),  # stop at a young one
    (1000, -1, [100, 100], [-1, -1], 0),  # no timestamps: never expires
    (0, -1, [100, 100], [NOW - 1, NOW], 1),
    (-1, 250, [100, 100, 100], [0, 0, 0], 0),  # 300 - 100 < 250
    (-1, 200, [100, 100, 100], [0, 0, 0], 1),  # 300 - 100 >= 200
    (-1, 0, [100, 100, 100], [0, 0, 0], 2),  # the active one stays even over the limit
    (-1, 150, [300, 10, 10, 10], [0, 0, 0, 0], 0),  # deleting it would leave 30 < 150
    (-1, 150, [10, 300, 10], [0, 0, 0], 1),  # the big one would leave less than 150
    (1000, 250, [100, 100, 100], [NOW - 5000, NOW - 5000, NOW], 2),  # time, then time
    (NOW, 100, [100, 100, 100], [NOW, NOW, NOW], 2),  # bytes alone
    (1000, -1, [100], [0], 0),  # only the active segment
    (1000, 0, [], [], 0),
]


@pytest.mark.parametrize("ms, limit, sizes, stamps, expected", RETENTION)
def test_segments_to_delete(ms, limit, sizes, stamps, expected):
    config = TopicConfig(retention_ms=ms, retention_bytes=limit)
    assert segments_to_delete(config, sizes=sizes, max_timestamps=stamps, now_ms=NOW) == expected
