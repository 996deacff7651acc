"""The daemon room builds a daemon's parts once and hands them over whole: one
group coordinator for the mount's groups/ files and the listener's broker,
the flusher's flushes for both faces, the recovery's ``ready`` for both; the
read-only daemon runs no background writer. (Running daemons: test_mount.py,
test_services.py, test_kafka_*.py.)"""

from __future__ import annotations

import contextlib

import pytest

from logfs.core.errors import DataDirBusyError, LogfsError
from logfs.core.log import Store
from logfs.daemon import Daemon, parse_options


@contextlib.contextmanager
def built(data, options: dict, mountpoint=None):
    """A daemon built and never run: its socket and its store closed after."""
    daemon = Daemon(str(data), parse_options(options), mountpoint)
    try:
        yield daemon
    finally:
        if daemon.listener is not None:
            daemon.listener.socket.close()
        if daemon.metrics is not None:
            daemon.metrics.close()
        daemon.store.close()


def test_a_mount_with_a_listener_shares_one_coordinator_and_one_flusher(tmp_path):
    (tmp_path / "mnt").mkdir()
    with built(tmp_path / "data", {"kafka": "127.0.0.1:0"}, str(tmp_path / "mnt")) as daemon:
        view, broker = daemon.mount.ops.view, daemon.listener.broker
        assert view.groups is daemon.groups and broker.groups is daemon.groups
        assert broker.sync == daemon.flusher.flush_log
        assert daemon.mount.ops.ready is daemon.ready and broker.ready is daemon.ready
        assert broker.topic_deleted == daemon.mount.forget_topic
        host, port = daemon.listener.address
        assert daemon.address == f"{host}:{port}"
        assert daemon.cleaner is not None


def test_the_metrics_books_are_handed_to_both_faces(tmp_path):
    """``-o metrics=``: one `Metrics` fed by the mount's requests and the listener's,
    bound at once (a taken port fails the build); without it, neither face has one."""
    (tmp_path / "mnt").mkdir()
    options = {"kafka": "127.0.0.1:0", "metrics": "127.0.0.1:0"}
    with built(tmp_path / "data", options, str(tmp_path / "mnt")) as daemon:
        books = daemon.metrics.metrics
        assert daemon.mount.ops.metrics is books and daemon.mount.ops.view.metrics is books
        assert daemon.listener.broker.metrics is books
        assert daemon.listener.broker.topic_deleted == daemon.topic_deleted
        host, port = daemon.metrics.address
        assert host == "127.0.0.1" and port > 0
        with pytest.raises(LogfsError, match=f"metrics=127.0.0.1:{port}: "):
            Daemon(str(tmp_path / "other"), parse_options({"metrics": f"127.0.0.1:{port}"}))
    with built(tmp_path / "data", {"kafka": "127.0.0.1:0"}, str(tmp_path / "mnt")) as daemon:
        assert daemon.metrics is None and daemon.mount.ops.metrics is None
        assert daemon.listener.broker.metrics is None
    with pytest.raises(LogfsError, match="metrics=nope: expected"):
        parse_options({"metrics": "nope"})


def test_serve_builds_the_listener_alone(tmp_path):
    with built(tmp_path / "data", {"kafka": "127.0.0.1:0"}) as daemon:
        assert daemon.mount is None and daemon.listener.broker.groups is daemon.groups
        assert daemon.listener.broker.topic_deleted is None


def test_a_read_only_daemon_runs_no_background_writer(tmp_path):
    Store(tmp_path / "data").close()
    options = {"kafka": "127.0.0.1:0", "ro": ""}
    with built(tmp_path / "data", options) as daemon:
        assert daemon.flusher is None and daemon.cleaner is None
        assert daemon.ready.is_set()  # nothing to recover in a reader


def test_a_failed_build_releases_data(tmp_path):
    """A listener that cannot bind fails the build, and DATA's lock goes with it."""
    with Store(tmp_path / "data"), pytest.raises(DataDirBusyError):
        Daemon(str(tmp_path / "data"), parse_options({}))
    with built(tmp_path / "data", {"kafka": "127.0.0.1:0"}) as first:
        taken = f"127.0.0.1:{first.listener.address[1]}"
        first.store.close()  # the port stays taken, DATA is free
        with pytest.raises(LogfsError, match="kafka=127.0.0.1:"):
            Daemon(str(tmp_path / "data"), parse_options({"kafka": taken}))
        Store(tmp_path / "data").close()  # the failed daemon let its lock go
