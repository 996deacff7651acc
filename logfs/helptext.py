"""The ``logfs`` command's help texts: what each command does, its options and examples."""

DESCRIPTION = (
    "Apache Kafka's log storage as a mountable file system, "
    "and offline tools over its data directories."
)

EPILOG = """examples:
  logfs mount /srv/logfs/data /mnt/logs          mount (returns once the mount is ready)
  echo hello > /mnt/logs/orders/0/append         one record (after mkdir /mnt/logs/orders)
  cat /mnt/logs/orders/0/stream                  every value, one per line
  logfs umount /mnt/logs                         flush, checkpoint and unmount
  logfs describe /srv/logfs/data                 topics, partitions, offsets (offline)

Run 'logfs COMMAND --help' for a command's options and examples.
Documentation: docs/ in the source (mount.md, operations.md, configuration.md)."""

MOUNT_EPILOG = """mount options (-o, comma-separated or repeated):
  ro                          read-only: every change answers EROFS; no lock taken
  allow_other                 let other users use the mount; turns on default_permissions
  default_permissions         let the kernel check the files' owners and modes
  allow_root, auto_unmount, noatime, sync, dirsync, debug
                              passed to FUSE as they are
  uid=N, gid=N                show the tree as owned by this user and group (numbers or names;
                              default: DATA's owner and group)
  umask=NNN                   modes 0777/0666/0444 less this octal mask (default: DATA's modes)
  partitions=N                partitions of a topic made with mkdir (default 1)
  acks=0                      buffered: a write() of an append file returns from the page cache
                              (docs/mount.md)
  io_uring                    FUSE requests over io_uring where the kernel offers it (Linux 6.14
                              and later: echo 1 > /sys/module/fuse/parameters/enable_uring)
  io_uring_spin_us=N          with io_uring: watch the ring N µs for a writer's next line
                              before sleeping (default 20; 0: sleep at once)
  log=PATH                    the detached daemon's log file (default DATA/logfs.log)
  kafka=[HOST:]PORT           also serve Kafka's wire protocol there (no HOST: loopback only;
                              kafka.* options and everything else in docs/kafka.md)
  kafka.ssl.certfile=PEM, kafka.ssl.keyfile=PEM
                              the listener speaks only TLS, with this certificate chain and key
  kafka.sasl.users=FILE       clients authenticate (SASL PLAIN, SCRAM-SHA-256/512);
                              FILE has user:password lines
  metrics=[HOST:]PORT         serve Prometheus's metrics at http://HOST:PORT/metrics (no HOST:
                              loopback only; the list in docs/operations.md)
  mirror.to=kafka://HOST:PORT forward the topics to a Kafka cluster exactly once (mirror.*
                              options, and what it guarantees: docs/operations.md)
  mirror.from=kafka://HOST:PORT
                              copy a Kafka cluster's topics in, byte for byte, read-only
                              here: a follower (docs/operations.md)
  log.retention.check.interval.ms=N          how often retention runs (ms, default 300000)
  log.flush.offset.checkpoint.interval.ms=N  how often checkpoints are written (ms, 60000)
  log.cleaner.backoff.ms=N                   how often the cleaner looks for work (ms, 15000)
  log.cleaner.io.max.bytes.per.second=N      the cleaner's I/O bound (default: none)
  KEY=VALUE                   any topic setting, as the default of every topic without its own:
                              segment.bytes, segment.ms, segment.index.bytes, index.interval.bytes,
                              flush.messages, flush.ms, retention.ms, retention.bytes,
                              max.message.bytes, cleanup.policy, min.cleanable.dirty.ratio,
                              min.compaction.lag.ms, max.compaction.lag.ms, delete.retention.ms,
                              compression.type, message.timestamp.type, parse.key, key.separator

examples:
  logfs mount /srv/logfs/data /mnt/logs
  logfs mount -o allow_other,uid=www-data,umask=027 /srv/logfs/data /mnt/logs
  logfs mount -o partitions=3,flush.ms=200,retention.ms=86400000 /srv/logfs/data /mnt/logs
  logfs mount -f /srv/logfs/data /mnt/logs        stay in the foreground, log to stderr"""

EXAMPLES = {
    "serve": (
        "examples:\n"
        "  logfs serve /srv/logfs/data --listen 9092            loopback only\n"
        "  logfs serve /srv/logfs/data --listen 127.0.0.1:9092 -o partitions=3\n"
        "  logfs serve /srv/logfs/data --listen 0.0.0.0:9093 -o kafka.sasl.users=USERS \\\n"
        "      -o kafka.ssl.certfile=CERT.pem,kafka.ssl.keyfile=KEY.pem   SASL_SSL\n"
        "docs/kafka.md tells what is served."
    ),
    "mirror": (
        "examples:\n"
        "  logfs mirror /srv/logfs/data kafka://kafka-1:9092,kafka-2:9092\n"
        "  logfs mirror /srv/logfs/data kafka://kafka-1:9093 -o mirror.topics='app\\..*' \\\n"
        "      -o mirror.security.protocol=SASL_SSL,mirror.sasl.mechanism=SCRAM-SHA-512 \\\n"
        "      -o mirror.sasl.username=edge,mirror.sasl.password.file=/etc/logfs/secret\n"
        "docs/operations.md tells what a mirror guarantees; the same options, with\n"
        "mirror.to=, make `logfs mount` and `logfs serve` mirror as they run."
    ),
    "umount": "examples:\n  logfs umount /mnt/logs",
    "create": (
        "examples:\n"
        "  logfs create /srv/logfs/data orders --partitions 3\n"
        "  logfs create /srv/logfs/data users --config cleanup.policy=compact "
        "--config parse.key=true"
    ),
    "list": "examples:\n  logfs list /srv/logfs/data",
    "describe": (
        "examples:\n  logfs describe /srv/logfs/data\n"
        "  logfs describe /srv/logfs/data orders --json"
    ),
    "dump": (
        "examples:\n"
        "  logfs dump /srv/logfs/data/orders-0/00000000000000000000.log --print-data-log\n"
        "  logfs dump /srv/logfs/data/orders-0/00000000000000000000.index --index-sanity-check"
    ),
    "compact": (
        "examples:\n  logfs compact /srv/logfs/data\n"
        "  logfs compact /srv/logfs/data users --io-max-bytes-per-second 50000000"
    ),
    "check": (
        "examples:\n  logfs check /srv/logfs/data\n"
        "  logfs check /srv/logfs/data --repair     truncate at the first bad batch, "
        "rebuild indexes"
    ),
}

DATA_HELP = "the data directory (Kafka's log dir layout: <topic>-<partition>/ and checkpoints)"
