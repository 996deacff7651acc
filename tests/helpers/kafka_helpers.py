"""Starting logfs's Kafka listener (``logfs serve`` or a mount with ``-o kafka=``)
and talking Kafka's protocol to it with kio's message classes."""

from __future__ import annotations

import contextlib
import io
import re
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseV1
from kio.serial import entity_reader, entity_writer
from mount_helpers import LOGFS, Daemon

from logfs.core.client import mountinfo
from logfs.core.log import Store

SERVING = re.compile(r"^serving .* on (\S+):(\d+)$", re.M)


class Served:
    """``logfs serve DATA --listen 127.0.0.1:0`` as a child process."""

    def __init__(self, data: Path, *options: str, listen: str = "127.0.0.1:0"):
        """``listen``: where; a wildcard address is reached through 127.0.0.1."""
        self.data = Path(data)
        self.options = options
        self.listen = listen
        self.log = self.data.parent / "serve.log"
        self.proc: subprocess.Popen | None = None
        self.address: tuple[str, int] | None = None

    def command(self) -> list[str]:
        cmd = [*LOGFS, "serve", str(self.data), "--listen", self.listen]
        if self.options:
            cmd += ["-o", ",".join(self.options)]
        return cmd

    def start(self, timeout: float = 60) -> Served:
        self.log.write_bytes(b"")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while (found := SERVING.search(self.log.read_text(errors="replace"))) is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"logfs serve exited {self.proc.returncode}: {self.output()}")
            assert time.monotonic() < deadline, "logfs serve did not start"
            time.sleep(0.02)
        host = found.group(1)
        self.address = ("127.0.0.1" if host == "0.0.0.0" else host, int(found.group(2)))
        return self

    @property
    def bootstrap(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def __enter__(self) -> Served:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.terminate()
            if self.proc.poll() is None:
                self.kill()


@contextlib.contextmanager
def mounted(data: Path, mountpoint: Path, *options: str):
    """A mount with a Kafka listener on a free loopback port: (daemon, "host:port")."""
    mountpoint.mkdir(exist_ok=True)
    with Daemon(data, mountpoint, "kafka=127.0.0.1:0", *options) as daemon:
        deadline = time.monotonic() + 30
        while (record := mountinfo.read_record(data)) is None or not record.kafka:
            assert time.monotonic() < deadline, f"no Kafka address: {daemon.output()}"
            time.sleep(0.02)
        yield daemon, record.kafka


def stored(data: Path, topic: str, partition: int = 0) -> list:
    """The partition's records as the Store API reads them (read-only, beside a writer)."""
    with Store(data, read_only=True) as store:
        return list(store.log(topic, partition).scan())


# ---------------------------------------------------------------- raw protocol


def encode_request(api_key: int, version: int, body, correlation_id: int = 1) -> bytes:
    """A whole request frame, length field included."""
    request_type = load_request_schema(api_key, version)
    buffer = io.BytesIO()
    header_type = HeaderV2 if request_type.__flexible__ else HeaderV1
    entity_writer(header_type)(
        buffer,
        header_type(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id="logfs-test",
        ),
    )
    entity_writer(request_type)(buffer, body)
    data = buffer.getvalue()
    return struct.pack(">i", len(data)) + data


def receive_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the listener closed the connection")
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def decode_response(api_key: int, version: int, frame: bytes):
    """(correlation id, response) of a response frame without its length field."""
    response_type = load_response_schema(api_key, version)
    header_type = ResponseV1 if response_type.__flexible__ and api_key != 18 else ResponseV0
    header, used = entity_reader(header_type)(frame, 0)
    body, size = entity_reader(response_type)(frame, used)
    assert used + size == len(frame)
    return header.correlation_id, body


def call(address: tuple[str, int] | str, api_key: int, version: int, body, sock=None):
    """Send one request and return its decoded response."""
    if sock is None:
        with connect(address) as sock:
            return call(address, api_key, version, body, sock)
    sock.sendall(encode_request(api_key, version, body))
    return decode_response(api_key, version, receive_frame(sock))[1]


def closed(sock: socket.socket, timeout: float = 10) -> bool:
    """Whether the listener closed ``sock`` (reads EOF) within ``timeout``."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def connect(address: tuple[str, int] | str, timeout: float = 30) -> socket.socket:
    if isinstance(address, str):
        host, _, port = address.rpartition(":")
        address = (host, int(port))
    sock = socket.create_connection(address, timeout=timeout)
    return sock


# ---------------------------------------------------------------- TLS


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def make_pki(d: Path) -> SimpleNamespace:
    """In ``d``, made with openssl: a certificate authority (``ca``), a server certificate
    it signed for localhost and 127.0.0.1 (``cert``, ``key``), the key again behind a
    passphrase (``locked.key``), a key of no certificate (``other.key``), and a second CA
    that signed nothing (``other_ca``)."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=logfs test CA", cwd=d)  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=localhost", cwd=d)  # fmt: skip
    (d / "san.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.cnf",
            cwd=d)  # fmt: skip
    (d / "server.key").chmod(0o600)
    openssl("rsa", "-in", "server.key", "-aes256", "-passout", "pass:secret", "-out",
            "locked.key", cwd=d)  # fmt: skip
    openssl("genpkey", "-algorithm", "RSA", "-out", "other.key", cwd=d)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other-ca.key", "-out",
            "other-ca.pem", "-days", "2", "-subj", "/CN=logfs test CA", cwd=d)  # fmt: skip
    return SimpleNamespace(
        ca=d / "ca.pem", cert=d / "server.pem", key=d / "server.key", other_ca=d / "other-ca.pem",
        dir=d,
    )  # fmt: skip
