#!/usr/bin/env bash
# Install what logfs needs, mount a demo store and show what to try.
#
#   bash mount_scripts/demo.sh           (as root; or: sudo bash mount_scripts/demo.sh)
#
# The demo store lives inside the checkout: data dir ./demo/data, mount point
# ./demo/mnt. It holds a topic `orders` with three partitions and a few records
# in partition 0. Run under sudo, everything after the install (the data dir,
# the mount, the FUSE daemon) belongs to the user who ran sudo, so that user's
# own shell can read and write the mount afterwards. Safe to run again: an
# existing demo is left as it is, a live mount is reused, a dead one replaced.
#
# Stop it with:  .venv/bin/logfs umount demo/mnt
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
DATA=demo/data
MNT=demo/mnt
TOPIC=orders
LOGFS=.venv/bin/logfs

say() { printf 'demo: %s\n' "$*"; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

bash mount_scripts/install.sh

# A FUSE mount is private to the user who mounted it. Under sudo, mount as the
# user who called sudo when they can (they own the checkout and may open
# /dev/fuse); otherwise mount as root and open the mount to other users.
RUN_AS=
MOUNT_OPTS=()
if ((EUID == 0)) && [[ -n ${SUDO_USER:-} && $SUDO_USER != root ]]; then
    if runuser -u "$SUDO_USER" -- test -w "$ROOT" -a -r /dev/fuse -a -w /dev/fuse; then
        RUN_AS=$SUDO_USER
    else
        MOUNT_OPTS=(-o allow_other)
    fi
fi
as_user() {
    if [[ -n $RUN_AS ]]; then
        runuser -u "$RUN_AS" -- "$@"
    else
        "$@"
    fi
}

# Run a command, keeping its output; on failure report its last line and return 1.
err=$(mktemp -t logfs-demo.XXXXXX)
trap 'rm -f "$err"' EXIT
attempt() {
    if as_user "$@" >"$err" 2>&1; then
        return 0
    fi
    say "'${*}' failed: $(grep -v '^\s*$' "$err" | tail -n 1)"
    return 1
}

is_mounted() { grep -qs " $ROOT/$MNT fuse" /proc/mounts; }

if [[ ! -e /dev/fuse ]]; then
    die "/dev/fuse is missing: load the module (modprobe fuse) or, in a container, pass the device (--device /dev/fuse --cap-add SYS_ADMIN)"
fi

if is_mounted && ! stat "$MNT/." >/dev/null 2>&1; then
    # A daemon that died leaves "Transport endpoint is not connected" behind.
    say "$MNT is a dead mount; unmounting it"
    fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
fi

as_user mkdir -p "$DATA" "$MNT"
if [[ -n $RUN_AS ]] && ! is_mounted; then
    chown -R "$RUN_AS:" demo  # left by an earlier run as root
fi

created=0
if is_mounted; then
    say "$MNT is already mounted; reusing it"
    if [[ ! -d $MNT/$TOPIC ]]; then
        attempt mkdir "$MNT/$TOPIC" || die "cannot create topic $TOPIC through the mount"
        created=1
    fi
else
    if [[ ! -d $DATA/$TOPIC-0 ]]; then
        say "creating topic $TOPIC (3 partitions) in $DATA"
        attempt "$LOGFS" create "$DATA" "$TOPIC" --partitions 3 \
            || die "cannot create the demo topic (is 'logfs create' in this checkout yet?)"
        created=1
    fi
    say "mounting $DATA on $MNT"
    if ! attempt timeout 60 "$LOGFS" mount "$DATA" "$MNT" "${MOUNT_OPTS[@]}"; then
        say "logfs mount failed, so there is no demo mount to try."
        say "the data dir $DATA is ready; run this script again once 'logfs mount' works here."
        exit 1
    fi
fi

if ((created)); then
    say "appending a few records to $TOPIC partition 0"
    # shellcheck disable=SC2016  # $@ and $0 belong to the inner sh
    as_user sh -c 'printf "%s\n" "$@" >> "$0"' "$MNT/$TOPIC/0/append" \
        '{"order": 1001, "item": "espresso", "qty": 2}' \
        '{"order": 1002, "item": "croissant", "qty": 1}' \
        '{"order": 1003, "item": "flat white", "qty": 3}' \
        || die "appending through the mount failed"
fi

say "cat $MNT/$TOPIC/0/offset/0 -> $(as_user timeout 5 cat "$MNT/$TOPIC/0/offset/0" 2>&1 || true)"

hint() { printf '  %-52s # %s\n' "$1" "$2"; }
printf '\nlogfs is mounted on %s (data in %s). Try:\n\n' "$ROOT/$MNT" "$ROOT/$DATA"
printf '  cd %s\n' "$ROOT"
hint "ls $MNT/$TOPIC/0" "append, offset/, stream, time/, segments/, ..."
hint "echo 'order 1004: tea' >> $MNT/$TOPIC/0/append" "one line, one record"
hint "cat $MNT/$TOPIC/0/offset/0" "exactly the value of record 0"
hint "tail -f $MNT/$TOPIC/0/stream" "every record, one per line; grows (Ctrl-C)"
hint "ls -l $MNT/$TOPIC/0/segments/" "Kafka's own .log, .index, .timeindex"
hint ".venv/bin/logfs umount $MNT" "flush, checkpoint, unmount"
echo
