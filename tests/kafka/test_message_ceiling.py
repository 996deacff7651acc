"""A topic's max.message.bytes past the data directory's ceiling
(logfs.max.message.bytes.ceiling) is refused over the listener with
POLICY_VIOLATION, by CreateTopics and IncrementalAlterConfigs alike, and nothing changes."""

from __future__ import annotations

import confluent_kafka as ck
import confluent_kafka.admin as ka
import pytest
from kafka_helpers import Served

from logfs import Store


def refused(future) -> ck.KafkaError:
    with pytest.raises(ck.KafkaException) as e:
        future.result(30)
    return e.value.args[0]


def test_create_and_alter_stop_at_the_ceiling(tmp_path):
    with Served(tmp_path / "data", "logfs.max.message.bytes.ceiling=2097152") as served:
        admin = ka.AdminClient({"bootstrap.servers": served.bootstrap})
        [big] = admin.create_topics(
            [ka.NewTopic("big", 1, 1, config={"max.message.bytes": "2097153"})]
        ).values()
        assert refused(big).code() == ck.KafkaError.POLICY_VIOLATION
        [ok] = admin.create_topics(
            [ka.NewTopic("ok", 1, 1, config={"max.message.bytes": "2097152"})]
        ).values()
        ok.result(30)
        entry = ka.ConfigEntry(
            "max.message.bytes", str(1 << 30), incremental_operation=ka.AlterConfigOpType.SET
        )
        raised = ka.ConfigResource("topic", "ok", incremental_configs=[entry])
        [alter] = admin.incremental_alter_configs([raised]).values()
        error = refused(alter)
        assert error.code() == ck.KafkaError.POLICY_VIOLATION
        assert "logfs.max.message.bytes.ceiling=2097152" in error.str()
    with Store(tmp_path / "data") as store:
        assert store.topics() == {"ok": 1}
        assert store.topic_overrides("ok") == {"max.message.bytes": "2097152"}
