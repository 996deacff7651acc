"""The ``logfs`` command: mount, unmount and offline tools over a data dir.

Exit codes: 0 success, 1 a problem found or an operation failed (the reason
on one line of stderr), 2 a usage error (argparse's convention).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from . import __version__
from .core.config import InvalidConfigError, read_properties
from .core.errors import LogfsError
from .core.log import Store, Throttle, clean_store
from .core.tools import check, dump
from .helptext import DATA_HELP, DESCRIPTION, EPILOG, EXAMPLES, MOUNT_EPILOG
from .progress import Progress


def _key_values(text: str) -> dict[str, str]:
    """``a=1,b=2`` into a dict, bare words mapping to ''; a bare ``HOST:PORT`` goes on the
    value before it, so a list of servers reads as written (``mirror.to=kafka://a:1,b:2``)."""
    options: dict[str, str] = {}
    last = ""
    for item in filter(None, text.split(",")):
        if "=" not in item and ":" in item and last:  # another server of the last key
            options[last] += "," + item
        else:
            name, _, value = item.partition("=")
            last = name.strip()
            options[last] = value
    return options


def _options(args) -> dict[str, str]:
    """Every ``-o`` given, later ones winning."""
    return {k: v for item in args.options or [] for k, v in _key_values(item).items()}


def _configs(items: list[str]) -> dict[str, str]:
    configs = {}
    for item in items or []:
        if "=" not in item:
            raise InvalidConfigError(f"--config takes key=value, got {item!r}")
        configs.update(read_properties(item))
    return configs


def cmd_create(args) -> int:
    with Store(args.data) as store:
        store.create_topic(args.topic, args.partitions, _configs(args.config))
    print(f"Created topic {args.topic} with {args.partitions} partition(s).")
    return 0


def cmd_list(args) -> int:
    with Store(args.data, read_only=True) as store:
        for topic in store.topics():
            print(topic)
    return 0


def _describe_groups(args) -> int:
    from .groups import describe_groups, group_lines  # trio loads only when asked for

    with Store(args.data, read_only=True) as store:
        groups = describe_groups(store)
    if args.topic:  # only the groups that committed offsets for TOPIC, and only those
        for g in groups:
            g["offsets"] = [o for o in g["offsets"] if o["topic"] == args.topic]
        groups = [g for g in groups if g["offsets"]]
    text = json.dumps(groups, indent=2) if args.json else "\n".join(group_lines(groups))
    if text:  # no groups: no line
        print(text)
    return 0


def cmd_describe(args) -> int:
    if args.groups:
        return _describe_groups(args)
    if args.mirrors:
        from .mirror import describe_lines, read_statuses

        statuses = read_statuses(args.data)
        print(json.dumps(statuses, indent=2) if args.json else "\n".join(describe_lines(statuses)))
        return 0
    with Store(args.data, read_only=True) as store:
        topics = [args.topic] if args.topic else list(store.topics())
        out = []
        for topic in topics:
            partitions = []
            for p in store.partitions(topic):
                log = store.log(topic, p)
                partitions.append({
                    "partition": p, "log_start_offset": log.log_start_offset,
                    "next_offset": log.next_offset, "recovery_point": log.recovery_point,
                    "segments": len(log.segments), "size_bytes": log.size_bytes,
                })  # fmt: skip
            out.append(
                {"topic": topic, "config": store.topic_overrides(topic), "partitions": partitions}
            )
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for topic in out:
        overrides = ",".join(f"{k}={v}" for k, v in sorted(topic["config"].items()))
        print(
            f"Topic: {topic['topic']}\tPartitionCount: {len(topic['partitions'])}\t"
            f"Configs: {overrides}"
        )
        for p in topic["partitions"]:
            print(
                f"\tTopic: {topic['topic']}\tPartition: {p['partition']}\t"
                f"LogStartOffset: {p['log_start_offset']}\tLogEndOffset: {p['next_offset']}\t"
                f"RecoveryPoint: {p['recovery_point']}\tSegments: {p['segments']}\t"
                f"Size: {p['size_bytes']}"
            )
    return 0


def cmd_dump(args) -> int:
    # A bar for the bytes of the .log files walked: stdout is the dump, stderr the bar.
    with Progress("dump", None, "B", quiet=args.quiet) as progress:
        for line in dump(
            args.files,
            print_data=args.print_data_log,
            verify_index=args.index_sanity_check,
            progress=progress.report,
        ):
            print(line)
    return 0


def cmd_check(args) -> int:
    what = f"{'repair' if args.repair else 'check'} {args.data}"
    with Progress(what, None, quiet=args.quiet) as progress:
        problems = check(args.data, repair=args.repair, progress=progress.report)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) found", file=sys.stderr)
        return 1
    print("repaired: no problems remain" if args.repair else "no problems found")
    return 0


def cmd_compact(args) -> int:
    with Store(args.data) as store:
        for topic in args.topics:
            if not store.topic_config(topic).compact:
                raise LogfsError(f"{topic}: cleanup.policy is not compact")
        topics = args.topics or [t for t in store.topics() if store.topic_config(t).compact]
        throttle = Throttle(args.io_max_bytes_per_second)
        cleaned = 0
        progress = Progress(f"compact {args.data}", None, quiet=args.quiet)
        total = sum(len(store.partitions(t)) for t in topics)
        for topic in topics:  # one topic at a time, so each shows as it is done
            before = progress.done

            def report(done: int, _: int, note: str, before: int = before) -> None:
                progress.report(before + done, total, note)

            for name, partition, stats in clean_store(
                store, [topic], force=True, throttle=throttle, progress=report
            ):
                cleaned += 1
                print(
                    f"{name}-{partition}: {stats.segments_before} segment(s) -> "
                    f"{stats.segments_after}, {stats.records_read} records -> "
                    f"{stats.records_kept}, {stats.bytes_read} -> {stats.bytes_written} bytes "
                    f"in {stats.seconds:.2f} s",
                    flush=True,
                )
        progress.close()
    print(f"compacted {cleaned} partition(s)")
    return 0


def cmd_mount(args) -> int:
    from .daemon import mount

    options = _options(args)
    return mount(args.data, args.mountpoint, options, foreground=args.foreground, quiet=args.quiet)


def cmd_serve(args) -> int:
    from .daemon import serve

    return serve(args.data, args.listen, _options(args))


def cmd_mirror(args) -> int:
    from .mirror import mirror_main

    return mirror_main(args.data, args.to, _options(args))


def cmd_umount(args) -> int:
    from .daemon import umount

    return umount(args.mountpoint)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logfs",
        description=textwrap.fill(DESCRIPTION, 79),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"logfs {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func, summary: str, description: str) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=summary,
            description=textwrap.fill(description, 79),
            epilog=MOUNT_EPILOG if name == "mount" else EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(func=func)
        return p

    p = command(
        "mount",
        cmd_mount,
        "mount a data directory",
        "Mount DATA on MOUNTPOINT: topics and partitions become directories, appends "
        "become records. Returns once the mount is ready; the daemon runs on in the "
        "background (-f: in the foreground).",
    )
    p.add_argument("data", metavar="DATA", help=DATA_HELP + "; created if missing")
    p.add_argument("mountpoint", metavar="MOUNTPOINT", help="an existing empty directory")
    p.add_argument("-f", "--foreground", action="store_true", help="stay attached, log to stderr")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress of the recovery on stderr while waiting")  # fmt: skip
    p.add_argument("-o", dest="options", action="append", metavar="KEY=VALUE,...",
                   help="mount options and topic-setting defaults (listed below)")  # fmt: skip

    p = command(
        "umount",
        cmd_umount,
        "flush, checkpoint and unmount",
        "Unmount a logfs mount cleanly: held partial lines become records, every "
        "partition is flushed and the checkpoints are written.",
    )
    p.add_argument("mountpoint", metavar="MOUNTPOINT", help="where DATA is mounted")

    p = command(
        "serve",
        cmd_serve,
        "serve Kafka's protocol over a data directory, without FUSE",
        "Serve Kafka's wire protocol over DATA without mounting it: Kafka's clients "
        "produce, fetch, list offsets and manage topics. Holds DATA's lock like a mount "
        "and runs until SIGINT or SIGTERM.",
    )
    p.add_argument("data", metavar="DATA", help=DATA_HELP + "; created if missing")
    p.add_argument("--listen", required=True, metavar="[HOST:]PORT",
                   help="where to listen (without HOST: loopback only)")  # fmt: skip
    p.add_argument("-o", dest="options", action="append", metavar="KEY=VALUE,...",
                   help="mount options that apply (partitions=, ro, topic defaults, "
                        "kafka.*: bounds, SASL, TLS)")  # fmt: skip

    p = command(
        "mirror",
        cmd_mirror,
        "forward a data directory's topics to a Kafka cluster, exactly once",
        "Forward each partition of DATA's topics, in order, to the same topic and partition "
        "of the Kafka cluster at URL, in transactions that also commit the mirror's position "
        "there: a read_committed reader sees every record once, across restarts. Reads DATA "
        "beside its daemon; runs until SIGINT or SIGTERM.",
    )
    p.add_argument("data", metavar="DATA", help=DATA_HELP)
    p.add_argument("to", metavar="URL", help="kafka://HOST:PORT[,HOST:PORT...]")
    p.add_argument("-o", dest="options", action="append", metavar="KEY=VALUE,...",
                   help="mirror.topics, mirror.id, mirror.security.protocol, mirror.sasl.*, "
                        "mirror.ssl.*, mirror.timeout.ms (docs/operations.md)")  # fmt: skip

    p = command(
        "create",
        cmd_create,
        "create a topic in a data directory",
        "Create a topic in DATA (offline: DATA must not be mounted; mounted, use mkdir).",
    )
    p.add_argument("data", metavar="DATA", help=DATA_HELP)
    p.add_argument("topic", metavar="TOPIC", help="its name: letters, digits, '.', '_', '-'")
    p.add_argument("--partitions", type=int, default=1, help="how many (default 1)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="a topic setting (repeat for several; docs/configuration.md)")  # fmt: skip

    p = command("list", cmd_list, "list topics", "Print the topics of DATA, one per line.")
    p.add_argument("data", metavar="DATA", help=DATA_HELP)

    p = command(
        "describe",
        cmd_describe,
        "partitions, offsets and settings of topics",
        "Print each partition's log start and end offsets, recovery point, segments and "
        "size, and each topic's own settings, like kafka-topics --describe.",
    )
    p.add_argument("data", metavar="DATA", help=DATA_HELP)
    p.add_argument("topic", metavar="TOPIC", nargs="?", help="only this topic (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--groups", action="store_true",
                   help="consumer groups instead: members, committed offsets and lag, "
                        "from __consumer_offsets (docs/kafka.md)")  # fmt: skip
    p.add_argument("--mirrors", action="store_true",
                   help="mirrors instead: position, lag and errors per partition, from their "
                        "status files (docs/operations.md)")  # fmt: skip

    p = command(
        "dump",
        cmd_dump,
        "print segment files like kafka-dump-log",
        "Print the batches of .log files (offsets, positions, timestamps, sizes, codecs, "
        "CRCs and whether they are valid; with --print-data-log each record and each "
        "transaction marker) and the entries of .index, .timeindex, .txnindex and "
        ".snapshot files, as kafka-dump-log prints them.",
    )
    p.add_argument(
        "files", nargs="+", metavar="FILE",
        help="a .log, .index, .timeindex, .txnindex or .snapshot file",
    )  # fmt: skip
    p.add_argument("--print-data-log", action="store_true", help="also print each record")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="check that each index entry points at the batch it names")  # fmt: skip
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress on stderr (a bar on a terminal, else lines)")  # fmt: skip

    p = command(
        "compact",
        cmd_compact,
        "clean compacted topics now (offline)",
        "Run the log cleaner on DATA's compacted topics (cleanup.policy=compact) now, "
        "whatever their dirty ratio; prints a line per partition. DATA must not be "
        "mounted (a mount cleans by itself).",
    )
    p.add_argument("data", metavar="DATA", help=DATA_HELP)
    p.add_argument(
        "topics", nargs="*", metavar="TOPIC", help="only these (default: every compacted topic)"
    )
    p.add_argument("--io-max-bytes-per-second", type=float, default=0, metavar="N",
                   help="bound the bytes read and written per second (0: none)")  # fmt: skip
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress on stderr (a bar on a terminal, else lines)")  # fmt: skip

    p = command(
        "check",
        cmd_check,
        "validate a data directory (offline)",
        "Validate every batch (header, size, CRC, offsets) and index of DATA and print "
        "each problem; exit 1 if there is any. While DATA is mounted, also report the "
        "partitions the mount holds offline after a disk error.",
    )
    p.add_argument("data", metavar="DATA", help=DATA_HELP)
    p.add_argument("--repair", action="store_true",
                   help="truncate at the first bad batch, rebuild the indexes, re-validate "
                   "what follows each recovery point (DATA must not be mounted)")  # fmt: skip
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress on stderr (a bar on a terminal, else lines)")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except LogfsError as e:
        print(f"logfs {args.command}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"logfs {args.command}: {e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
