"""Hostile Kafka clients on raw sockets, run as another user (``python3 raw_clients.py
MODE JSON``, the standard library only, so any user's interpreter runs it); prints
what it saw as one JSON line.

Modes (the JSON argument's fields):

- ``hold``: open ``count`` connections to ``address``, send ``prefix`` (hex) on
  each (or ``prefixes``, one for each), then watch them for ``seconds`` more:
  ``opened``, and for each connection the second (from its own connect) at
  which the listener closed it, or null.
- ``flood``: ``count`` connections at once, each sending a frame of ``size``
  bytes (a size field, then zeros): ``sent`` bytes per connection, ``seconds``.
- ``attempts``: ``threads`` threads run ``attempts`` (each a list of hex frames)
  on a new connection each: send a frame, read its answer (none when the
  listener closed), then wait for the listener to close: ``ends`` (seconds
  from the start at which each attempt ended) and ``answers`` (hex).
"""

from __future__ import annotations

import contextlib
import json
import queue
import select
import socket
import struct
import sys
import threading
import time


def _connect(address) -> socket.socket:
    return socket.create_connection(tuple(address), timeout=10)


def hold(spec: dict) -> dict:
    prefixes = spec.get("prefixes") or [spec.get("prefix", "")] * spec["count"]
    socks, opened, closed = [], [], []
    open_: dict[int, socket.socket] = {}

    def watch(timeout: float) -> None:
        # Each socket's time counts from its own connect, and closes are looked
        # for between connects too: connecting hundreds can take seconds on a
        # busy machine (SYN retries once the backlog is full).
        ready, _, _ = select.select(list(open_.values()), [], [], timeout)
        for sock in ready:
            i = socks.index(sock)
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                closed[i] = round(time.monotonic() - opened[i], 3)
                del open_[i]

    for hexed in prefixes:
        prefix = bytes.fromhex(hexed)
        try:
            sock = _connect(spec["address"])
        except OSError:
            continue
        opened.append(time.monotonic())
        if prefix:
            with contextlib.suppress(OSError):
                sock.sendall(prefix)
        open_[len(socks)] = sock
        socks.append(sock)
        closed.append(None)
        watch(0)
    start = time.monotonic()
    while open_ and time.monotonic() - start < spec["seconds"]:
        watch(0.05)
    for sock in socks:
        sock.close()
    return {"opened": len(socks), "closed": closed}


def flood(spec: dict) -> dict:
    size = spec["size"]
    sent = [0] * spec["count"]
    chunk = bytes(1 << 20)

    def one(i: int) -> None:
        try:
            with _connect(spec["address"]) as sock:
                sock.settimeout(spec.get("timeout", 120))
                sock.sendall(struct.pack(">i", size))
                left = size
                while left:
                    n = sock.send(chunk[: min(left, len(chunk))])
                    left -= n
                    sent[i] += n
        except OSError:
            pass

    start = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(spec["count"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"sent": sent, "seconds": round(time.monotonic() - start, 3)}


def _frame(sock: socket.socket) -> bytes | None:
    def exactly(n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            try:
                chunk = sock.recv(n - len(out))
            except OSError:
                return None
            if not chunk:
                return None
            out += chunk
        return out

    head = exactly(4)
    return None if head is None else exactly(struct.unpack(">i", head)[0])


def attempts(spec: dict) -> dict:
    todo: queue.Queue = queue.Queue()
    for i, frames in enumerate(spec["attempts"]):
        todo.put((i, frames))
    ends: list[float | None] = [None] * len(spec["attempts"])
    answers: list[list[str]] = [[] for _ in spec["attempts"]]
    start = time.monotonic()

    def worker() -> None:
        while True:
            try:
                i, frames = todo.get_nowait()
            except queue.Empty:
                return
            try:
                with _connect(spec["address"]) as sock:
                    for frame in frames:
                        sock.sendall(bytes.fromhex(frame))
                        answer = _frame(sock)
                        if answer is None:
                            break
                        answers[i].append(answer.hex())
                    sock.settimeout(spec.get("close_within", 10))
                    try:
                        while sock.recv(65536):
                            pass
                    except OSError:
                        pass
            except OSError:
                pass
            ends[i] = round(time.monotonic() - start, 3)

    threads = [threading.Thread(target=worker) for _ in range(spec["threads"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"ends": ends, "answers": answers}


if __name__ == "__main__":
    mode, spec = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps({"hold": hold, "flood": flood, "attempts": attempts}[mode](spec)), flush=True)
