"""Topics: CreateTopics, DeleteTopics and CreatePartitions, over the store's own
topic calls (their settings, the same as a topic's ``config`` file on the mount,
are configs.py's)."""

from __future__ import annotations

import trio

from ..core.config import TopicConfig
from ..core.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    LogfsError,
)
from ..core.topic_keys import refuse_here
from .access import ALTER, new_topic_owner, require, require_create, require_delete
from .codes import NO_THROTTLE, error_code
from .metadata import NO_TOPIC_ID
from .protocol import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, ErrorCode, make, schema


def _outcome(action) -> tuple[ErrorCode, str | None]:
    try:
        action()
    except (LogfsError, OSError) as e:
        return error_code(e), str(e).splitlines()[0] if str(e) else None
    return ErrorCode.none, None


async def _making(store, begin) -> tuple[ErrorCode, str | None]:
    """``begin()`` checks a request and returns the partitions to make (None:
    nothing to make); their files are made in a worker thread, so others' requests
    are answered meanwhile (core/log/making.py)."""
    try:
        new = begin()
        if new is not None:
            try:
                await trio.to_thread.run_sync(new.build)
            finally:
                store.finish(new)
    except (LogfsError, OSError) as e:
        return error_code(e), str(e).splitlines()[0] if str(e) else None
    return ErrorCode.none, None


async def create_topics(broker, request, advertised):
    m = schema(CREATE_TOPICS, request.version)
    store = broker.store
    results = []
    for topic in request.body.topics:
        count = broker.partitions if topic.num_partitions == -1 else topic.num_partitions
        configs = {c.name: c.value or "" for c in topic.configs}

        def begin(topic=topic, count=count, configs=configs):
            require_create(broker, advertised, topic.name)
            if topic.replication_factor not in (-1, 1):
                raise InvalidReplicationFactorError("replication factor: logfs keeps one replica")
            if request.body.validate_only:
                if topic.name in store.topics():
                    store.create_topic(topic.name)  # raises TopicExistsError
                refuse_here(configs)  # the settings are checked as a creation checks them
                TopicConfig.from_properties(configs, store.defaults)
                return None
            owner = new_topic_owner(broker, advertised)
            return store.begin_topic(topic.name, partitions=count, config=configs, owner=owner)

        code, message = await _making(store, begin)
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


async def delete_topics(broker, request, advertised):
    m = schema(DELETE_TOPICS, request.version)
    names = request.body.topic_names
    results = []
    for name in names:
        removals = []

        def delete(name=name, removals=removals):
            require_delete(broker, advertised, name)
            removals.append(broker.store.begin_deletion(name))

        code, message = _outcome(delete)
        if code == ErrorCode.none and broker.topic_deleted is not None:
            broker.topic_deleted(name)
        for remove in removals:  # the directories, no topic's now: off the loop
            await trio.to_thread.run_sync(remove)
        results.append(
            make(m.DeletableTopicResult, name=name, error_code=code, error_message=message)
        )
    return make(m.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))


async def create_partitions(broker, request, advertised):
    m = schema(CREATE_PARTITIONS, request.version)
    results = []
    for topic in request.body.topics:

        def begin(topic=topic):
            require(broker, advertised, ALTER, topic.name)
            current = len(broker.store.partitions(topic.name))
            if topic.count <= current:
                raise InvalidPartitionsError(
                    f"topic {topic.name!r} has {current} partitions, not fewer than {topic.count}"
                )
            if request.body.validate_only:
                return None
            try:
                return broker.store.begin_partitions(topic.name, topic.count)
            except InvalidConfigError as e:  # a count the topic cannot take
                raise InvalidPartitionsError(str(e)) from None

        code, message = await _making(broker.store, begin)
        results.append(
            make(
                m.CreatePartitionsTopicResult,
                name=topic.name,
                error_code=code,
                error_message=message,
            )
        )
    return make(m.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
