import crcmod.predefined
from hypothesis import given
from hypothesis import strategies as st

from logfs.core import record

CRCMOD = crcmod.predefined.mkCrcFun("crc-32c")


def test_known_vector():
    assert CRCMOD(b"123456789") == 0xE3069283
    assert record.crc32c(b"123456789") == 0xE3069283


@given(st.binary(max_size=5000))
def test_fast_crc_matches_portable_crcmod(data):
    assert record.crc32c(data) == CRCMOD(data)
