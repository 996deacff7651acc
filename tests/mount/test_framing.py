"""Line and binary framing of append files."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logfs.core.errors import FramingError, LogfsError, TooLargeError
from logfs.mount.files.framing import PACKED_BYTES, LengthFramer, LineFramer, Lines, frame


def feed_all(framer, chunks):
    values = []
    for chunk in chunks:
        framed, framer.pending = framer.feed(chunk)
        values += framed.values
    return values + framer.finish().values


@given(st.lists(st.binary(max_size=30).filter(lambda b: b"\n" not in b), max_size=20), st.data())
def test_lines_survive_any_split(lines, data):
    text = b"".join(line + b"\n" for line in lines)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=5)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert feed_all(LineFramer(max_bytes=1000), chunks) == lines


@given(st.lists(st.binary(max_size=40), max_size=20), st.data())
def test_frames_survive_any_split(values, data):
    stream = b"".join(frame(v) for v in values)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=5)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert feed_all(LengthFramer(max_bytes=1000), chunks) == values


def test_feed_does_not_commit():
    framer = LineFramer(max_bytes=100)
    framed, tail = framer.feed(b"a\nb")
    assert framed.values == [b"a"] and tail == b"b" and framer.pending == b""


def test_many_unkeyed_lines_come_whole():
    """A large write's whole lines are handed on as they came, with the framer's
    limit: the log finds them as it encodes them (`Log.append_lines`, which
    refuses a line over the limit: tests/core/log/test_bulk_appends.py)."""
    lines = [b"%d" % i * (i % 7) for i in range(PACKED_BYTES // 8)]
    text = b"".join(line + b"\n" for line in lines)
    whole, tail = LineFramer(max_bytes=100).feed(text + b"half")
    assert isinstance(whole, Lines) and tail == b"half"
    assert bytes(whole.data) == text and whole.head == b"" and whole.max_bytes == 100
    with pytest.raises(TooLargeError):  # an unterminated tail over the limit: the framer's
        LineFramer(max_bytes=10).feed(text + b"z" * 11)


def test_keys():
    framer = LineFramer(max_bytes=100, parse_key=True, separator=b"::")
    framed, _ = framer.feed(b"k::v::w\n::x\n")
    assert framed.keys == [b"k", b""] and framed.values == [b"v::w", b"x"]
    with pytest.raises(FramingError):
        framer.feed(b"no separator\n")


def test_limits():
    with pytest.raises(TooLargeError):
        LineFramer(max_bytes=3).feed(b"abcd\n")
    with pytest.raises(TooLargeError):
        LineFramer(max_bytes=3).feed(b"abcd")
    with pytest.raises(TooLargeError):
        LengthFramer(max_bytes=3).feed(frame(b"abcd")[:4])
    framer = LengthFramer(max_bytes=3)
    framer.pending = frame(b"ab")[:5]
    with pytest.raises(FramingError):
        framer.finish()


def test_a_long_line_in_pieces_is_dropped_whole():
    framer = LineFramer(max_bytes=10)
    for piece in (b"aaaa", b"bbbb"):
        _, framer.pending = framer.feed(piece)
    with pytest.raises(TooLargeError):
        framer.feed(b"cccc")  # 12 bytes of one line: the held pieces go too
    assert framer.pending == b"" and framer.finish().values == []
    with pytest.raises(TooLargeError):
        framer.feed(b"more of the same line")
    framed, tail = framer.feed(b"end of it\nnext\nhalf")
    assert framed.values == [b"next"] and tail == b"half"


def test_framing_errors_are_logfs_errors():
    assert issubclass(FramingError, LogfsError) and issubclass(TooLargeError, FramingError)


def test_a_pending_tail_is_handed_on_apart_from_a_large_write():
    """The partial line held from the last write starts the first line: it
    comes as ``head`` beside the write, not joined to it (a copy saved)."""
    lines = [b"%05d" % i for i in range(PACKED_BYTES // 4)]
    text = b"".join(line + b"\n" for line in lines)
    framer = LineFramer(max_bytes=100)
    framer.pending = b"held "
    whole, tail = framer.feed(text + b"more")
    assert isinstance(whole, Lines) and whole.head == b"held " and tail == b"more"
    assert bytes(whole.data) == text  # the write's own bytes, nothing joined
