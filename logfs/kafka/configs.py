"""Settings over the protocol: DescribeConfigs, IncrementalAlterConfigs and
AlterConfigs, for topics (their settings, the ``config`` file of the mount)
and for this broker (broker_configs.py).

A topic setting's source is Kafka's: the topic's own (TOPIC_CONFIG), a
broker-wide default set while running (DYNAMIC_DEFAULT_BROKER_CONFIG) or by
an ``-o`` option (STATIC_BROKER_CONFIG), else Kafka's default
(DEFAULT_CONFIG); with ``include_synonyms`` each layer is listed under its
name, the broker-wide one under Kafka's ``log.*`` name. With
``include_documentation`` a setting one node keeps without using says why.

IncrementalAlterConfigs: SET and DELETE any setting, APPEND and SUBTRACT
the list ones (``cleanup.policy``, the throttled replica lists), every change
of a resource checked before any applies. AlterConfigs replaces a
resource's settings whole, as Kafka's does.
"""

from __future__ import annotations

from ..core.config import IGNORED, TopicConfig
from ..core.errors import (
    ClusterAccessDeniedError,
    InvalidConfigError,
    InvalidRequestError,
    KafkaCode,
    LogfsError,
)
from ..core.topic_keys import LIST_KEYS, SYNONYMS, TYPES, refuse_here
from . import broker_configs as bc
from .access import OWNER, READ, TopicOp, require
from .codes import NO_THROTTLE, NODE_ID, error_code
from .protocol import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, make, schema

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
TOPIC_SOURCE = 1
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _check_broker(name: str) -> None:
    if name not in ("", str(NODE_ID)):
        raise InvalidRequestError(
            f"Unexpected broker id, expected {NODE_ID} or empty string, but received {name}"
        )


def _topic_settings(broker, name: str) -> dict:
    """The topic's settings: name -> (setting, its layers (name, value, source), the
    strongest first, documentation)."""
    config = broker.store.topic_config(name).to_properties()
    overrides = broker.store.topic_overrides(name)
    brokerwide = broker.configs.describe()
    kafka = TopicConfig().to_properties()
    out = {}
    for key, value in config.items():
        layers = []
        if key in overrides:
            layers.append((key, overrides[key], TOPIC_SOURCE))
        wide = brokerwide.get(SYNONYMS.get(key, ""))
        if wide is not None and wide.source != bc.DEFAULT:
            layers.append((SYNONYMS[key], wide.value, wide.source))
        layers.append((SYNONYMS.get(key, key), kafka[key], bc.DEFAULT))
        setting = bc.Setting(value, TYPES.get(key, bc.STRING), layers[0][2], False)
        doc = f"kept and shown, not used: {IGNORED[key]}" if key in IGNORED else None
        out[key] = (setting, layers, doc)
    return out


def _settings(broker, advertised, resource) -> dict:
    """A resource's settings as `_topic_settings` gives a topic's.

    Raises:
        LogfsError: Kafka's refusal (no such topic, access, another broker's id).
    """
    if resource.resource_type == TOPIC_RESOURCE:
        require(broker, advertised, TopicOp.DESCRIBE_CONFIGS, resource.resource_name)
        return _topic_settings(broker, resource.resource_name)
    if resource.resource_type == BROKER_RESOURCE:
        _check_broker(resource.resource_name)
        if not broker.allows(advertised, READ):
            raise ClusterAccessDeniedError(f"{advertised.user} may not read the broker")
        return {
            k: (s, [(k, s.value, s.source)], None) for k, s in broker.configs.describe().items()
        }
    raise InvalidRequestError(f"resource type {resource.resource_type} has no settings here")


def describe_configs(broker, request, advertised):
    m = schema(DESCRIBE_CONFIGS, request.version)
    body = request.body
    with_synonyms = getattr(body, "include_synonyms", False)
    with_docs = getattr(body, "include_documentation", False)
    results = []
    for resource in body.resources:
        entries, code, message = [], KafkaCode.NONE, None
        keys = resource.configuration_keys
        try:
            found = _settings(broker, advertised, resource)
        except (LogfsError, OSError) as e:
            code, message, found = error_code(e), str(e), {}
        for name, (setting, layers, doc) in sorted(found.items()):
            if keys is not None and name not in keys:
                continue
            synonyms = tuple(
                make(m.DescribeConfigsSynonym, name=n, value=v, source=source)
                for n, v, source in (layers if with_synonyms else ())
            )
            entries.append(
                make(
                    m.DescribeConfigsResourceResult,
                    name=name,
                    value=None if setting.sensitive else setting.value,
                    read_only=setting.read_only,
                    is_default=setting.source == bc.DEFAULT,
                    config_source=setting.source,
                    is_sensitive=setting.sensitive,
                    synonyms=synonyms,
                    config_type=setting.type,
                    documentation=doc if with_docs else None,
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


def _list_change(current: str, op: int, value: str) -> str:
    items = [i.strip() for i in current.split(",") if i.strip()]
    given = [i.strip() for i in (value or "").split(",") if i.strip()]
    if op == APPEND:
        return ",".join(items + [i for i in given if i not in items])
    return ",".join(i for i in items if i not in given)


def _altered(current: dict[str, str], effective: dict[str, str], configs) -> dict[str, str]:
    """The settings after IncrementalAlterConfigs' operations on ``current``."""
    out = dict(current)
    for c in configs:
        if c.config_operation == SET:
            out[c.name] = c.value or ""
        elif c.config_operation == DELETE:
            out.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            if c.name not in LIST_KEYS:
                what = "append" if c.config_operation == APPEND else "subtract"
                raise InvalidConfigError(
                    f"Config value {what} is not allowed for config key: {c.name}"
                )
            out[c.name] = _list_change(
                out.get(c.name, effective.get(c.name, "")), c.config_operation, c.value
            )
        else:
            raise InvalidConfigError(f"{c.name}: unknown operation {c.config_operation}")
    return out


def _alter_topic(broker, advertised, name: str, overrides: dict[str, str], validate: bool):
    require(broker, advertised, TopicOp.ALTER_CONFIGS, name)
    store = broker.store
    if validate:
        store.topic_config(name)  # the topic exists
        refuse_here(overrides)
        TopicConfig.from_properties(overrides, store.defaults)
    else:
        store.set_topic_config(name, overrides)


def _alter_broker(broker, advertised, name, setting, deleting, validate) -> None:
    _check_broker(name)
    if not broker.allows(advertised, OWNER):
        raise ClusterAccessDeniedError("only DATA's owner may change the broker's settings")
    broker.configs.alter(setting, deleting, validate)


def _alter_each(m, resources, alter) -> tuple:
    """Each resource (a topic or the broker) altered by ``alter(resource)``, and its
    answer: Kafka's code and message for what that raised."""
    results = []
    for resource in resources:
        code, message = KafkaCode.NONE, None
        try:
            if resource.resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE):
                raise InvalidRequestError(
                    f"resource type {resource.resource_type} has no settings here"
                )
            alter(resource)
        except (LogfsError, OSError) as e:
            code, message = error_code(e), str(e).splitlines()[0] if str(e) else None
        results.append(
            make(
                m.AlterConfigsResourceResponse,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return tuple(results)


def incremental_alter_configs(broker, request, advertised):
    m = schema(INCREMENTAL_ALTER_CONFIGS, request.version)
    store, validate = broker.store, request.body.validate_only

    def alter(resource) -> None:
        name = resource.resource_name
        if resource.resource_type == TOPIC_RESOURCE:
            effective = store.topic_config(name).to_properties()
            overrides = _altered(store.topic_overrides(name), effective, resource.configs)
            _alter_topic(broker, advertised, name, overrides, validate)
        else:
            values = {k: s.value or "" for k, s in broker.configs.describe().items()}
            after = _altered(
                {}, values, [c for c in resource.configs if c.config_operation != DELETE]
            )
            deleting = [c.name for c in resource.configs if c.config_operation == DELETE]
            _alter_broker(broker, advertised, name, after, deleting, validate)

    results = _alter_each(m, request.body.resources, alter)
    return make(m.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=results)


def alter_configs(broker, request, advertised):
    """The settings given replace the resource's own (those not given go back to their
    defaults), as Kafka's AlterConfigs does."""
    m = schema(ALTER_CONFIGS, request.version)
    validate = request.body.validate_only

    def alter(resource) -> None:
        given = {c.name: c.value or "" for c in resource.configs}
        if resource.resource_type == TOPIC_RESOURCE:
            _alter_topic(broker, advertised, resource.resource_name, given, validate)
        else:
            gone = [k for k in broker.configs.dynamic if k not in given]
            _alter_broker(broker, advertised, resource.resource_name, given, gone, validate)

    results = _alter_each(m, request.body.resources, alter)
    return make(m.AlterConfigsResponse, throttle_time=NO_THROTTLE, responses=results)
