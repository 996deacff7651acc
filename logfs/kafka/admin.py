"""Topics and their settings: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs and IncrementalAlterConfigs, over the store's own topic calls
(the same settings as a topic's ``config`` file on the mount)."""

from __future__ import annotations

from ..core.config import INTERNAL_TOPICS
from ..core.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    LogfsError,
)
from .access import OWNER, READ, WRITE, require
from .codes import NO_THROTTLE, error_code
from .metadata import NO_TOPIC_ID
from .protocol import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    ErrorCode,
    make,
    schema,
)

TOPIC_RESOURCE = 2
SOURCE_TOPIC, SOURCE_DEFAULT = 1, 5  # Kafka's DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _outcome(action) -> tuple[ErrorCode, str | None]:
    try:
        action()
    except (LogfsError, OSError) as e:
        return error_code(e), str(e).splitlines()[0] if str(e) else None
    return ErrorCode.none, None


def create_topics(broker, request, advertised):
    m = schema(CREATE_TOPICS, request.version)
    store = broker.store
    results = []
    for topic in request.body.topics:
        count = broker.partitions if topic.num_partitions == -1 else topic.num_partitions
        configs = {c.name: c.value or "" for c in topic.configs}

        def create(topic=topic, count=count, configs=configs):
            require(broker, advertised, WRITE, topic.name)
            if topic.replication_factor not in (-1, 1):
                raise InvalidReplicationFactorError("replication factor: logfs keeps one replica")
            if request.body.validate_only:
                if topic.name in store.topics():
                    store.create_topic(topic.name)  # raises TopicExistsError
                return
            store.create_topic(topic.name, partitions=count, config=configs)

        code, message = _outcome(create)
        results.append(
            make(
                m.CreatableTopicResult,
                name=topic.name,
                topic_id=NO_TOPIC_ID,
                error_code=code,
                error_message=message,
                num_partitions=count if code == ErrorCode.none else -1,
                replication_factor=1 if code == ErrorCode.none else -1,
                configs=None,
            )
        )
    if any(r.error_code == ErrorCode.none for r in results):
        broker.notify_appended()
    return make(m.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))


def delete_topics(broker, request, advertised):
    m = schema(DELETE_TOPICS, request.version)
    names = request.body.topic_names
    results = []
    for name in names:

        def delete(name=name):
            if name in INTERNAL_TOPICS:  # the group coordinator's own log stays
                raise InvalidTopicError(f"{name} is internal")
            require(broker, advertised, OWNER, name)
            broker.store.delete_topic(name)

        code, message = _outcome(delete)
        if code == ErrorCode.none and broker.topic_deleted is not None:
            broker.topic_deleted(name)
        results.append(
            make(m.DeletableTopicResult, name=name, error_code=code, error_message=message)
        )
    return make(m.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))


def create_partitions(broker, request, advertised):
    m = schema(CREATE_PARTITIONS, request.version)
    results = []
    for topic in request.body.topics:

        def grow(topic=topic):
            require(broker, advertised, OWNER, topic.name)
            current = len(broker.store.partitions(topic.name))
            if topic.count <= current:
                raise InvalidPartitionsError(
                    f"topic {topic.name!r} has {current} partitions, not fewer than {topic.count}"
                )
            if not request.body.validate_only:
                try:
                    broker.store.add_partitions(topic.name, topic.count)
                except InvalidConfigError as e:  # a count the topic cannot take
                    raise InvalidPartitionsError(str(e)) from None

        code, message = _outcome(grow)
        results.append(
            make(
                m.CreatePartitionsTopicResult,
                name=topic.name,
                error_code=code,
                error_message=message,
            )
        )
    return make(m.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


def describe_configs(broker, request, advertised):
    m = schema(DESCRIBE_CONFIGS, request.version)
    results = []
    for resource in request.body.resources:
        entries, code, message = [], ErrorCode.none, None
        if resource.resource_type == TOPIC_RESOURCE:
            try:
                require(broker, advertised, READ, resource.resource_name)
                config = broker.store.topic_config(resource.resource_name).to_properties()
                overrides = broker.store.topic_overrides(resource.resource_name)
            except (LogfsError, OSError) as e:
                code, message, config, overrides = error_code(e), str(e), {}, {}
            keys = resource.configuration_keys
            for name, value in sorted(config.items()):
                if keys is not None and name not in keys:
                    continue
                entries.append(
                    make(
                        m.DescribeConfigsResourceResult,
                        name=name,
                        value=value,
                        read_only=False,
                        is_default=name not in overrides,
                        config_source=SOURCE_TOPIC if name in overrides else SOURCE_DEFAULT,
                        is_sensitive=False,
                        synonyms=(),
                        config_type=0,
                        documentation=None,
                    )
                )
        results.append(
            make(
                m.DescribeConfigsResult,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=tuple(entries),
            )
        )
    return make(m.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


def _altered(current: dict[str, str], configs) -> dict[str, str]:
    overrides = dict(current)
    for c in configs:
        if c.config_operation == SET:
            overrides[c.name] = c.value or ""
        elif c.config_operation == DELETE:
            overrides.pop(c.name, None)
        else:
            raise InvalidConfigError(f"{c.name}: APPEND and SUBTRACT apply to list settings only")
    return overrides


def incremental_alter_configs(broker, request, advertised):
    m = schema(INCREMENTAL_ALTER_CONFIGS, request.version)
    store = broker.store
    results = []
    for resource in request.body.resources:

        def alter(resource=resource):
            require(broker, advertised, OWNER, resource.resource_name)
            if resource.resource_type != TOPIC_RESOURCE:
                raise InvalidConfigError("only topic settings can be altered")
            overrides = _altered(store.topic_overrides(resource.resource_name), resource.configs)
            if request.body.validate_only:
                from_props = store.topic_config(resource.resource_name)
                type(from_props).from_properties(overrides, store.defaults)
            else:
                store.set_topic_config(resource.resource_name, overrides)

        code, message = _outcome(alter)
        results.append(
            make(
                m.AlterConfigsResourceResponse,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return make(
        m.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(results)
    )
