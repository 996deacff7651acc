"""The one decision (core/access.py): the kernel's permission rule, what each
node shows, and each Kafka operation as the mount operation it equals, checked
against tables written out by hand from POSIX's rules."""

from __future__ import annotations

import os
import pwd

import pytest

from logfs import Store
from logfs.core.access import (
    INTERNAL,
    NOBODY,
    READ,
    ROOT,
    SEARCH,
    WRITE,
    GroupOp,
    Identity,
    Ownership,
    Refusal,
    TopicOp,
    allowed,
    data_owner,
    group_allowed,
    group_shown,
    groups_dir_mode,
    in_group,
    inner_mode,
    may_create,
    may_delete,
    new_owner,
    of_uid,
    of_user,
    permits,
    topic_owner,
)
from logfs.core.log import Owner

ALICE, BOB, CAROL = Identity(5001, 5001), Identity(5002, 5001), Identity(5003, 5003)
ROOT_DIR = Owner(0, 0, 0o755)


@pytest.mark.parametrize(
    ("who", "mode", "want", "expected"),
    [
        (ALICE, 0o700, READ | WRITE | SEARCH, True),  # owner's bits
        (BOB, 0o700, READ, False),  # a member of the group gets the group's bits
        (BOB, 0o750, READ | SEARCH, True),
        (BOB, 0o750, WRITE, False),
        (CAROL, 0o750, READ, False),  # others'
        (CAROL, 0o755, READ | SEARCH, True),
        (ALICE, 0o077, READ, False),  # the owner's bits apply to the owner alone
        (BOB, 0o707, READ, False),  # so do the group's to the group
        (ROOT, 0o000, READ | WRITE, True),
    ],
)
def test_permits_is_the_kernels_rule(who, mode, want, expected):
    assert permits(who, Owner(ALICE.uid, ALICE.gid, mode), want) is expected


# mode of alice's topic -> (alice, bob in alice's group, carol) allowed, for each operation
TOPIC_TABLE = {
    TopicOp.DESCRIBE: {0o700: "A..", 0o750: "AB.", 0o755: "ABC", 0o711: "A.."},
    TopicOp.READ: {0o700: "A..", 0o750: "AB.", 0o755: "ABC", 0o744: "A.."},
    TopicOp.WRITE: {0o700: "A..", 0o770: "AB.", 0o755: "A..", 0o733: "ABC"},
    TopicOp.DESCRIBE_CONFIGS: {0o700: "A..", 0o750: "AB.", 0o755: "ABC"},
    TopicOp.ALTER_CONFIGS: {0o700: "A..", 0o770: "AB.", 0o777: "ABC"},
    TopicOp.ALTER: {0o755: "A..", 0o770: "AB.", 0o500: "..."},
    TopicOp.OWNER: {0o700: "A..", 0o777: "A..", 0o000: "..."},
}


@pytest.mark.parametrize("op", list(TopicOp))
def test_each_kafka_operation_is_its_mount_operation(op):
    for mode, expected in TOPIC_TABLE[op].items():
        topic = Owner(ALICE.uid, ALICE.gid, mode)
        got = "".join(
            c if allowed(who, op, ROOT_DIR, topic) else "."
            for c, who in zip("ABC", (ALICE, BOB, CAROL), strict=True)
        )
        assert got == expected, (op, oct(mode))
        assert allowed(ROOT, op, ROOT_DIR, topic)


def test_every_operation_needs_search_on_the_root():
    topic = Owner(ALICE.uid, ALICE.gid, 0o777)
    for op in TopicOp:
        assert not allowed(ALICE, op, Owner(0, 0, 0o700), topic)
        assert allowed(ALICE, op, Owner(0, 0, 0o711), topic)  # search alone is enough


def test_creating_and_deleting_follow_posix():
    assert not may_create(ALICE, ROOT_DIR)
    assert may_create(ALICE, Owner(0, 0, 0o1777))
    topic = Owner(BOB.uid, BOB.gid, 0o755)
    assert may_delete(ALICE, ROOT_DIR, topic, False) is Refusal.NO_ACCESS
    sticky = Owner(0, 0, 0o1777)
    assert may_delete(ALICE, sticky, topic, False) is Refusal.STICKY
    assert may_delete(BOB, sticky, topic, True) is None  # the owner deletes it full
    assert may_delete(ALICE, Owner(0, 0, 0o777), topic, True) is Refusal.NOT_EMPTY
    assert may_delete(ALICE, Owner(0, 0, 0o777), topic, False) is None
    assert may_delete(ROOT, Owner(0, 0, 0o700), topic, True) is None


def test_groups_are_resources_with_an_owner():
    group = Owner(ALICE.uid, ALICE.gid, 0o644)
    assert group_allowed(CAROL, GroupOp.JOIN, None)  # no such group: anyone's to make
    assert group_allowed(ALICE, GroupOp.JOIN, group)
    assert not group_allowed(BOB, GroupOp.JOIN, group)
    assert group_allowed(BOB, GroupOp.READ, group)
    assert not group_allowed(CAROL, GroupOp.READ, group._replace(mode=0o640))
    assert not group_allowed(BOB, GroupOp.DELETE, group._replace(mode=0o666))
    assert group_allowed(ALICE, GroupOp.DELETE, group._replace(mode=0o000))
    assert group_allowed(ROOT, GroupOp.DELETE, group)
    data = Owner(0, 0, 0o755)
    assert group_shown(None, data) == Owner(0, 0, 0o644)  # made before owners were kept
    assert group_shown(group._replace(mode=0o4755), data).mode == 0o644


def test_what_nodes_show():
    assert inner_mode(0o1750, directory=True) == 0o750
    assert inner_mode(0o750, writable=True) == 0o640
    assert inner_mode(0o755) == 0o444
    assert groups_dir_mode(0o750) == 0o1770
    assert groups_dir_mode(0o711) == 0o1700
    assert new_owner(ALICE, 0o40750) == Owner(ALICE.uid, ALICE.gid, 0o750)
    assert new_owner(ALICE, 0o755, Ownership(uid=7, umask=0o077)) == Owner(7, ALICE.gid, 0o700)


def test_internal_topics_are_roots(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("__consumer_offsets")
        store.create_topic("t", owner=Owner(ALICE.uid, ALICE.gid, 0o700))
        store.create_topic("plain")
        data = data_owner(store.path)
        assert topic_owner(store, "__consumer_offsets", data) == INTERNAL
        assert topic_owner(store, "t", data) == Owner(ALICE.uid, ALICE.gid, 0o700)
        assert topic_owner(store, "plain", data) == data
        st = os.stat(store.path)
        assert data == Owner(st.st_uid, st.st_gid, st.st_mode & 0o7777)


def test_local_users_and_nobody():
    nobody = pwd.getpwnam("nobody")
    assert of_user("nobody") == NOBODY == Identity(nobody.pw_uid, nobody.pw_gid)
    assert of_user("no-such-user-here") == NOBODY
    assert of_user(None) == NOBODY
    assert of_uid(0) == ROOT
    assert of_uid(987654).gid == NOBODY.gid  # a uid without an account
    assert in_group(ROOT, 0)
    assert not in_group(NOBODY, 0)
