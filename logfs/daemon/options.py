"""``logfs mount -o`` (and ``logfs serve -o``) options, sorted by who consumes
them: FUSE (and FUSE over io_uring), the flusher and the log cleaner (Kafka's
broker settings), the tree's ownership, the Kafka listener, the metrics
endpoint, the store's limits, the group coordinator (Kafka's ``group.*``), and
topic-setting defaults (any other key with a dot)."""

from __future__ import annotations

import grp
import pwd
import re
from collections.abc import Mapping
from typing import NamedTuple

from ..core.config import TopicConfig
from ..core.errors import LogfsError
from ..core.log import LIMIT_OPTIONS, Limits
from ..core.topic_keys import SYNONYMS
from ..groups import GROUP_OPTIONS, GroupSettings
from ..metrics import parse_address
from ..mirror import FollowerSettings, MirrorSettings
from ..mount import Ownership

# Passed to the kernel / libfuse as they are.
FUSE_OPTIONS = {
    "ro",
    "allow_other",
    "allow_root",
    "auto_unmount",
    "default_permissions",
    "noatime",
    "sync",
    "dirsync",
    "debug",
}
# What mount(8) and fstab add; meaningless here, accepted and ignored.
IGNORED_OPTIONS = {
    "rw", "defaults", "auto", "noauto", "nofail", "_netdev", "user", "users", "nouser", "owner",
    "group", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "async", "atime", "relatime",
    "strictatime", "diratime", "nodiratime",
}  # fmt: skip
# Kafka's broker settings for the background work: option -> (task, its argument, unit).
BROKER_OPTIONS = {
    "log.retention.check.interval.ms": ("flusher", "retention_interval", 1e-3),
    "log.flush.offset.checkpoint.interval.ms": ("flusher", "checkpoint_interval", 1e-3),
    "log.cleaner.backoff.ms": ("cleaner", "backoff", 1e-3),
    "log.cleaner.io.max.bytes.per.second": ("cleaner", "io_rate", 1),
}

# A topic setting's broker-wide name (Kafka's log.*, message.max.bytes, ...) -> the topic
# setting it defaults; names the same in both are topic settings already.
BROKER_DEFAULTS = {broker: topic for topic, broker in SYNONYMS.items() if broker != topic}

# The Kafka listener's bounds and behaviour (docs/kafka.md): option -> its parser.
KAFKA_OPTIONS = {
    "kafka.max.request.bytes": "positive",
    "kafka.request.timeout.ms": "positive",
    "kafka.max.connections": "positive",
    "kafka.auto.create.topics": "bool",
    "kafka.allow.anonymous": "bool",
    "kafka.sasl.users": "path",
    "kafka.ssl.certfile": "path",
    "kafka.ssl.keyfile": "path",
    "kafka.acks.all.fsync": "bool",
    # The listener's budgets (kafka/budgets.py), under Kafka's names where it has them.
    "queued.max.request.bytes": "positive",
    "connections.max.idle.ms": "positive",
    "max.connections.per.ip": "positive",
    "kafka.max.connections.per.user": "positive",
    "connection.failed.authentication.delay.ms": "natural",
    "kafka.auto.create.topics.per.request": "positive",
}


# How long a ring mount watches for a writer's next line before it sleeps (docs/mount.md).
IO_URING_SPIN_US, MAX_IO_URING_SPIN_US = 20, 1000


class MountOptions(NamedTuple):
    """``-o`` options, sorted by who consumes them."""

    fuse: frozenset[str]  # for pyfuse3.init
    defaults: dict[str, str]  # topic-config defaults (Kafka names)
    partitions: int  # partitions of a topic made by mkdir
    read_only: bool
    log: str | None  # the daemon's log file
    tasks: dict[str, dict[str, float]]  # "flusher"/"cleaner" -> arguments (BROKER_OPTIONS)
    owner: Ownership  # uid=, gid=, umask=
    kafka: str | None = None  # kafka=[HOST:]PORT: also serve Kafka's protocol there
    kafka_settings: Mapping[str, int | bool | str] = {}  # KAFKA_OPTIONS
    buffered: bool = False  # acks=0: append files through the page cache (buffered.py)
    limits: Limits = Limits()  # partitions per topic and in all (LIMIT_OPTIONS)
    groups: GroupSettings = GroupSettings()  # the group coordinator's (GROUP_OPTIONS)
    given: Mapping[str, str] = {}  # every option as given, for the broker's configs
    metrics: str | None = None  # metrics=[HOST:]PORT: serve Prometheus's metrics there
    mirror: MirrorSettings | None = None  # mirror.to= and the mirror.* options
    follower: FollowerSettings | None = None  # mirror.from= and the mirror.* options
    io_uring: bool = False  # io_uring: FUSE over io_uring where the kernel offers it
    io_uring_spin_us: int = IO_URING_SPIN_US  # io_uring_spin_us=N: the ring watched N µs


def parse_options(options: Mapping[str, str | None]) -> MountOptions:
    """Sort ``-o`` options; raises LogfsError for an unknown one or a bad value."""
    fuse, defaults, tasks = set(), {}, {"flusher": {}, "cleaner": {}}
    partitions, log, kafka, kafka_settings, buffered, io_uring = 1, None, None, {}, False, False
    metrics, spin = None, None
    owner = Ownership()
    limits = Limits()
    groups: dict[str, str] = {}
    mirror: dict[str, str] = {}
    for key, value in options.items():
        if key in FUSE_OPTIONS:
            fuse.add(key)
        elif key in IGNORED_OPTIONS or key.startswith(("x-", "comment")):
            continue
        elif key == "partitions":
            if not (value or "").isdigit() or int(value) < 1:
                raise LogfsError(f"partitions={value}: expected a positive integer")
            partitions = int(value)
        elif key == "log":
            log = value or None
        elif key == "kafka":
            kafka = _listen_value(value or "")
        elif key == "metrics":
            parse_address(value or "")  # a typo fails the mount, not the daemon
            metrics = value or ""
        elif key in KAFKA_OPTIONS:
            kafka_settings[key] = _kafka_value(key, value or "")
        elif key == "acks":
            if value not in ("0", "1", "all"):
                raise LogfsError(f"acks={value}: expected 1 (or all: the default) or 0 (buffered)")
            buffered = value == "0"
        elif key == "io_uring":
            if value:
                raise LogfsError(f"io_uring={value}: io_uring takes no value")
            io_uring = True
        elif key == "io_uring_spin_us":
            if not (value or "").isdigit() or int(value) > MAX_IO_URING_SPIN_US:
                raise LogfsError(
                    f"io_uring_spin_us={value}: expected microseconds, 0 to {MAX_IO_URING_SPIN_US}"
                )
            spin = int(value)
        elif key in ("uid", "gid", "umask"):
            owner = owner._replace(**{key: _owner_value(key, value or "")})
        elif key in BROKER_OPTIONS:
            if not (value or "").isdigit() or int(value) < 1:
                raise LogfsError(f"{key}={value}: expected a positive integer")
            task, argument, unit = BROKER_OPTIONS[key]
            tasks[task][argument] = int(value) * unit
        elif key in LIMIT_OPTIONS:
            if not (value or "").isdigit() or int(value) < 1:
                raise LogfsError(f"{key}={value}: expected a positive integer")
            limits = limits._replace(**{LIMIT_OPTIONS[key]: int(value)})
        elif key in GROUP_OPTIONS:
            groups[key] = value or ""
        elif key.startswith("mirror."):
            mirror[key] = value or ""
        elif key == "fsname" or key == "subtype":
            continue  # always the data dir and "logfs"
        elif key in BROKER_DEFAULTS:  # a broker's name of a topic default: log.retention.ms
            defaults[BROKER_DEFAULTS[key]] = value or ""
        elif "." in key:
            defaults[key] = value or ""
        else:
            raise LogfsError(f"unknown mount option {key!r}")
    if spin is not None and not io_uring:
        raise LogfsError(f"io_uring_spin_us={spin}: only with -o io_uring")
    TopicConfig.from_properties(defaults=defaults)  # InvalidConfigError (a LogfsError) if bad
    settings = GroupSettings.from_options(groups)  # the same
    if "allow_other" in fuse:
        # Without the kernel's permission checks every user could append, create and
        # delete topics; with them, DATA's owner and modes apply (docs/operations.md).
        fuse.add("default_permissions")
    return MountOptions(
        frozenset(fuse), defaults, partitions, "ro" in fuse, log, tasks, owner, kafka,
        kafka_settings, buffered, limits, settings, {k: v or "" for k, v in options.items()},
        metrics, *_mirrors(mirror, "ro" in fuse), io_uring,
        IO_URING_SPIN_US if spin is None else spin,
    )  # fmt: skip


def _mirrors(
    mirror: Mapping[str, str], read_only: bool
) -> tuple[MirrorSettings | None, FollowerSettings | None]:
    """The mirror out's settings or the follower's: one direction per daemon."""
    if "mirror.from" not in mirror:
        return MirrorSettings.from_options(mirror) if mirror else None, None
    if "mirror.to" in mirror:
        raise LogfsError("mirror.from and mirror.to: a daemon mirrors one way")
    if read_only:
        raise LogfsError("mirror.from: a follower appends, which ro does not allow")
    return None, FollowerSettings.from_options(mirror)


def _kafka_value(key: str, value: str) -> int | bool | str:
    if KAFKA_OPTIONS[key] == "path":
        if not value:
            raise LogfsError(f"{key}=: expected a file")
        return value
    if KAFKA_OPTIONS[key] == "bool":
        if value not in ("true", "false"):
            raise LogfsError(f"{key}={value}: expected true or false")
        return value == "true"
    least = 0 if KAFKA_OPTIONS[key] == "natural" else 1
    if not value.isdigit() or int(value) < least or int(value) >= 2**63:
        raise LogfsError(f"{key}={value}: expected an integer of at least {least}")
    return int(value)


def _listen_value(value: str) -> str:
    """``kafka=[HOST:]PORT``, checked now so a typo fails the mount, not the daemon."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise LogfsError(f"kafka={value}: expected [HOST:]PORT with a port number 0-65535")
    return value


def _owner_value(key: str, value: str) -> int:
    """``uid=`` and ``gid=`` take a number or a user or group name (as sshfs
    and ntfs-3g do); ``umask=`` an octal mask."""
    if key == "umask":
        if not re.fullmatch(r"[0-7]{1,4}", value):
            raise LogfsError(f"umask={value}: expected an octal mask such as 022")
        return int(value, 8) & 0o777
    if value.isdigit():
        return int(value)
    try:
        return pwd.getpwnam(value).pw_uid if key == "uid" else grp.getgrnam(value).gr_gid
    except KeyError:
        raise LogfsError(f"{key}={value}: no such {'user' if key == 'uid' else 'group'}") from None
