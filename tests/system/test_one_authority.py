"""One authority for every face, cell by cell.

Three real users are made with ``useradd`` (removed at the end): the owner of
the topics, a member of the owner's group, and another user; with root they
are the identities. Every operation on a topic and on a consumer group is
done on each face as each identity — the mount's file operations through the
kernel (``allow_other``: ``default_permissions`` checks), the listener's by
real Kafka clients run as that user (kcat, confluent-kafka, kafka-python),
who are known by the owner of their loopback socket — and each answer is
compared with the table POSIX's rules give for the topic's mode (`expected`,
written here from the rules, not from logfs's code). The mount and the
listener must both match it, so they agree cell by cell.

Then the daemon is stopped and mounted again with a SASL listener: the
owners and modes are still there, DATA's partition directories keep others
out on disk, and principals are the local users of their names (the topic's
owner over SASL may write and alter its topic), an unmapped principal gets
what ``nobody`` gets on the mount, whatever user runs the client.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from kafka_helpers import call, mounted
from kio.index import load_request_schema
from kio.schema.create_acls.v3.request import AclCreation
from kio.schema.errors import ErrorCode

pytestmark = [pytest.mark.mount, pytest.mark.timeout(1200)]

HELPER = Path(__file__).resolve().parents[1] / "helpers" / "authority_client.py"
MODES = {"priv": 0o700, "grp": 0o750, "pub": 0o755, "team": 0o770}
R, W, X = 4, 2, 1
DENIED_WORDS = ("Permission denied", "Operation not permitted", "Directory not empty")
WHO = ("owner", "member", "other", "root")


# ---------------------------------------------------------------- the rules, by hand


def bits(mode: int, who: str) -> int:
    """The permission bits of ``mode`` that apply to ``who`` (root: all)."""
    return {"owner": mode >> 6, "member": mode >> 3, "other": mode, "root": 7}[who] & 7


# topic operation -> the bits it takes on the topic's directory (its files show
# the topic's mode: reading a file takes r, writing w, reaching it x)
TOPIC_NEEDS = {
    "describe": R,  # ls MNT/t
    "read": R | X,  # cat MNT/t/0/stream
    "write": W | X,  # echo >> MNT/t/0/append
    "describe_configs": R | X,  # cat MNT/t/config
    "alter_configs": W | X,  # echo >> MNT/t/config
    "create_partitions": W | X,  # mkdir MNT/t/<n>
}


def expected(op: str, mode: int, who: str) -> str:
    need = TOPIC_NEEDS[op]
    return "ok" if bits(mode, who) & need == need else "denied"


# ---------------------------------------------------------------- users and runs


@pytest.fixture(scope="module")
def people():
    tag = os.getpid() % 100000
    names = {"owner": f"lfao{tag}", "member": f"lfam{tag}", "other": f"lfax{tag}"}
    made = []
    try:
        for name in names.values():
            subprocess.run(
                ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "-U", name],
                check=True,
                capture_output=True,
            )
            made.append(name)
        owner_group = names["owner"]
        subprocess.run(["usermod", "-aG", owner_group, names["member"]], check=True)
        users = {who: pwd.getpwnam(name) for who, name in names.items()}
        users["root"] = pwd.getpwuid(0)
        assert names["member"] in grp.getgrnam(owner_group).gr_mem
        yield users
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)
            subprocess.run(["groupdel", name], capture_output=True)


def as_user(user, cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``cmd`` run as ``user`` with its groups (root: as it is)."""
    if user.pw_uid != 0:
        cmd = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", *cmd]
    return subprocess.run(
        cmd, capture_output=True, text=True, errors="replace", timeout=120, **kwargs
    )


def on_mount(user, script: str, mnt: Path) -> str:
    done = as_user(user, ["bash", "-c", f"umask 022; {script}"], env={**os.environ, "M": str(mnt)})
    if done.returncode == 0:
        return "ok"
    if any(word in done.stderr for word in DENIED_WORDS):
        return "denied"
    return f"error {done.stderr.strip()[:200]}"


def by_client(user, bootstrap: str, *args: str, sasl: tuple[str, str] | None = None) -> str:
    cmd = [sys.executable, str(HELPER), bootstrap, *args]
    if sasl:
        cmd += ["--sasl", *sasl]
    done = as_user(user, cmd)
    return done.stdout.strip() or f"error {done.stderr.strip()[-300:]}"


def kcat(user, bootstrap: str, *args: str, stdin: str | None = None, sasl=None) -> str:
    """kcat as ``user``: ok, denied (an authorization failure) or the error."""
    cmd = ["kcat", "-b", bootstrap, "-m", "15", *args]
    if sasl:
        cmd += ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN"]
        cmd += ["-X", f"sasl.username={sasl[0]}", "-X", f"sasl.password={sasl[1]}"]
    done = as_user(user, cmd, input=stdin)
    text = (done.stdout + done.stderr).lower()
    if "authorization failed" in text:
        return "denied"
    return "ok" if done.returncode == 0 else f"error {text.strip()[:200]}"


def topic_on_kafka(user, bootstrap: str, op: str, topic: str, mnt: Path, sasl=None) -> str:
    if op == "read":
        return kcat(user, bootstrap, "-C", "-t", topic, "-e", "-o", "beginning", "-q", sasl=sasl)
    if op == "write":
        return kcat(user, bootstrap, "-P", "-t", topic, stdin="by kafka\n", sasl=sasl)
    arg = []
    if op == "create_partitions":
        arg = [str(partitions(mnt, topic) + 1)]
    return by_client(user, bootstrap, op, topic, *arg, sasl=sasl)


def topic_on_mount(user, op: str, topic: str, mnt: Path) -> str:
    t = f'"$M/{topic}"'
    script = {
        "describe": f"ls {t} > /dev/null",
        "read": f"cat {t}/0/stream > /dev/null",
        "write": f"echo by-mount >> {t}/0/append",
        "describe_configs": f"cat {t}/config > /dev/null",
        "alter_configs": f"echo retention.ms=86400000 >> {t}/config",
        "create_partitions": f"mkdir {t}/{partitions(mnt, topic)}",
    }[op]
    return on_mount(user, script, mnt)


def partitions(mnt: Path, topic: str) -> int:
    return sum(1 for p in (mnt / topic).iterdir() if p.name.isdigit())


@pytest.fixture
def place():
    root = Path(tempfile.mkdtemp(prefix="logfs-authority-"))
    root.chmod(0o755)
    (root / "mnt").mkdir()
    data = root / "data"
    data.mkdir()
    data.chmod(0o1777)  # shared as /tmp is: anyone makes topics, only owners remove them
    yield root
    shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- the table


def test_the_mount_and_the_listener_agree_cell_by_cell(people, place):
    data, mnt = place / "data", place / "mnt"
    owner = people["owner"]
    wrong: list[str] = []

    def cell(what: str, want: str, mount: str | None, kafka: str | None) -> None:
        for face, got in (("mount", mount), ("kafka", kafka)):
            if got is not None and got != want:
                wrong.append(f"{what} on the {face}: {got}, expected {want}")

    with mounted(data, mnt, "allow_other") as (daemon, bootstrap):
        for topic, mode in MODES.items():
            made = on_mount(owner, f'mkdir -m {mode:o} "$M/{topic}"', mnt)
            assert made == "ok", made
            # a record to read, and a directory on disk that is not the owner's
            assert on_mount(owner, f'echo first >> "$M/{topic}/0/append"', mnt) == "ok"
            st = os.stat(mnt / topic)
            assert (st.st_uid, st.st_mode & 0o7777) == (owner.pw_uid, mode)

        # every topic operation, every identity, both faces
        for op in TOPIC_NEEDS:
            for topic, mode in MODES.items():
                for who in WHO:
                    user = people[who]
                    cell(
                        f"{op} {topic} ({mode:04o}) as {who}",
                        expected(op, mode, who),
                        topic_on_mount(user, op, topic, mnt),
                        topic_on_kafka(user, bootstrap, op, topic, mnt),
                    )

        # creating: anyone may in a 1777 root, and the topic is its creator's on both faces
        for who in WHO:
            user = people[who]
            cell(
                f"create as {who}",
                "ok",
                on_mount(user, f'mkdir "$M/new-{who}-m"', mnt),
                by_client(user, bootstrap, "create", f"new-{who}-k"),
            )
            for face in "mk":
                st = os.stat(mnt / f"new-{who}-{face}")
                if (st.st_uid, st.st_mode & 0o777) != (user.pw_uid, 0o755):
                    wrong.append(f"new-{who}-{face}: uid {st.st_uid} mode {st.st_mode:o}")

        # deleting: the sticky root keeps others from removing the owner's topic,
        # even one whose own mode is 0777
        for who in WHO:
            for face in "mk":
                topic = f"del-{who}-{face}"
                assert on_mount(owner, f'mkdir -m 777 "$M/{topic}"', mnt) == "ok"
                assert on_mount(owner, f'echo x >> "$M/{topic}/0/append"', mnt) == "ok"
            user = people[who]
            cell(
                f"delete as {who}",
                "ok" if who in ("owner", "root") else "denied",
                on_mount(user, f'rmdir "$M/del-{who}-m"', mnt),
                by_client(user, bootstrap, "delete", f"del-{who}-k"),
            )

        # consumer groups: the one who makes a group owns it (0644)
        assert on_mount(owner, 'echo 0 > "$M/pub/0/groups/g1"', mnt) == "ok"
        assert by_client(owner, bootstrap, "commit", "g2", "pub:0") == "ok"
        assert on_mount(owner, 'echo 0 > "$M/pub/0/groups/g3"', mnt) == "ok"
        assert on_mount(owner, 'chmod 600 "$M/pub/0/groups/g3"', mnt) == "ok"
        st = os.stat(mnt / "pub/0/groups/g2")  # made over Kafka, shown on the mount
        assert (st.st_uid, st.st_mode & 0o777) == (owner.pw_uid, 0o644)
        for who in WHO:
            user = people[who]
            mine = "ok" if who in ("owner", "root") else "denied"
            for group in ("g1", "g2"):
                cell(
                    f"commit to {group} as {who}",
                    mine,
                    on_mount(user, f'echo 1 > "$M/pub/0/groups/{group}"', mnt),
                    by_client(user, bootstrap, "commit", group, "pub:1"),
                )
                cell(
                    f"offsets of {group} as {who}",
                    "ok",
                    on_mount(user, f'cat "$M/pub/0/groups/{group}"', mnt),
                    by_client(user, bootstrap, "offsets", group),
                )
            cell(  # a chmod on the mount reaches the listener
                f"offsets of g3 (0600) as {who}",
                mine,
                on_mount(user, 'cat "$M/pub/0/groups/g3"', mnt),
                by_client(user, bootstrap, "offsets", "g3"),
            )
            group = f"gd-{who}"
            assert by_client(owner, bootstrap, "commit", group, "pub:0") == "ok"
            cell(
                f"delete group as {who}",
                mine,
                None,
                by_client(user, bootstrap, "delete_group", group),
            )

        # Kafka's internal topic is root's; Metadata hides what one may not see
        for who in WHO:
            user = people[who]
            cell(
                f"read __consumer_offsets as {who}",
                "ok" if who == "root" else "denied",
                None,
                kcat(user, bootstrap, "-C", "-t", "__consumer_offsets", "-e", "-q"),
            )
            listing = as_user(user, ["kcat", "-b", bootstrap, "-L", "-m", "15"]).stdout
            shown = '"priv"' in listing
            if shown != (who in ("owner", "root")):
                wrong.append(f"Metadata of all topics as {who} shows priv: {shown}")
        assert daemon.proc.poll() is None

    assert not wrong, "\n".join(wrong)
    remounted(people, place)


def remounted(people, place) -> None:
    """The second half: after a remount with SASL, the same owners and modes."""
    data, mnt = place / "data", place / "mnt"
    owner, other = people["owner"], people["other"]
    nobody = pwd.getpwnam("nobody")
    users = place / "kafka-users"
    users.write_text(f"{owner.pw_name}:ownerpw\n{other.pw_name}:otherpw\nghost:ghostpw\n")
    users.chmod(0o600)
    wrong: list[str] = []
    with mounted(data, mnt, "allow_other", f"kafka.sasl.users={users}") as (_, bootstrap):
        st = os.stat(mnt / "priv")
        assert (st.st_uid, st.st_mode & 0o7777) == (owner.pw_uid, 0o700)
        # on disk: others cannot read a 0700 topic's records, but can a 0755 one's
        assert as_user(other, ["sh", "-c", f"cat {data}/priv-0/*.log"]).returncode != 0
        assert as_user(other, ["sh", "-c", f"cat {data}/pub-0/*.log"]).returncode == 0
        principals = {
            "owner": ((owner.pw_name, "ownerpw"), owner),
            "other": ((other.pw_name, "otherpw"), other),
            # unmapped: nobody, whoever runs the client (here the topics' owner)
            "nobody": (("ghost", "ghostpw"), nobody),
        }
        for who, (sasl, local) in principals.items():
            for topic, mode in MODES.items():
                for op in ("read", "write", "alter_configs"):
                    runner = owner if who == "nobody" else local
                    want = expected(op, mode, "owner" if who == "owner" else "other")
                    got_kafka = topic_on_kafka(runner, bootstrap, op, topic, mnt, sasl=sasl)
                    got_mount = topic_on_mount(local, op, topic, mnt)
                    for face, got in (("mount", got_mount), ("kafka", got_kafka)):
                        if got != want:
                            wrong.append(f"{op} {topic} as {who} on the {face}: {got}, not {want}")
    assert not wrong, "\n".join(wrong)


def test_acl_calls_answer_from_the_modes(people, place):
    """DescribeAcls shows who may do what; CreateAcls is refused naming chmod."""
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    data, mnt = place / "data", place / "mnt"
    owner, member = people["owner"], people["member"]
    with mounted(data, mnt, "allow_other") as (_, bootstrap):
        assert on_mount(owner, 'mkdir -m 750 "$M/shared"', mnt) == "ok"
        with contextlib.closing(KafkaAdminClient(bootstrap_servers=bootstrap)) as admin:
            pattern = ResourcePatternFilter(
                ResourceType.TOPIC, "shared", ACLResourcePatternType.LITERAL
            )
            found = admin.describe_acls(
                ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY, pattern)
            )[0]
            by_principal: dict[str, set[str]] = {}
            for acl in found:
                by_principal.setdefault(acl.principal, set()).add(acl.operation.name)
            assert by_principal[f"User:{owner.pw_name}"] >= {"READ", "WRITE", "ALTER", "DELETE"}
            group = f"Group:{grp.getgrgid(owner.pw_gid).gr_name}"
            assert by_principal[group] == {"READ", "DESCRIBE", "DESCRIBE_CONFIGS"}
            assert "User:*" not in by_principal  # others get nothing of a 0750 topic
            acl = ACL(
                f"User:{member.pw_name}",
                "*",
                ACLOperation.WRITE,
                ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "shared"),
            )
            answer = admin.create_acls([acl])
            assert not answer["succeeded"] and answer["failed"]
        # kafka-python keeps only the code: the message, as the listener sends it
        request = load_request_schema(30, 3)(  # CreateAcls
            creations=(
                AclCreation(
                    resource_type=2,
                    resource_name="shared",
                    resource_pattern_type=3,
                    principal=f"User:{member.pw_name}",
                    host="*",
                    operation=4,
                    permission_type=3,
                ),
            )
        )
        (result,) = call(bootstrap, 30, 3, request).results
        assert result.error_code == ErrorCode.policy_violation
        assert "chmod" in result.error_message and "chown" in result.error_message
