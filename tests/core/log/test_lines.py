"""A partition's records as lines (core/log/lines.py): stream sizes, marks and reads."""

from __future__ import annotations

from logfs import Store
from logfs.core.config import TopicConfig
from logfs.core.log import lines
from logfs.core.log.partition import Log
from logfs.core.storage import stream
from logfs.mount.files.generated import ReadAhead


def whole_stream(log) -> bytes:
    return b"".join((r.value or b"") + b"\n" for r in log.scan())


def test_stream_size_and_lines_after_reopen(tmp_path):
    config = {"segment.bytes": 16 * 1024}
    with Store(tmp_path) as store:
        store.create_topic("t", 1, config=config)
        log = store.log("t", 0)
        for i in range(30):
            log.append([b"v%d-%d" % (i, j) + b"y" * (j % 13) for j in range(200)])
        log.append([None, b"", b"with\nnewline"])
        assert len(log.segments) > 3
        expected = whole_stream(log)
        assert lines.size(log) == len(expected)
    with Store(tmp_path) as store:
        log = store.log("t", 0)
        assert lines.size(log) is None  # loaded segments are counted on first need
        for segment in lines.uncounted(log):
            loaded = segment.stream.loaded_size
            segment.stream.loaded = stream.count_loaded(segment.log_path, loaded)
        assert lines.size(log) == len(expected)
        log.append([b"after reopen"] * 40)
        expected += b"after reopen\n" * 40
        assert lines.size(log) == len(expected)
        for position in (0, 1, 5000, len(expected) // 2, len(expected) - 3):
            offset, start = lines.locate(log, position)
            assert start <= position and expected[start:].startswith(
                whole_stream_from(log, offset)[:100]
            )
        got, offset = b"", log.log_start_offset
        while offset < log.next_offset:
            data, offset = lines.lines_from(log.segment_for(offset), offset)
            got += data
        assert got == expected


def whole_stream_from(log, offset) -> bytes:
    return b"".join((r.value or b"") + b"\n" for r in log.scan(offset))


def test_stream_starts_at_a_log_start_inside_the_first_segment(tmp_path):
    values = [b"value %d" % i + b"z" * (i % 7) for i in range(500)]
    log = Log(tmp_path / "t-0", "t", 0, TopicConfig())
    log.append(values)
    log.close()
    log = Log(tmp_path / "t-0", "t", 0, TopicConfig(), recovery_point=500, log_start_offset=123)
    for segment in lines.uncounted(log):
        segment.stream.loaded = stream.count_loaded(segment.log_path, segment.stream.loaded_size)
    expected = b"".join(v + b"\n" for v in values[123:])
    assert lines.size(log) == len(expected)
    assert lines.locate(log, 0) == (123, 0)
    reader = ReadAhead()
    got = b"".join(bytes(reader.read(log, pos, 1000)) for pos in range(0, len(expected), 1000))
    assert got == expected
    assert bytes(ReadAhead().read(log, 10, 20)) == expected[10:30]
    log.close()
