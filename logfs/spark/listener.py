"""Where the log is, for the source and the sink (`parse_location`): ``path``, a data
directory, or Spark's ``kafka.bootstrap.servers``, a logfs Kafka listener (`Listener`),
with the Kafka client options that concern the connection, spelled as Spark's Kafka
source passes them to Kafka's client:

- ``kafka.security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
- ``kafka.sasl.mechanism``: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with the credentials in
  ``kafka.sasl.jaas.config`` (Kafka's PlainLoginModule or ScramLoginModule line);
- ``kafka.ssl.truststore.location`` with ``kafka.ssl.truststore.type=PEM``: the CA file the
  listener's certificate must chain to (else the system's CAs), and
  ``kafka.ssl.endpoint.identification.algorithm``: ``https`` (the default) checks the host
  name, empty does not;
- ``kafka.request.timeout.ms``, ``kafka.default.api.timeout.ms`` (how long the source goes
  on trying a listener it cannot reach, as Kafka's consumers do) and ``kafka.client.id``.

Other ``kafka.*`` options are accepted and ignored.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from ..core.client import Producer, RemoteStore
from ..core.config import parse_int
from ..core.errors import InvalidConfigError
from .errors import SparkOptionError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_TIMEOUT = parse_int(1)
_JAAS_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|([=;]))', re.DOTALL)


@dataclasses.dataclass(frozen=True)
class Listener:
    """A logfs Kafka listener (or Kafka broker) named by Spark's ``kafka.*`` options."""

    servers: str  # Kafka's bootstrap.servers: HOST:PORT[,HOST:PORT...], tried in order
    username: str | None = None  # SASL
    password: str | None = dataclasses.field(default=None, repr=False)
    timeout: float = 30.0  # seconds: kafka.request.timeout.ms
    client_id: str = "logfs-spark"
    protocol: str = "PLAINTEXT"  # kafka.security.protocol
    mechanism: str | None = None  # kafka.sasl.mechanism, with SASL_*
    cafile: str | None = None  # kafka.ssl.truststore.location (PEM)
    check_hostname: bool = True  # kafka.ssl.endpoint.identification.algorithm=https
    api_timeout: float = 60.0  # seconds: kafka.default.api.timeout.ms

    @property
    def address(self) -> str:
        return "kafka://" + self.servers

    def _security(self) -> dict[str, Any]:
        return {
            "security_protocol": self.protocol,
            "sasl_mechanism": self.mechanism,
            "sasl_plain_username": self.username,
            "sasl_plain_password": self.password,
            "ssl_cafile": self.cafile,
            "ssl_check_hostname": self.check_hostname,
            "client_id": self.client_id,
        }

    def store(self, read_committed: bool = False) -> RemoteStore:
        """A read-only view of the listener's topics (connects on first use), as a
        ``read_committed`` consumer sees them if asked."""
        return RemoteStore(
            self.address, timeout=self.timeout, api_timeout=self.api_timeout,
            read_committed=read_committed, **self._security(),
        )  # fmt: skip

    def producer(self, **options: Any) -> Producer:
        return Producer(self.address, mount_timeout=self.timeout, **self._security(), **options)


def parse_location(opts: Mapping[str, str]) -> tuple[str | None, Listener | None]:
    """``(path, None)`` or ``(None, listener)`` from the (lower-case) options: exactly one
    of ``path`` and ``kafka.bootstrap.servers`` must be given.

    Raises:
        SparkOptionError: naming the option and what is wrong with it.
    """
    path, servers = opts.get("path"), opts.get("kafka.bootstrap.servers")
    if bool(path) == bool(servers):
        raise SparkOptionError(
            'exactly one of the options "path" (a logfs data directory) and '
            '"kafka.bootstrap.servers" (a logfs Kafka listener) must be given'
            + (" (got both)" if path else "")
        )
    if path:
        return path, None
    try:
        Listener(servers).store()  # checks the address list; connects only when used
    except InvalidConfigError as e:
        raise SparkOptionError(f'option "kafka.bootstrap.servers": {e}') from None
    protocol = opts.get("kafka.security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise SparkOptionError(
            f'option "kafka.security.protocol": {protocol} is not supported '
            f"({', '.join(PROTOCOLS)})"
        )
    mechanism = username = password = cafile = None
    if protocol.startswith("SASL_"):
        # Kafka's default mechanism is GSSAPI (Kerberos), which logfs does not offer.
        mechanism = opts.get("kafka.sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism not in LOGIN_MODULES:
            raise SparkOptionError(
                f'option "kafka.sasl.mechanism": {mechanism} is not supported '
                f"({', '.join(LOGIN_MODULES)})"
            )
        username, password = _jaas(opts.get("kafka.sasl.jaas.config"), protocol, mechanism)
    check_hostname = True
    if protocol.endswith("SSL"):
        cafile = _truststore(opts)
        check_hostname = _endpoint_identification(opts)
    timeouts = []
    for name, default in (("kafka.request.timeout.ms", 30_000),
                          ("kafka.default.api.timeout.ms", 60_000)):  # fmt: skip
        try:
            timeouts.append(_TIMEOUT(opts.get(name, default)) / 1000)
        except InvalidConfigError as e:
            raise SparkOptionError(f'option "{name}": {e}') from None
    timeout, api_timeout = timeouts
    listener = Listener(
        servers.strip(),
        username,
        password,
        timeout,
        opts.get("kafka.client.id") or Listener.client_id,
        protocol,
        mechanism,
        cafile,
        check_hostname,
        api_timeout,
    )
    try:
        listener.store()  # reads the truststore: a file that is no PEM CA file fails here
    except InvalidConfigError as e:
        raise SparkOptionError(f'option "kafka.ssl.truststore.location": {e}') from None
    return None, listener


def _truststore(opts: Mapping[str, str]) -> str | None:
    """The PEM CA file of ``kafka.ssl.truststore.location``, or None (the system's CAs)."""
    location = opts.get("kafka.ssl.truststore.location", "").strip()
    if "kafka.ssl.truststore.certificates" in opts:
        raise SparkOptionError(
            'option "kafka.ssl.truststore.certificates" is not supported: name a PEM file '
            'with "kafka.ssl.truststore.location" and "kafka.ssl.truststore.type" = "PEM"'
        )
    if not location:
        return None
    kind = opts.get("kafka.ssl.truststore.type", "JKS").strip().upper()  # Kafka's default
    if kind != "PEM":
        raise SparkOptionError(
            f'option "kafka.ssl.truststore.type": {kind} is not supported: logfs reads PEM '
            "truststores only; give the CA certificates in a PEM file with "
            '"kafka.ssl.truststore.type" = "PEM" (e.g. keytool -exportcert -rfc)'
        )
    return location


def _endpoint_identification(opts: Mapping[str, str]) -> bool:
    """Whether the listener's certificate must name its host: Kafka's ``https`` (the
    default) or the empty value (no check)."""
    value = opts.get("kafka.ssl.endpoint.identification.algorithm", "https").strip().lower()
    if value not in ("https", ""):
        raise SparkOptionError(
            f'option "kafka.ssl.endpoint.identification.algorithm": {value!r} is not '
            'supported ("https", or empty for no host name check)'
        )
    return value == "https"


def _jaas(text: str | None, protocol: str, mechanism: str) -> tuple[str, str]:
    """username and password of ``kafka.sasl.jaas.config`` as Kafka's clients read it:
    ``<LoginModule> required username="u" password="p";`` (values quoted or not,
    backslash escapes inside quotes), the login module the mechanism needs."""
    name = '"kafka.sasl.jaas.config"'
    expected = LOGIN_MODULES[mechanism]
    if not text or not text.strip():
        example = f'{expected} required username="u" password="p";'
        raise SparkOptionError(f"option {name} is required with {protocol}, e.g. {example}")
    tokens, pos, text = [], 0, text.strip()
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise SparkOptionError(f"option {name}: cannot parse {text[pos:]!r}")
        quoted, word, sign = match.groups()
        tokens.append(re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else word or sign)
        pos = match.end()
    if len(tokens) < 3 or tokens[-1] != ";" or ";" in tokens[:-1]:
        raise SparkOptionError(f"option {name}: expected one login module ending with ';'")
    module, flag, pairs = tokens[0], tokens[1], tokens[2:-1]
    if module != expected:
        raise SparkOptionError(
            f"option {name}: login module {module} is not supported with SASL mechanism "
            f"{mechanism} (it needs {expected})"
        )
    if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
        raise SparkOptionError(f"option {name}: {flag!r} is not a JAAS control flag")
    if len(pairs) % 3 or any(pairs[i + 1] != "=" for i in range(0, len(pairs), 3)):
        raise SparkOptionError(f'option {name}: expected key="value" pairs after {flag}')
    values = {pairs[i]: pairs[i + 2] for i in range(0, len(pairs), 3)}
    if "username" not in values or "password" not in values:
        raise SparkOptionError(f"option {name}: username and password are required")
    return values["username"], values["password"]
