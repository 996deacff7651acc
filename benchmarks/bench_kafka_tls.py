"""Fetch through the Kafka listener in plaintext (record bytes by ``sendfile``)
and through TLS (``pread`` in chunks, encrypted in the daemon): one
``logfs serve`` each, over the same data directory, rounds interleaved,
medians. A client issues Fetch requests (``--fetch-mib`` per request) over one
connection and discards the record bytes; the daemon's CPU time per GiB comes
from ``/proc/PID/stat``.

    python benchmarks/bench_kafka_tls.py [--mib 256] [--fetch-mib 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))
from kafka_helpers import decode_response, encode_request  # noqa: E402
from kio.index import load_request_schema  # noqa: E402

from logfs.core.log import Store  # noqa: E402

FETCH = 1
SERVING = re.compile(rb"^serving .* on (\S+):(\d+)$", re.M)


def certificates(d: Path) -> tuple[Path, Path, Path]:
    """(CA, server certificate, key) for 127.0.0.1, made with openssl."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "1", "-subj", "/CN=bench CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=localhost")  # fmt: skip
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "1",
            "-extfile", "san.cnf")  # fmt: skip
    return d / "ca.pem", d / "server.pem", d / "server.key"


def fill(data: Path, mib: int) -> int:
    """A partition of ``mib`` MiB of 100-byte values; its record count."""
    with Store(data) as store:
        store.create_topic("bench")
        log = store.log("bench", 0)
        values = [b"%099d" % i for i in range(10_000)]
        while sum(p.stat().st_size for p in (data / "bench-0").glob("*.log")) < mib << 20:
            log.append(values)
        store.flush()
        return log.next_offset


def serve(data: Path, *options: str) -> tuple[subprocess.Popen, tuple[str, int]]:
    cmd = [sys.executable, "-m", "logfs.cli", "serve", str(data), "--listen", "127.0.0.1:0"]
    if options:
        cmd += ["-o", ",".join(options)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = proc.stdout.readline()
    found = SERVING.search(line)
    assert found, line
    return proc, (found.group(1).decode(), int(found.group(2)))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def receive_frame(sock) -> memoryview:
    """One response frame, received into its buffer (a TLS socket returns at
    most a record, 16 KiB, per call)."""
    head = bytearray(4)
    _receive_into(sock, memoryview(head))
    frame = bytearray(int.from_bytes(head, "big"))
    _receive_into(sock, memoryview(frame))
    return memoryview(frame).toreadonly()


def _receive_into(sock, view: memoryview) -> None:
    got = 0
    while got < len(view):
        count = sock.recv_into(view[got:])
        if not count:
            raise ConnectionError("the listener closed the connection")
        got += count


def fetch_all(sock, end: int, fetch_bytes: int) -> int:
    """Fetch the whole partition; the record bytes received."""
    t = load_request_schema(FETCH, 11)
    m = __import__(t.__module__, fromlist=["x"])
    offset, got = 0, 0
    while offset < end:
        request = t(
            replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=fetch_bytes,
            isolation_level=0, forgotten_topics_data=(),
            topics=(m.FetchTopic(topic="bench", partitions=(m.FetchPartition(
                partition=0, fetch_offset=offset, partition_max_bytes=fetch_bytes),)),),
        )  # fmt: skip
        sock.sendall(encode_request(FETCH, 11, request))
        _, answer = decode_response(FETCH, 11, receive_frame(sock))
        records = answer.responses[0].partitions[0].records
        got += len(records)
        # The next offset: the last batch's base offset + last offset delta + 1.
        position = 0
        while position < len(records):
            base = int.from_bytes(records[position : position + 8], "big")
            size = int.from_bytes(records[position + 8 : position + 12], "big")
            delta = int.from_bytes(records[position + 23 : position + 27], "big")
            position += 12 + size
        offset = base + delta + 1
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--fetch-mib", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ca, cert, key = certificates(tmp)
        end = fill(tmp / "data", args.mib)
        modes = {"plaintext": (), "TLS": (f"kafka.ssl.certfile={cert}", f"kafka.ssl.keyfile={key}")}
        results = {mode: [] for mode in modes}
        for round_ in range(args.rounds + 1):  # round 0 warms the page cache
            for mode, options in modes.items():
                proc, address = serve(tmp / "data", *options)
                try:
                    sock = socket.create_connection(address)
                    if mode == "TLS":
                        context = ssl.create_default_context(cafile=str(ca))
                        sock = context.wrap_socket(sock, server_hostname=address[0])
                    cpu, start = cpu_seconds(proc.pid), time.perf_counter()
                    got = fetch_all(sock, end, args.fetch_mib << 20)
                    elapsed = time.perf_counter() - start
                    cpu = cpu_seconds(proc.pid) - cpu
                    sock.close()
                finally:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait()
                if round_:
                    results[mode].append((got / elapsed / 2**20, cpu / (got / 2**30)))
        print(f"fetch of {args.mib} MiB, {args.fetch_mib} MiB per request, "
              f"median of {args.rounds} rounds")  # fmt: skip
        for mode, rows in results.items():
            rate = statistics.median(r for r, _ in rows)
            cpu = statistics.median(c for _, c in rows)
            print(f"  {mode:10} {rate:7.0f} MiB/s   daemon CPU {cpu:5.2f} s/GiB")


if __name__ == "__main__":
    main()
