"""The ``logfs`` command: mount, unmount and offline tools over a data dir.

Exit codes: 0 success, 1 a problem found or an operation failed (the reason
on one line of stderr), 2 a usage error (argparse's convention).
"""

from __future__ import annotations

import argparse
import json
import sys

from .core.check import check, dump
from .core.cleaner import Throttle, clean_store
from .core.config import InvalidConfigError, read_properties
from .core.errors import LogfsError
from .core.store import Store


def _key_values(text: str) -> dict[str, str]:
    """``a=1,b=2`` or repeated ``-o a=1 -o b=2`` into a dict; bare words map to ''."""
    options = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        options[key.strip()] = value
    return options


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


def cmd_describe(args) -> int:
    with Store(args.data, read_only=True) as store:
        topics = [args.topic] if args.topic else list(store.topics())
        out = []
        for topic in topics:
            partitions = []
            for p in store.partitions(topic):
                log = store.log(topic, p)
                partitions.append(
                    {
                        "partition": p,
                        "log_start_offset": log.log_start_offset,
                        "next_offset": log.next_offset,
                        "recovery_point": log.recovery_point,
                        "segments": len(log.segments),
                        "size_bytes": log.size_bytes,
                    }
                )
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
    for line in dump(
        args.files, print_data=args.print_data_log, verify_index=args.index_sanity_check
    ):
        print(line)
    return 0


def cmd_check(args) -> int:
    problems = check(args.data, repair=args.repair)
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
        for topic in topics:  # one topic at a time, so progress shows as it goes
            for name, partition, stats in clean_store(
                store, [topic], force=True, throttle=throttle
            ):
                cleaned += 1
                print(
                    f"{name}-{partition}: {stats.segments_before} segment(s) -> "
                    f"{stats.segments_after}, {stats.records_read} records -> "
                    f"{stats.records_kept}, {stats.bytes_read} -> {stats.bytes_written} bytes "
                    f"in {stats.seconds:.2f} s",
                    flush=True,
                )
    print(f"compacted {cleaned} partition(s)")
    return 0


def cmd_mount(args) -> int:
    from .mount.daemon import mount

    options: dict[str, str] = {}
    for item in args.options or []:
        options.update(_key_values(item))
    return mount(args.data, args.mountpoint, options, foreground=args.foreground)


def cmd_umount(args) -> int:
    from .mount.daemon import umount

    return umount(args.mountpoint)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="logfs", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func, help: str, *positionals: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        for positional in positionals:
            p.add_argument(positional)
        p.set_defaults(func=func)
        return p

    p = command("mount", cmd_mount, "mount a data directory", "data", "mountpoint")
    p.add_argument("-f", "--foreground", action="store_true", help="stay attached, log to stderr")
    p.add_argument("-o", dest="options", action="append", metavar="KEY=VALUE,...",
                   help="mount options and topic-config defaults")  # fmt: skip

    command("umount", cmd_umount, "flush, checkpoint and unmount", "mountpoint")

    p = command("create", cmd_create, "create a topic in a data directory", "data", "topic")
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic setting")

    command("list", cmd_list, "list topics", "data")

    p = command("describe", cmd_describe, "partitions, offsets and settings of topics", "data")
    p.add_argument("topic", nargs="?")
    p.add_argument("--json", action="store_true")

    p = command("dump", cmd_dump, "print segment files like kafka-dump-log")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--print-data-log", action="store_true", help="also print each record")
    p.add_argument("--index-sanity-check", action="store_true", help="check index entries")

    p = command("compact", cmd_compact, "clean compacted topics now (offline)", "data")
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="default: every compacted topic")
    p.add_argument("--io-max-bytes-per-second", type=float, default=0, metavar="N",
                   help="bound the bytes read and written per second (0: none)")  # fmt: skip

    p = command("check", cmd_check, "validate a data directory (offline)", "data")
    p.add_argument("--repair", action="store_true", help="truncate bad tails, rebuild indexes")
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
