import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record._crc32c import crc as kafka_crc32c

from logfs.core.format import record

# Fixed CRC-32C values, so neither implementation is only checked against the
# other: RFC 3720 (iSCSI) appendix B.4, and the usual check value of "123456789".
KNOWN = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),
]


def test_the_fast_crc_is_in_use():
    """The install gives the crc32c package, using the CPU's instructions."""
    import crc32c

    assert record.crc32c is crc32c.crc32c
    assert crc32c.hardware_based


@pytest.mark.parametrize("data, crc", KNOWN)
def test_known_vectors(data, crc):
    assert record.crc32c(data) == crc
    assert kafka_crc32c(data) == crc


@given(st.binary(max_size=5000))
def test_fast_crc_matches_kafka_pythons(data):
    assert record.crc32c(data) == kafka_crc32c(data)
