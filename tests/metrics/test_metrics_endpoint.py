"""The metrics endpoint (logfs/metrics/endpoint.py) as a client sees it: GET /metrics,
and the bounds a hostile client meets (a huge or slow request head, other methods
and paths, too many connections), each refusal counted."""

from __future__ import annotations

import pytest
import trio

from logfs.core.errors import LogfsError
from logfs.metrics import Metrics, parse_address
from logfs.metrics.endpoint import MAX_HEAD, Endpoint


def test_addresses_are_loopback_unless_a_host_is_given():
    assert parse_address("9404") == ("127.0.0.1", 9404)
    assert parse_address("0.0.0.0:9404") == ("0.0.0.0", 9404)
    assert parse_address("[::1]:9404") == ("::1", 9404)
    for bad in ("", "x", "host:", "1:99999", "-1"):
        with pytest.raises(LogfsError, match="expected \\[HOST:\\]PORT"):
            parse_address(bad)


async def ask(address, data: bytes, *, close: bool = False) -> bytes:
    stream = await trio.open_tcp_stream(*address)
    async with stream:
        await stream.send_all(data)
        if close:
            await stream.send_eof()
        answer = bytearray()
        while chunk := await stream.receive_some(65536):
            answer += chunk
        return bytes(answer)


async def serving(nursery, **kwargs) -> tuple[Endpoint, Metrics]:
    metrics = Metrics()

    async def render() -> bytes:
        return b"up 1\n"

    endpoint = Endpoint("127.0.0.1", 0, render, metrics.refused, **kwargs)
    await nursery.start(endpoint.run)
    return endpoint, metrics


def test_get_metrics_and_nothing_else():
    trio.run(_get_metrics_and_nothing_else)


async def _get_metrics_and_nothing_else():
    async with trio.open_nursery() as nursery:
        endpoint, metrics = await serving(nursery)
        answer = await ask(endpoint.address, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200 OK")
        assert b"Content-Type: text/plain; version=0.0.4" in head
        assert b"Content-Length: 5" in head and body == b"up 1\n"
        answer = await ask(endpoint.address, b"HEAD /metrics HTTP/1.0\r\n\r\n")
        assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"\r\n\r\n")
        assert (await ask(endpoint.address, b"GET / HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.0 404")
        answer = await ask(endpoint.address, b"POST /metrics HTTP/1.0\r\n\r\n")
        assert answer.startswith(b"HTTP/1.0 405") and b"Allow: GET, HEAD" in answer
        assert metrics.rejected.get(("metrics", "method")) == 1
        nursery.cancel_scope.cancel()


def test_a_huge_head_is_refused_and_a_silent_client_is_dropped():
    trio.run(_a_huge_head_is_refused_and_a_silent_client_is_dropped)


async def _a_huge_head_is_refused_and_a_silent_client_is_dropped():
    async with trio.open_nursery() as nursery:
        endpoint, metrics = await serving(nursery, timeout=0.5)
        # Past the bound by a little: all of it read before the answer (no reset).
        answer = await ask(endpoint.address, b"GET /metrics HTTP/1.0\r\nX: " + b"a" * MAX_HEAD)
        assert answer.startswith(b"HTTP/1.0 431")
        assert metrics.rejected.get(("metrics", "too_large")) == 1
        with trio.fail_after(10):  # a client that sends nothing is closed at the timeout
            assert await ask(endpoint.address, b"GET /met") == b""
        assert metrics.rejected.get(("metrics", "timeout")) == 1
        # A client that closes before its head ends gets nothing, and the endpoint goes on.
        assert await ask(endpoint.address, b"GET /metrics", close=True) == b""
        answer = await ask(endpoint.address, b"GET /metrics HTTP/1.0\r\n\r\n")
        assert answer.endswith(b"up 1\n")
        nursery.cancel_scope.cancel()


def test_connections_past_the_bound_are_closed_at_once():
    trio.run(_connections_past_the_bound_are_closed_at_once)


async def _connections_past_the_bound_are_closed_at_once():
    async with trio.open_nursery() as nursery:
        endpoint, metrics = await serving(nursery, timeout=30, max_connections=2)
        idle = [await trio.open_tcp_stream(*endpoint.address) for _ in range(2)]
        with trio.fail_after(10):
            while endpoint.connections < 2:
                await trio.sleep(0.01)
            assert await ask(endpoint.address, b"GET /metrics HTTP/1.0\r\n\r\n") == b""
        assert metrics.rejected.get(("metrics", "connections")) == 1
        for stream in idle:
            await stream.aclose()
        with trio.fail_after(10):
            while endpoint.connections:
                await trio.sleep(0.01)
            answer = await ask(endpoint.address, b"GET /metrics HTTP/1.0\r\n\r\n")
        assert answer.endswith(b"up 1\n")
        nursery.cancel_scope.cancel()
