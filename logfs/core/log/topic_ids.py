"""Topic ids: the 16-byte id Kafka gives each topic at its creation, kept
where Kafka keeps it, in every partition directory's ``partition.metadata``::

    version: 0
    topic_id: <the id as Kafka prints it: URL-safe base64, no padding>

A topic deleted and created again under its name gets a new id, as in Kafka,
so a client that holds the old one (a consumer's assignment by topic id)
learns that the topic it knew is gone. A topic whose directories carry no
file (made before logfs wrote them, or by a tool that writes none) gets an
id at its first use, written into each of its partition directories by a
writable store; a read-only store derives one from the name instead, so that
readers of the same directory agree.
"""

from __future__ import annotations

import base64
import logging
import uuid
from pathlib import Path

from .checkpoints import replace_file
from .topics import Catalog

logger = logging.getLogger(__name__)

FILE = "partition.metadata"
VERSION = 0
# Ids Kafka never hands a topic: zero (no topic) and one (its metadata log's).
RESERVED = (uuid.UUID(int=0), uuid.UUID(int=1))
_NAMESPACE = uuid.UUID("6c6f6766-732d-746f-7069-632d69647321")  # for read-only stores


def kafka_string(topic_id: uuid.UUID) -> str:
    """The id as Kafka prints it (``Uuid.toString``)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def parse_kafka_string(text: str) -> uuid.UUID:
    """The id ``kafka_string`` printed.

    Raises:
        ValueError: not 22 characters of URL-safe base64 naming 16 bytes.
    """
    text = text.strip()
    if len(text) != 22:
        raise ValueError(f"{text!r} is not a topic id")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def new_topic_id() -> uuid.UUID:
    """A random id, never a reserved one and never one whose printed form
    starts with ``-`` (Kafka's rule: it would read as a command-line option)."""
    while True:
        topic_id = uuid.uuid4()
        if topic_id not in RESERVED and not kafka_string(topic_id).startswith("-"):
            return topic_id


def read_file(directory: Path) -> uuid.UUID | None:
    """The id in ``directory``'s ``partition.metadata``; None if it has none
    (or an unreadable one, which is logged and replaced)."""
    try:
        lines = (directory / FILE).read_text().splitlines()
        fields = dict(line.split(": ", 1) for line in lines if line.strip())
        if int(fields["version"]) != VERSION:
            raise ValueError(f"version {fields['version']}")
        return parse_kafka_string(fields["topic_id"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, UnicodeDecodeError) as e:
        logger.warning("%s: %s is unreadable (%s)", directory, FILE, e)
        return None


def write_file(directory: Path, topic_id: uuid.UUID) -> None:
    """Replace ``directory``'s ``partition.metadata`` (atomically, durably)."""
    replace_file(directory / FILE, f"version: {VERSION}\ntopic_id: {kafka_string(topic_id)}\n")


class TopicIds:
    """Every topic's id, read from its partition directories at first use and
    kept; a partition added later gets the file at the next use.

    Args:
        data: the data directory.
        catalog: the store's topics and partitions.
        writable: whether missing files may be written.
    """

    def __init__(self, data: Path, catalog: Catalog, writable: bool) -> None:
        self.data = data
        self.catalog = catalog
        self.writable = writable
        self._ids: dict[str, uuid.UUID] = {}
        self._known: dict[str, int] = {}  # topic -> partitions whose file is known to match
        self._names: dict[uuid.UUID, str] = {}

    def id_of(self, topic: str) -> uuid.UUID:
        """The topic's id (the topic exists). A file that cannot be written is
        logged and tried again at the next use; the id stays what it is."""
        partitions = self.catalog.partitions(topic)
        topic_id = self._ids.get(topic)
        if topic_id is not None and self._known.get(topic) == len(partitions):
            return topic_id
        directories = [self.data / f"{topic}-{p}" for p in partitions]
        found = [read_file(d) for d in directories]
        if topic_id is None:
            topic_id = next((i for i in found if i is not None), None)
        if topic_id is None:
            topic_id = new_topic_id() if self.writable else uuid.uuid5(_NAMESPACE, topic)
        self._ids[topic] = topic_id
        self._names[topic_id] = topic
        try:
            for directory, there in zip(directories, found, strict=True):
                if there != topic_id and self.writable:
                    write_file(directory, topic_id)
        except OSError as e:
            logger.warning("%s: cannot write %s: %s", directory, FILE, e)
            return topic_id
        self._known[topic] = len(partitions)
        return topic_id

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        """The topic that has ``topic_id`` now, or None."""
        name = self._names.get(topic_id)
        if name is not None and self._ids.get(name) == topic_id and name in self.catalog:
            return name
        for topic in self.catalog.counts():
            if topic not in self._ids and self.id_of(topic) == topic_id:
                return topic
        return None

    def forget(self, topic: str) -> None:
        """The topic is deleted: a topic created under its name gets a new id."""
        topic_id = self._ids.pop(topic, None)
        self._known.pop(topic, None)
        self._names.pop(topic_id, None)
