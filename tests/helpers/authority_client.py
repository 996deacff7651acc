"""One Kafka operation by a real client, run as the user the test made (by
tests/system/test_one_authority.py, under ``setpriv``):

    python authority_client.py BOOTSTRAP OP NAME [ARG] [--sasl USER PASSWORD]

Prints one line: ``ok`` when the listener allowed it, ``denied`` when it
answered an authorization failure (TOPIC_ or GROUP_AUTHORIZATION_FAILED), or
``error <what>`` for anything else, so that a test never counts another
failure as a refusal. Topic operations go through confluent-kafka's admin
client (librdkafka), group operations through kafka-python's; reading and
producing are kcat's, run by the test itself.
"""

from __future__ import annotations

import sys

TIMEOUT = 20


def confluent(bootstrap: str, sasl: tuple[str, str] | None):
    from confluent_kafka.admin import AdminClient

    config = {"bootstrap.servers": bootstrap, "socket.timeout.ms": TIMEOUT * 1000}
    if sasl:
        config |= {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": sasl[0],
            "sasl.password": sasl[1],
        }
    return AdminClient(config)


def kafka_python(bootstrap: str, sasl: tuple[str, str] | None):
    from kafka.admin import KafkaAdminClient

    config = {"bootstrap_servers": bootstrap, "request_timeout_ms": TIMEOUT * 1000}
    if sasl:
        config |= {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": sasl[0],
            "sasl_plain_password": sasl[1],
        }
    return KafkaAdminClient(**config)


def topic_op(admin, op: str, name: str, arg: str | None) -> None:
    """Raises the client's error unless the listener allowed ``op``."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
    )

    if op == "describe":
        topic = admin.list_topics(topic=name, timeout=TIMEOUT).topics[name]
        if topic.error is not None:
            raise KafkaException(topic.error)
        return
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    if op == "describe_configs":
        futures = admin.describe_configs([resource])
    elif op == "alter_configs":
        entry = ConfigEntry(
            "retention.ms", arg or "86400000", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
        futures = admin.incremental_alter_configs([resource])
    elif op == "create_partitions":
        futures = admin.create_partitions([NewPartitions(name, int(arg))])
    elif op == "create":
        futures = admin.create_topics([NewTopic(name, 1, 1)])
    elif op == "delete":
        futures = admin.delete_topics([name], operation_timeout=TIMEOUT)
    else:
        raise SystemExit(f"unknown operation {op}")
    for future in futures.values():
        future.result(timeout=TIMEOUT)


def group_op(admin, op: str, group: str, arg: str | None) -> None:
    """Raises kafka-python's error unless the listener allowed ``op``."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    if op == "commit":
        topic, offset = arg.split(":")
        answers = admin.alter_group_offsets(
            group, {TopicPartition(topic, 0): OffsetAndMetadata(int(offset), "", -1)}
        )
        for error in answers.values():
            if error.errno:
                raise error()
    elif op == "offsets":
        admin.list_group_offsets({group: None})
    elif op == "delete_group":
        answers = admin.delete_groups([group])  # (group, "OK" or the error's name) each
        pairs = answers.items() if isinstance(answers, dict) else answers
        for _, outcome in pairs:
            if outcome != "OK":
                raise RuntimeError(getattr(outcome, "__name__", str(outcome)))
    else:
        raise SystemExit(f"unknown operation {op}")


def main(argv: list[str]) -> str:
    sasl = None
    if "--sasl" in argv:
        at = argv.index("--sasl")
        sasl, argv = (argv[at + 1], argv[at + 2]), argv[:at] + argv[at + 3 :]
    bootstrap, op, name, *rest = argv
    arg = rest[0] if rest else None
    try:
        if op in ("commit", "offsets", "delete_group"):
            admin = kafka_python(bootstrap, sasl)
            try:
                group_op(admin, op, name, arg)
            finally:
                admin.close()
        else:
            topic_op(confluent(bootstrap, sasl), op, name, arg)
    except Exception as e:  # the client's own error classes, judged by their names
        text = f"{type(e).__name__} {e}"
        if "AUTHORIZATION_FAILED" in text.upper() or "AUTHORIZATIONFAILED" in text.upper():
            return "denied"
        return "error " + " ".join(text.split())[:300]
    return "ok"


if __name__ == "__main__":
    print(main(sys.argv[1:]))
