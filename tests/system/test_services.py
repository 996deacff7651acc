"""Services with their own users writing through the mount: a real nginx
(Debian's package) logging every request to ``append`` across ``nginx -s
reopen`` (what every logrotate configuration runs) and under ``ab``'s load in
each mode (docs/mount.md, "Writers that write a line at a time"), and Python's
``logging.handlers.WatchedFileHandler`` across a reopen."""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from mount_helpers import Daemon
from waiting import wait_for

pytestmark = [pytest.mark.mount, pytest.mark.timeout(120)]


OWNERS = [("allow_other",), ("allow_other", "uid=nobody", "gid=nogroup")]
KINDS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
BAD = ("[error]", "[crit]", "[alert]", "[emerg]")


def reopened(error_log: Path) -> int:
    """How many nginx processes (the master and its two workers) have reopened
    their logs: each says so, once the signal reached it, just before it does."""
    said = re.findall(r" (\d+)#\d+: reopening logs$", error_log.read_text(), re.MULTILINE)
    return len(set(said))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("options", OWNERS, ids=["chown honoured", "uid= and gid="])
def test_nginx_logs_every_request_across_a_reopen(shared, options):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert os.path.exists(nginx), "nginx is missing: install it (mount_scripts/install.sh)"
    data, mnt = shared / "data", shared / "mnt"
    www = shared / "www"
    www.mkdir()
    (www / "index.html").write_text("hello\n")
    port = free_port()
    conf = shared / "nginx.conf"
    temp = "\n".join(
        f"    {kind}_temp_path {shared}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf.write_text(
        f"""user nobody nogroup;
worker_processes 2;
pid {shared}/nginx.pid;
error_log {shared}/error.log info;
events {{ worker_connections 64; }}
http {{
{temp}
    access_log {mnt}/web/0/append;
    server {{ listen 127.0.0.1:{port}; root {www}; }}
}}
"""
    )
    with Daemon(data, mnt, *options):
        (mnt / "web").mkdir()
        run = [nginx, "-p", str(shared), "-c", str(conf)]
        subprocess.run(run, check=True, capture_output=True)  # daemonizes; pid in nginx.pid
        master = int((shared / "nginx.pid").read_text())
        try:
            for i in range(30):
                assert (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/?n={i}").read() == b"hello\n"
                )
                if i == 14:  # what logrotate's postrotate runs
                    subprocess.run([*run, "-s", "reopen"], check=True, capture_output=True)
                    wait_for(lambda: reopened(shared / "error.log") == 3, "nginx reopening")
        finally:
            subprocess.run([*run, "-s", "quit"], capture_output=True)
            deadline = time.monotonic() + 10
            while os.path.exists(f"/proc/{master}") and time.monotonic() < deadline:
                time.sleep(0.05)
            if os.path.exists(f"/proc/{master}"):
                os.kill(master, signal.SIGKILL)
        lines = (mnt / "web" / "0" / "stream").read_text().splitlines()
    requests = sorted(line.split('"')[1] for line in lines)  # two workers: any order
    assert requests == sorted(f"GET /?n={i} HTTP/1.1" for i in range(30))  # each once, whole
    errors = (shared / "error.log").read_text()
    bad = [
        line
        for line in errors.splitlines()
        if any(f"[{lv}]" in line for lv in ("error", "crit", "alert", "emerg"))
    ]
    assert bad == [], errors
    assert "reopening logs" in errors  # the reopen happened


@pytest.mark.timeout(300)
@pytest.mark.parametrize("acks", ["1", "0"])
def test_nginx_logs_every_request_once_whole(tmp_path, acks):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    ab = shutil.which("ab")
    assert os.path.exists(nginx) and ab, "nginx and ab are missing: mount_scripts/install.sh"
    data, mnt, root = tmp_path / "data", tmp_path / "mnt", tmp_path / "nginx"
    mnt.mkdir()
    (root / "www").mkdir(parents=True)
    (root / "www" / "index.html").write_text("hello\n")
    port = free_port()
    temp = "\n".join(
        f"    {k}_temp_path {root}/{k};"
        for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (root / "nginx.conf").write_text(
        f"""user root root;
worker_processes 2;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 256; }}
http {{
{temp}
    log_format tagged '$request_uri $status $body_bytes_sent "$http_user_agent"';
    access_log {mnt}/web/0/append tagged;
    server {{ listen 127.0.0.1:{port}; root {root}/www; }}
}}
"""
    )
    run = [nginx, "-p", str(root), "-c", str(root / "nginx.conf")]
    requests = 3000
    with Daemon(data, mnt, f"acks={acks}", log=tmp_path / "daemon.log"):
        (mnt / "web").mkdir()
        subprocess.run(run, check=True, capture_output=True)
        master = int((root / "nginx.pid").read_text())
        try:
            out = subprocess.run(
                [
                    ab,
                    "-q",
                    "-k",
                    "-n",
                    str(requests),
                    "-c",
                    "8",
                    f"http://127.0.0.1:{port}/index.html?q=1",
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            assert re.search(rf"Complete requests:\s+{requests}", out), out
            assert re.search(r"Failed requests:\s+0\b", out), out
        finally:
            subprocess.run([*run, "-s", "quit"], capture_output=True)
            deadline = time.monotonic() + 20
            while os.path.exists(f"/proc/{master}") and time.monotonic() < deadline:
                time.sleep(0.05)
            if os.path.exists(f"/proc/{master}"):
                os.kill(master, 9)
        lines = (mnt / "web" / "0" / "stream").read_bytes().split(b"\n")
    assert lines[-1] == b""
    logged = lines[:-1]
    assert len(logged) == requests  # every request once (nginx closed its log: all arrived)
    whole = rb'/index\.html\?q=1 200 6 "ApacheBench/[\d.]+"'
    assert all(re.fullmatch(whole, line) for line in logged)
    assert not re.search(r"\[(error|crit|alert|emerg)\]", (root / "error.log").read_text())


def test_watched_file_handler_keeps_logging_across_a_reopen(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt):
        (mnt / "app").mkdir()
        path = mnt / "app" / "0" / "append"
        handler = logging.handlers.WatchedFileHandler(path)
        logger = logging.getLogger("logfs-test-app")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            for i in range(10):
                logger.info("before %d", i)
            # logrotate's "copytruncate" and "create": the file is truncated, or
            # replaced, and the handler reopens it when it sees it changed
            subprocess.run(["truncate", "-s", "0", str(path)], check=True)
            first = handler.stream
            handler.dev = handler.ino = -1  # as if the file it had open was rotated away
            for i in range(10):
                logger.info("after %d", i)
            assert handler.stream is not first  # it did reopen
        finally:
            logger.removeHandler(handler)
            handler.close()
        lines = (mnt / "app" / "0" / "stream").read_text().splitlines()
    assert lines == [f"before {i}" for i in range(10)] + [f"after {i}" for i in range(10)]


def test_ownership_options():
    from logfs.core.errors import LogfsError
    from logfs.daemon import parse_options

    owner = parse_options({"uid": "nobody", "gid": "65534", "umask": "027"}).owner
    assert (owner.uid, owner.gid, owner.umask) == (65534, 65534, 0o027)
    for bad in ({"uid": "no-such-user"}, {"gid": "no-such-group"}, {"umask": "999"}):
        with pytest.raises(LogfsError):
            parse_options(bad)


def test_the_tree_shows_the_ownership_options(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "uid=65534", "gid=65534", "umask=027"):
        (mnt / "t").mkdir()
        for path, mode in [("t", 0o750), ("t/0/append", 0o640), ("t/0/stream", 0o440)]:
            st = os.stat(mnt / path)
            assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (65534, 65534, mode), path
        os.chmod(mnt / "t/0/append", 0o600)  # remembered for the mount's life
        os.chown(mnt / "t/0/append", 0, 0)
        st = os.stat(mnt / "t/0/append")
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, 0, 0o600)
