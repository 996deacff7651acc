"""Fetch: whole batches from the segment files, as Kafka's broker sends them.

For each partition asked for, the segment's bytes from the batch holding the
fetch offset on, up to the partition's ``partition_max_bytes`` and what is
left of the request's ``max_bytes``, cut where the limit ends, as Kafka's
ReplicaManager does (KIP-74): only the first partition with data gets at
least one whole batch, so a batch larger than the limits still gets through;
a later partition's last batch may be partial, which Kafka's clients drop.
The record bytes never enter Python: the response carries a file region per
partition and the connection sends it with ``sendfile`` (sending.py); the
frame around them is written field by field for versions 4 to 12 (fetchwire.py),
by kio's writer otherwise.

Long poll: while fewer than ``min_bytes`` are ready and ``max_wait_ms`` has
not passed, the request waits for an append (through this listener or, polled
every few milliseconds, through the mount). The high watermark is the log end
offset (one replica); the last stable offset is the partition's (the first
offset of its oldest open transaction). With isolation level 1
(``read_committed``) no batch at or past the last stable offset is sent, and the
answer lists the aborted transactions of the range (the segments' ``.txnindex``),
which the client leaves out, as Kafka's broker answers.
"""

from __future__ import annotations

import os

import trio

from ..core.errors import LogfsError
from . import fetchwire
from .access import READ, require
from .codes import NO_THROTTLE, error_code
from .protocol import FETCH, ErrorCode, Region, Reply, make, schema

POLL_SECONDS = 0.01  # appends through the mount wake nobody: look again this often


READ_COMMITTED = 1


def _gather(broker, client, topics, max_bytes: int, committed: bool) -> tuple[list, int, bool]:
    """Per topic, per partition: (index, error, log, region); the bytes found;
    whether any partition has an error (answered at once, as Kafka does).

    Kafka's ReplicaManager sizes them: each partition gets at most its
    ``partition_max_bytes`` and what is left of ``max_bytes``, cut wherever that
    ends (a partial last batch); only the first partition with data gets at
    least one whole batch, however large."""
    found, total, failed, min_one = [], 0, False, True
    for topic in topics:
        parts = []
        for p in topic.partitions:
            log, region, code = None, None, ErrorCode.none
            try:
                require(broker, client, READ, topic.topic)
                log = broker.store.log(topic.topic, p.partition)
                limit = max(0, min(p.partition_max_bytes, max_bytes - total))
                end = log.last_stable_offset if committed else None
                located = log.file_region(p.fetch_offset, limit, end, min_one_batch=min_one)
                region = Region(*located) if located else None
            except (LogfsError, OSError) as e:
                code = error_code(e)
                failed = True
            if region is not None:
                total += region.size
                min_one = False
            parts.append((p.partition, code, log, region))
        found.append((topic.topic, parts))
    return found, total, failed


async def fetch(broker, request, advertised):
    body = request.body
    max_bytes = body.max_bytes if hasattr(body, "max_bytes") else 2**31 - 1
    deadline = trio.current_time() + max(0.0, body.max_wait.total_seconds())
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    while True:
        found, total, failed = _gather(broker, advertised, body.topics, max_bytes, committed)
        if failed or total >= body.min_bytes or trio.current_time() >= deadline:
            break
        # One reading of the clock: the deadline may have passed since the look above.
        with trio.move_on_at(min(deadline, trio.current_time() + POLL_SECONDS)):
            await broker.appended.wait()
    reply = Reply(None)
    fast = fetchwire.FIRST <= request.version <= fetchwire.LAST
    topics = []
    offsets = {}  # where each partition's aborted transactions are looked for from
    if committed:
        offsets = {
            (t.topic, p.partition): p.fetch_offset for t in body.topics for p in t.partitions
        }
    for name, parts in found:
        partitions = []
        for index, code, log, region in parts:
            if region is not None:
                # The segment may be closed by retention while the frame is sent.
                region = reply.keep(region._replace(fd=os.dup(region.fd)))
                if broker.metrics is not None:
                    broker.metrics.fetched(name, region.size)
            end = log.next_offset if log is not None else -1
            stable = log.last_stable_offset if log is not None else -1
            start = log.log_start_offset if log is not None else -1
            aborted = None
            if committed and log is not None:
                aborted = [
                    (pid, first)
                    for pid, first, *_ in log.aborted_transactions(offsets[(name, index)], stable)
                ]
            partitions.append(
                fetchwire.Partition(index, code.value, end, stable, start, aborted, region)
            )
        topics.append((name, partitions))
    if fast:
        reply.parts = fetchwire.encode(request.version, request.correlation_id, topics)
    else:
        reply.body = _kio_body(schema(FETCH, request.version), reply, topics)
    return reply


def _kio_body(m, reply: Reply, topics: list):
    """The response as kio's message, for the versions fetchwire.py does not write."""
    responses = []
    for name, partitions in topics:
        data = tuple(
            make(
                m.PartitionData,
                partition_index=p.index,
                error_code=ErrorCode(p.error_code),
                high_watermark=p.high_watermark,
                last_stable_offset=p.last_stable_offset,
                log_start_offset=p.log_start_offset,
                aborted_transactions=None
                if p.aborted is None
                else tuple(
                    make(m.AbortedTransaction, producer_id=pid, first_offset=first)
                    for pid, first in p.aborted
                ),
                preferred_read_replica=-1,
                records=reply.records(p.region),
            )
            for p in partitions
        )
        responses.append(make(m.FetchableTopicResponse, topic=name, partitions=data))
    return make(
        m.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(responses),
    )
