"""The one table of errors (core/errors.py): every error names the errno and
Kafka's error code it answers, once, and the mount, the listener and the
clients that read answers back all agree with it."""

from __future__ import annotations

import errno
import importlib
import pkgutil

import kafka.errors  # kafka-python: an independent list of Kafka's error codes
import pytest
from kio.schema.errors import ErrorCode  # kio: Kafka's codes generated from its own sources

import logfs
from logfs.core import errors
from logfs.core.client import delivery, names, wire
from logfs.core.errors import (
    InvalidConfigError,
    InvalidTopicError,
    KafkaCode,
    LogfsError,
    UnknownTopicError,
    by_errno,
    by_kafka_code,
)
from logfs.kafka.codes import error_code
from logfs.mount.errnos import errno_for


def every_error() -> list[type[LogfsError]]:
    """LogfsError and every subclass of it in logfs, each module imported first."""
    for info in pkgutil.walk_packages(logfs.__path__, "logfs."):
        if not info.name.endswith("__main__"):  # those run a program
            importlib.import_module(info.name)
    found, todo = [], [LogfsError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def an_error(cls: type[LogfsError]) -> LogfsError:
    """An instance of ``cls`` whatever its constructor asks for."""
    return cls.__new__(cls)


def test_every_error_names_an_errno_and_a_kafka_code():
    found = every_error()
    assert len(found) > 25, found
    for cls in found:
        assert isinstance(cls.errno, int), cls
        assert 0 < cls.errno < 512 and cls.errno != errno.EINTR, cls  # never hangs a caller
        assert cls.kafka_code in set(KafkaCode), cls
        assert cls.kafka_code != KafkaCode.NONE, cls  # an error is never "no error"


def test_the_table_s_own_classes_say_both_themselves():
    """A class of core/errors.py never answers what a base happens to answer."""
    table = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, LogfsError)]
    assert len(table) > 20
    for cls in table:
        assert "errno" in vars(cls) and "kafka_code" in vars(cls), cls.__name__


def test_the_mount_and_the_listener_answer_what_the_table_says():
    for cls in every_error():
        e = an_error(cls)
        assert errno_for(e) == cls.errno, cls
        code = error_code(e)
        assert isinstance(code, ErrorCode) and code == cls.kafka_code, cls
    assert error_code(OSError(errno.EIO, "x")) == ErrorCode.kafka_storage_error
    assert error_code(KeyError("x")) == ErrorCode.unknown_server_error


# Kafka 4's codes that kafka-python (3.0) does not know yet; kio, generated from Kafka's
# own sources, names them.
NEWER_THAN_KAFKA_PYTHON = {KafkaCode.INVALID_REGULAR_EXPRESSION}


def test_kafka_codes_are_kafkas_own():
    """Each named code is Kafka's, by name in kio and by number in kafka-python."""
    for code in KafkaCode:
        assert ErrorCode[code.name.lower()] == code
        known = kafka.errors.for_code(code)
        if code in NEWER_THAN_KAFKA_PYTHON:
            assert known.__name__ == "UnrecognizedBrokerError"  # once it knows it, check it
            continue
        assert known.errno == code
        assert code == KafkaCode.UNKNOWN_SERVER_ERROR or known is not kafka.errors.UnknownError


def test_a_writer_reads_an_errno_back_as_the_error_that_answers_it():
    assert names.ERRORS  # append.batches' errors
    for code, cls in names.ERRORS.items():
        assert cls.errno == code
        assert errno_for(cls("x")) == code
        assert type(delivery.mount_error(OSError(code, "x"), "writing")) is cls


def test_a_network_client_reads_a_kafka_code_back_as_the_error_that_answers_it():
    assert wire.ERRORS
    for code, cls in wire.ERRORS.items():
        assert cls.kafka_code == code
        assert error_code(cls("x")) == code
        read = wire._error(ErrorCode(code), "orders-0", "why")
        assert type(read) is cls and str(read) == f"orders-0: {ErrorCode(code).name.upper()}: why"


def test_a_reading_back_that_is_ambiguous_is_refused():
    with pytest.raises(ValueError, match="both answer 22"):
        by_errno(InvalidTopicError, InvalidConfigError)  # EINVAL, twice
    assert by_kafka_code(InvalidTopicError, InvalidConfigError, UnknownTopicError) == {
        17: InvalidTopicError,
        40: InvalidConfigError,
        3: UnknownTopicError,
    }
