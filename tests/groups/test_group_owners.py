"""Consumer groups' owners (groups/owners.py): claimed by the request that
makes a group, kept only if it did, written to ``DATA/group-owners`` and read
back after a restart for the groups that still exist; a torn or foreign line
is skipped and the journal stays proportional to the groups there are."""

from __future__ import annotations

import json

from logfs.core.log import Owner, Store
from logfs.groups import Coordinator
from logfs.groups.owners import FILE, SLACK, GroupOwners

ALICE = Owner(5001, 5001, 0o644)
BOB = Owner(5002, 5002, 0o644)


def test_a_group_is_its_makers_and_survives_a_restart(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t")
        groups = Coordinator(store)
        assert groups.claim_group("g", ALICE)
        groups.commit_offset("g", "t", 0, 0)
        groups.settle_group("g")
        assert groups.group_owner("g") == ALICE
        assert not groups.claim_group("g", BOB)  # it exists: the first maker keeps it
        assert groups.claim_group("never", BOB)  # a request that made nothing
        groups.settle_group("never")
        assert groups.group_owner("never") is None
        groups.change_group_owner("g", ALICE._replace(mode=0o600))
    with Store(data) as store:
        groups = Coordinator(store)
        assert groups.group_owner("g") == ALICE._replace(mode=0o600)
        groups.delete_group("g")
        assert groups.group_owner("g") is None
        assert groups.claim_group("g", BOB)  # made again: its new maker's
        groups.commit_offset("g", "t", 0, 0)
        groups.settle_group("g")
        assert groups.group_owner("g") == BOB
    with Store(data) as store:
        assert Coordinator(store).group_owner("g") == BOB


def test_the_journal_is_rewritten_and_skips_bad_lines(tmp_path):
    owners = GroupOwners(tmp_path, read_only=False)
    owners.claim("a", ALICE)
    owners.settle("a", exists=True)
    for _ in range(3 * SLACK):  # many changes of one group: the journal stays short
        owners.change("b", BOB)
    lines = (tmp_path / FILE).read_text().splitlines()
    assert len(lines) <= 2 * 2 + SLACK + 1
    with open(tmp_path / FILE, "a") as f:
        f.write("not json\n")
        f.write(json.dumps({"group": "c", "owner": [1, 2, "0600"]}) + "\n")
        f.write('{"group": "torn", "owner": [1, 2')
    again = GroupOwners(tmp_path, read_only=False)
    again.load({"a", "b", "c", "torn"})
    assert again.owner("a") == ALICE and again.owner("b") == BOB
    assert again.owner("c") == Owner(1, 2, 0o600)
    assert again.owner("torn") is None
    # only the groups that exist are kept, and the journal is rewritten with them
    third = GroupOwners(tmp_path, read_only=False)
    third.load({"a"})
    assert third.owner("b") is None
    assert [json.loads(x)["group"] for x in (tmp_path / FILE).read_text().splitlines()] == ["a"]


def test_a_read_only_store_writes_nothing(tmp_path):
    owners = GroupOwners(tmp_path, read_only=True)
    owners.claim("a", ALICE)
    owners.settle("a", exists=True)
    owners.change("a", BOB)
    assert owners.owner("a") == BOB
    assert not (tmp_path / FILE).exists()
