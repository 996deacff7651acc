"""The Kafka listener against its physical limits, side by side in one run
(one mount daemon with ``-o kafka=127.0.0.1:0``, a warm-up round, then
rounds in which the sides of each comparison run back to back, in rotating
order; medians of each case, and the median of the rounds' ratios, which a
machine whose load changes from second to second moves least):

- **fetch**: a client issuing Fetch requests (1 MiB per partition) over one
  connection, receiving each answer into one reused buffer and finding its
  records by their fields' places (checked against kio's reading of the first
  answer) before discarding them, reading a whole partition of
  16 KiB batches, vs the same client against a null server (one that only
  reads each request and sends its answer, `null_fetch_server`: the floor of
  a Fetch's request and answer), vs ``sendfile`` of the same segment file to a
  loopback socket drained by a reader (the physical limit of the bytes' path);
- **produce**: 16 KiB batches, 64 per Produce request (1 MiB, Kafka's
  ``max.request.size``), acks=1, over one connection with up to 5 requests
  in flight (``IN_FLIGHT``; Kafka's ``max.in.flight.requests.per.connection``
  default), every answer read and checked, vs the same batches written to
  ``append.batches`` of the mount in 1 MiB ``write()`` calls on one
  descriptor (each returns once its batches are appended). Both end in
  ``Log.append_batches`` of the same daemon; the request is encoded once,
  so the client's own work is a ``sendall`` per request;
- **kcat**: ``kcat -C -e`` of a partition of 1 M (``--records``) 100-byte
  records end to end, vs ``cat`` of the same partition's ``stream``.

    python benchmarks/bench_kafka.py [--mib 256] [--records 1000000] [--rounds 3]
        [--only fetch|produce|kcat]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mounts import logfs_mount

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka_helpers import decode_response, encode_request  # noqa: E402
from kio.index import load_request_schema  # noqa: E402

from logfs.core.client import mountinfo  # noqa: E402
from logfs.core.format.record import BatchHeader, read_header  # noqa: E402
from logfs.core.format.validate import split_batches  # noqa: E402
from logfs.core.log import Store  # noqa: E402

BATCH_BYTES = 16 * 1024
PER_REQUEST = int(os.environ.get("PER_REQUEST", 64))  # batches per Produce request / write()
IN_FLIGHT = int(os.environ.get("IN_FLIGHT", 5))  # Produce requests sent before their answers
FETCH_BYTES = int(os.environ.get("FETCH_BYTES", 1 << 20))  # partition_max_bytes of a Fetch


def one_batch(record_bytes: int = 100) -> bytes:
    """A 16 KiB RecordBatch of 100-byte values, as a producer builds it."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    i = 0
    while builder.size() < BATCH_BYTES - record_bytes - 20:
        builder.append(i, timestamp=int(time.time() * 1000), key=None,
                       value=b"%099d" % i, headers=[])  # fmt: skip
        i += 1
    return bytes(builder.build())


def fill(data: Path, topic: str, batch: bytes, total: int) -> None:
    with Store(data) as store:
        store.create_topic(topic, 1, {"segment.bytes": str(1 << 30)})
        log = store.log(topic, 0)
        for _ in range(total // (len(batch) * PER_REQUEST)):
            log.append_batches([batch] * PER_REQUEST)
        store.flush()


def fill_small(data: Path, topic: str, records: int) -> None:
    with Store(data) as store:
        store.create_topic(topic, 1)
        log = store.log(topic, 0)
        value = b"x" * 100
        for i in range(0, records, 100_000):
            log.append([value] * min(100_000, records - i))
        store.flush()


# ---------------------------------------------------------------- fetch


def receive_frame(sock: socket.socket, into: bytearray | None = None) -> memoryview:
    """One response frame, received straight into ``into``, or into a buffer of its
    own when there is none or it is too small."""
    head = bytearray(4)
    sock.recv_into(head, 4, socket.MSG_WAITALL)
    (size,) = struct.unpack(">i", head)
    if into is None or len(into) < size:
        into = bytearray(size)
    frame = memoryview(into)[:size]
    got = 0
    while got < size:
        got += sock.recv_into(frame[got:])
    return frame.toreadonly()


def fetch_request(topic: str, offset: int) -> bytes:
    t = load_request_schema(1, 11)
    module = __import__(t.__module__, fromlist=["x"])
    request = t(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=50 << 20,
        isolation_level=0, forgotten_topics_data=(),
        topics=(module.FetchTopic(topic=topic, partitions=(module.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=FETCH_BYTES),)),),
    )  # fmt: skip
    return encode_request(1, 11, request)


def offset_place(topic: str) -> int:
    """Where the fetch offset is in `fetch_request`'s frame."""
    mark = bytes(range(1, 9))
    return fetch_request(topic, int.from_bytes(mark, "big")).index(mark)


def fetched_records(frame: memoryview, topic: str) -> memoryview:
    """The records of a Fetch v11 answer for one partition, found by the fields'
    places (no copy); its error codes must be none."""
    name = topic.encode()
    at = 4 + 4  # correlation id, throttle time
    (error,) = struct.unpack_from(">h", frame, at)
    at += 2 + 4 + 4  # error code, session id, the topics' count
    (length,) = struct.unpack_from(">h", frame, at)
    assert error == 0 and frame[at + 2 : at + 2 + length] == name, (error, bytes(frame[:64]))
    at += 2 + length + 4 + 4  # the name, the partitions' count, the partition index
    (error,) = struct.unpack_from(">h", frame, at)
    at += 2 + 8 + 8 + 8  # error code, high watermark, last stable offset, log start
    (aborted,) = struct.unpack_from(">i", frame, at)
    at += 4 + 16 * max(aborted, 0) + 4  # aborted transactions, preferred read replica
    (size,) = struct.unpack_from(">i", frame, at)
    assert error == 0 and at + 4 + max(size, 0) == len(frame), (error, size, len(frame))
    return frame[at + 4 : at + 4 + max(size, 0)]


def fetch_all(address: tuple[str, int], topic: str, end: int) -> int:
    """Fetch the partition from offset 0 to ``end``; returns the record bytes.

    As a client built for speed does: each request is kio's for offset 0 with the
    offset written in, each answer is received into one reused buffer and its records
    found by their fields' places (checked against kio's own reading of the first
    answer), so the client's work per answer is small beside the listener's."""
    template, place = bytearray(fetch_request(topic, 0)), offset_place(topic)
    offset, received, buffer = 0, 0, bytearray(FETCH_BYTES + (64 << 10))
    with socket.create_connection(address) as sock:
        while offset < end:
            template[place : place + 8] = offset.to_bytes(8, "big")
            sock.sendall(template)
            frame = receive_frame(sock, buffer)
            records = fetched_records(frame, topic)
            if offset == 0:  # the places read against kio's reading
                _, response = decode_response(1, 11, bytes(frame))
                assert bytes(response.responses[0].partitions[0].records) == records
            received += len(records)
            # the next offset: after the last whole batch (base offset + last offset delta + 1)
            pos, last = 0, offset
            while pos + 61 <= len(records):
                (base, length) = struct.unpack_from(">qi", records, pos)
                if pos + 12 + length > len(records):  # a partial last batch
                    break
                (delta,) = struct.unpack_from(">i", records, pos + 23)
                last = base + delta + 1
                pos += 12 + length
            assert last > offset, (offset, len(records))
            offset = last
    return received


def whole_batches(data: bytes) -> list[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in ``data``, up to a partial last one."""
    places, position = [], 0
    for batch in split_batches(data)[0]:
        places.append((position, read_header(batch)))
        position += len(batch)
    return places


@contextlib.contextmanager
def null_fetch_server(segment: Path, topic: str):
    """The address and pid of a null Kafka server: a process of its own (`serve_null`)
    answering `fetch_all`'s requests for ``topic`` from ``segment``."""
    command = [sys.executable, __file__, "--null-server", str(segment), topic]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        try:
            yield ("127.0.0.1", int(proc.stdout.readline())), proc.pid
        finally:
            proc.terminate()


def serve_null(segment: Path, topic: str) -> None:
    """A Kafka "broker" that does nothing but what a Fetch's bytes need, for
    `fetch_all`'s requests: read the request into one buffer, take the offset from
    its place, write the answer's fields and ``sendfile`` the segment from the
    batch at that offset (Kafka's cut: ``FETCH_BYTES`` or the end). The batches'
    places are found before it listens; one thread serves with blocking calls (no
    event loop). The floor of Fetch's request and answer on this machine, whatever
    a listener is written in: beside it, what the listener itself adds. Prints its
    port, then serves until it is terminated."""
    places, size = whole_batches(segment.read_bytes()), segment.stat().st_size
    positions = {header.base_offset: position for position, header in places}
    end = places[-1][1].last_offset + 1 if places else 0  # the log end offset
    place, name = offset_place(topic) - 4, topic.encode()
    head = struct.Struct(f">iiihiih{len(name)}siihqqqiii")
    buffer = bytearray(1 << 16)
    with socket.create_server(("127.0.0.1", 0)) as server, open(segment, "rb") as f:
        print(server.getsockname()[1], flush=True)
        while True:
            conn, _ = server.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Kafka's broker
            with conn:
                while conn.recv_into(buffer, 4, socket.MSG_WAITALL) == 4:
                    (length,) = struct.unpack_from(">i", buffer)
                    conn.recv_into(buffer, length, socket.MSG_WAITALL)
                    (correlation,) = struct.unpack_from(">i", buffer, 4)
                    (offset,) = struct.unpack_from(">q", buffer, place)
                    at = positions.get(offset, size)
                    count = min(FETCH_BYTES, size - at)
                    conn.sendall(head.pack(
                        head.size - 4 + count, correlation, 0, 0, 0, 1, len(name), name,
                        1, 0, 0, end, end, 0, -1, -1, count))  # fmt: skip
                    while count:
                        sent = os.sendfile(conn.fileno(), f.fileno(), at, count)
                        at, count = at + sent, count - sent


def sendfile_limit(path: Path) -> int:
    """sendfile of the whole file to a loopback TCP socket, drained by a thread."""
    server = socket.create_server(("127.0.0.1", 0))
    got = [0]

    def drain() -> None:
        conn, _ = server.accept()
        buffer = bytearray(1 << 20)
        with conn:
            while n := conn.recv_into(buffer):
                got[0] += n

    reader = threading.Thread(target=drain)
    reader.start()
    with socket.create_connection(server.getsockname()) as sock, open(path, "rb") as f:
        size, position = os.fstat(f.fileno()).st_size, 0
        while position < size:
            position += os.sendfile(sock.fileno(), f.fileno(), position, size - position)
    reader.join()
    server.close()
    return got[0]


# ---------------------------------------------------------------- produce


def produce_over_protocol(
    address, topic: str, batch: bytes, total: int, in_flight: int = IN_FLIGHT
) -> None:
    """Produce requests of `PER_REQUEST` batches with acks=1 over one connection,
    up to ``in_flight`` sent before their answers arrive (as Kafka's producers
    do: ``max.in.flight.requests.per.connection``, 5 by default); every
    answer is read and checked."""
    t = load_request_schema(0, 9)
    module = __import__(t.__module__, fromlist=["x"])
    records = batch * PER_REQUEST
    request = encode_request(0, 9, t(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
        topic_data=(module.TopicProduceData(name=topic, partition_data=(
            module.PartitionProduceData(index=0, records=records),)),),
    ))  # fmt: skip
    requests = total // len(records)
    with socket.create_connection(address) as sock:
        sent = answered = 0
        while answered < requests:
            while sent < requests and sent - answered < in_flight:
                sock.sendall(request)
                sent += 1
            _, response = decode_response(0, 9, receive_frame(sock))
            assert response.responses[0].partition_responses[0].error_code == 0
            answered += 1


def produce_to_append_batches(mnt: Path, topic: str, batch: bytes, total: int) -> None:
    records = batch * PER_REQUEST
    fd = os.open(mnt / topic / "0" / "append.batches", os.O_WRONLY | os.O_APPEND)
    try:
        for _ in range(total // len(records)):
            os.write(fd, records)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- the run


def cpu_seconds(pid: int) -> float:
    """CPU time the main thread of process ``pid`` has used (nanoseconds in
    /proc/PID/schedstat): the daemon's event loop, where both the listener and
    the mount's handlers run; fsyncs run in worker threads, the same for both."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def timed(fn, pid: int) -> tuple[float, float]:
    """(seconds, the daemon's CPU seconds) ``fn()`` took."""
    cpu, started = cpu_seconds(pid), time.perf_counter()
    fn()
    return time.perf_counter() - started, cpu_seconds(pid) - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="bytes fetched and produced per round")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("fetch", "produce", "kcat"), help="one comparison")
    args = parser.parse_args()
    total = args.mib << 20
    batch = one_batch()
    with tempfile.TemporaryDirectory(prefix="bench-kafka-", dir=Path.home()) as tmp:
        root = Path(tmp)
        data, mnt = root / "data", root / "mnt"
        mnt.mkdir()
        fill(data, "fetched", batch, total)
        fill_small(data, "small", args.records)
        with Store(data) as store:
            for name in ("produced-kafka", "produced-mount"):
                store.create_topic(name, 1, {"segment.bytes": str(1 << 30)})
            end = store.log("fetched", 0).next_offset
        segment = next((data / "fetched-0").glob("*.log"))
        times: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}  # the daemon's event loop's CPU seconds
        with (
            logfs_mount(data, mnt, root / "daemon.log", "kafka=127.0.0.1:0") as daemon,
            null_fetch_server(segment, "fetched") as (null_address, _),
        ):
            deadline = time.monotonic() + 30
            while (record := mountinfo.read_record(data)) is None or not record.kafka:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            host, _, port = record.kafka.rpartition(":")
            address = (host, int(port))
            bootstrap = record.kafka
            cases = {
                "fetch": lambda: fetch_all(address, "fetched", end),
                "null server": lambda: fetch_all(null_address, "fetched", end),
                "sendfile limit": lambda: sendfile_limit(segment),
                "produce (protocol)": lambda: produce_over_protocol(
                    address, "produced-kafka", batch, total),
                "append.batches": lambda: produce_to_append_batches(
                    mnt, "produced-mount", batch, total),
                "kcat -C -e": lambda: subprocess.run(
                    ["kcat", "-b", bootstrap, "-C", "-t", "small", "-e", "-q", "-f", "%s\n"],
                    stdout=subprocess.DEVNULL, check=True),
                "cat stream": lambda: subprocess.run(
                    ["cat", str(mnt / "small" / "0" / "stream")],
                    stdout=subprocess.DEVNULL, check=True),
            }  # fmt: skip
            groups = {"fetch": ("fetch", "null server", "sendfile limit"),
                      "produce": ("produce (protocol)", "append.batches"),
                      "kcat": ("kcat -C -e", "cat stream")}  # fmt: skip
            if args.only:
                groups = {args.only: groups[args.only]}
            for name in ("fetch", "null server", "kcat -C -e", "cat stream"):  # warm-up
                if any(name in pair for pair in groups.values()):
                    cases[name]()
            if "produce" in groups:  # warm-up: the listener's and the mount's first appends
                produce_over_protocol(address, "produced-kafka", batch, total // 8)
                produce_to_append_batches(mnt, "produced-mount", batch, total // 8)
            # The sides of a comparison run back to back, in rotating order, so
            # each round's ratio sees the same machine (others' load changes by the second).
            for r in range(args.rounds):
                for pair in groups.values():
                    for name in pair[r % len(pair) :] + pair[: r % len(pair)]:
                        seconds, daemon_cpu = timed(cases[name], daemon.proc.pid)
                        times.setdefault(name, []).append(seconds)
                        cpu.setdefault(name, []).append(daemon_cpu)
        median = {name: statistics.median(t) for name, t in times.items()}
        size = segment.stat().st_size
        print(f"{'case':<22}{'median s':>10}{'MiB/s':>10}{'loop CPU ms/MiB':>18}")
        for name, seconds in median.items():
            volume = size if name in ("fetch", "null server", "sendfile limit") else total
            rate = daemon = ""
            if "cat" not in name:
                rate = f"{volume / seconds / 2**20:10.0f}"
                daemon = f"{statistics.median(cpu[name]) * 1e3 / (volume / 2**20):18.2f}"
            print(f"{name:<22}{seconds:10.3f}{rate}{daemon}")
        ratios = {}
        for name, (side, limit) in (("fetch / sendfile limit", ("fetch", "sendfile limit")),
                                    ("null server / sendfile limit",
                                     ("null server", "sendfile limit")),
                                    ("fetch / null server", ("fetch", "null server")),
                                    ("produce / append.batches",
                                     ("produce (protocol)", "append.batches"))):  # fmt: skip
            if side in times:
                per_round = [b / a for a, b in zip(times[side], times[limit], strict=True)]
                ratios[name] = per_round
                print(f"{name + ':':<27}{statistics.median(per_round):.2f} (median of rounds; "
                      f"rounds {min(per_round):.2f}-{max(per_round):.2f})")  # fmt: skip
        if "kcat -C -e" in median:
            kcat_rate = args.records / median["kcat -C -e"] / 1e6
            cat_rate = args.records / median["cat stream"] / 1e6
            print(f"kcat -C -e: {kcat_rate:.2f} M records/s; "
                  f"cat stream: {cat_rate:.2f} M records/s")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--null-server"]:
        serve_null(Path(sys.argv[2]), sys.argv[3])
    else:
        main()
