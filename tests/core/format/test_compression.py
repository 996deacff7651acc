"""Conformance of `logfs.core.format.compression` with kafka-python's codecs (`kafka.codec`).

What logfs compresses, kafka-python decompresses, and the other way round,
for every codec Kafka knows; plus the framing details Kafka's Java client
insists on (xerial snappy blocks, independent lz4 blocks).
"""

from __future__ import annotations

import contextlib
import gzip
import random
import struct

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBase

from logfs.core.errors import CorruptRecordError, UnsupportedCodecError
from logfs.core.format import compression
from logfs.core.format.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress

KAFKA_ENCODE = {
    GZIP: kafka_codec.gzip_encode,
    SNAPPY: kafka_codec.snappy_encode,  # xerial framing, 32 KiB blocks: the Java client's
    LZ4: kafka_codec.lz4_encode,
    ZSTD: kafka_codec.zstd_encode,
}
KAFKA_DECODE = {
    GZIP: kafka_codec.gzip_decode,
    SNAPPY: kafka_codec.snappy_decode,
    LZ4: kafka_codec.lz4_decode,
    ZSTD: kafka_codec.zstd_decode,
}
CODECS = list(KAFKA_ENCODE)
IDS = [compression.NAMES[c] for c in CODECS]


def samples(seed: int) -> list[bytes]:
    """Payloads that exercise block boundaries: 32 KiB (xerial) and 64 KiB (lz4)."""
    rng = random.Random(seed)
    text = b"".join(b'{"offset": %d, "value": "line"}\n' % i for i in range(8000))
    return [
        b"x",
        b"\n",
        b"\x00" * 1000,
        text[: 32 * 1024],
        text[: 32 * 1024 + 1],
        text[: 64 * 1024],
        text[: 64 * 1024 + 1],
        text,  # ~260 KiB
        rng.randbytes(5),
        rng.randbytes(64 * 1024),  # incompressible: lz4 stores the block
        rng.randbytes(150_000),
    ]


payloads = st.one_of(
    st.binary(min_size=1, max_size=3000),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=50), st.integers(1, 3000)),
)


def test_codec_ids_are_kafkas():
    assert (NONE, GZIP, SNAPPY, LZ4, ZSTD) == (
        DefaultRecordBase.CODEC_NONE,
        DefaultRecordBase.CODEC_GZIP,
        DefaultRecordBase.CODEC_SNAPPY,
        DefaultRecordBase.CODEC_LZ4,
        DefaultRecordBase.CODEC_ZSTD,
    )
    assert compression.NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    # compression.type values: "uncompressed" and "producer" both mean no recompression.
    assert compression.BY_NAME["uncompressed"] == compression.BY_NAME["producer"] == NONE
    assert all(compression.BY_NAME[name] == codec for codec, name in compression.NAMES.items())


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_logfs_output_decodes_in_kafka(codec):
    for data in samples(codec):
        assert KAFKA_DECODE[codec](compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_kafka_output_decodes_in_logfs(codec):
    for data in samples(codec):
        assert decompress(codec, KAFKA_ENCODE[codec](data)) == data


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@settings(max_examples=50, deadline=None)
@given(data=payloads)
def test_round_trips_both_ways(codec, data):
    assert KAFKA_DECODE[codec](compress(codec, data)) == data
    assert decompress(codec, KAFKA_ENCODE[codec](data)) == data
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", [NONE, *CODECS], ids=["none", *IDS])
def test_empty_payload_round_trips(codec):
    assert decompress(codec, compress(codec, b"")) == b""


def test_none_is_the_identity():
    assert compress(NONE, b"abc") == b"abc" == decompress(NONE, b"abc")


def test_gzip_is_one_deterministic_member():
    data = samples(0)[7]
    out = compress(GZIP, data)
    assert out[:2] == b"\x1f\x8b" and out == compress(GZIP, data)  # mtime 0: reproducible
    assert gzip.decompress(out) == data
    for level in (1, 9):
        assert decompress(GZIP, kafka_codec.gzip_encode(data, compresslevel=level)) == data


def test_snappy_uses_xerial_framing_with_32k_blocks():
    data = samples(0)[7]
    out = compress(SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        blocks.append(snappy.decompress(out[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    assert pos == len(out)
    assert b"".join(blocks) == data
    assert all(len(b) == 32 * 1024 for b in blocks[:-1]) and 0 < len(blocks[-1]) <= 32 * 1024


@pytest.mark.parametrize("blocksize", [1024, 32 * 1024, 100_000])
def test_snappy_reads_any_xerial_block_size_and_raw_snappy(blocksize):
    data = samples(1)[7]
    assert decompress(SNAPPY, kafka_codec.snappy_encode(data, xerial_blocksize=blocksize)) == data
    # A bare snappy stream (what librdkafka writes), which Kafka also reads.
    assert decompress(SNAPPY, kafka_codec.snappy_encode(data, xerial_compatible=False)) == data


def test_lz4_frame_is_what_kafka_accepts():
    data = samples(2)[7]
    out = compress(LZ4, data)
    info = lz4.frame.get_frame_info(out)
    assert info["block_linked"] is False  # Kafka's reader rejects linked blocks
    assert info["block_size"] == 64 * 1024
    assert info["content_checksum"] is False
    assert lz4.frame.decompress(out) == data  # checks the header checksum byte


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"content_checksum": True},
        {"block_checksum": True},
        {"store_size": False},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
        {"compression_level": lz4.frame.COMPRESSIONLEVEL_MINHC},
    ],
)
def test_lz4_reads_other_frame_options(options):
    data = samples(3)[7]
    assert decompress(LZ4, lz4.frame.compress(data, block_linked=False, **options)) == data


def test_zstd_reads_frames_with_and_without_content_size():
    data = samples(4)[7]
    assert decompress(ZSTD, zstandard.ZstdCompressor(level=19).compress(data)) == data
    stream = zstandard.ZstdCompressor(level=1).compressobj()  # as zstd-jni's output stream
    assert decompress(ZSTD, stream.compress(data) + stream.flush()) == data
    assert zstandard.ZstdDecompressor().decompress(compress(ZSTD, data)) == data


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codecs_are_unsupported(codec):
    with pytest.raises(UnsupportedCodecError):
        compress(codec, b"data")
    with pytest.raises(UnsupportedCodecError):
        decompress(codec, b"data")


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@pytest.mark.parametrize("garbage", [b"\x01", b"not compressed at all", b"\xff" * 64])
def test_garbage_is_corrupt(codec, garbage):
    with pytest.raises(CorruptRecordError, match=compression.NAMES[codec]):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@settings(max_examples=100, deadline=None)
@given(garbage=st.binary(max_size=100))
def test_any_garbage_raises_only_corrupt_record_error(codec, garbage):
    with contextlib.suppress(CorruptRecordError):  # anything else fails the test
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD], ids=["gzip", "lz4", "zstd"])
def test_truncated_streams_are_corrupt(codec):
    out = compress(codec, samples(5)[7])
    for length in range(1, len(out), max(1, len(out) // 200)):
        with pytest.raises(CorruptRecordError):
            decompress(codec, out[:length])


def test_truncated_xerial_block_is_corrupt():
    out = compress(SNAPPY, samples(6)[7])
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, out[:-1])
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, out[:18])  # half a block length
