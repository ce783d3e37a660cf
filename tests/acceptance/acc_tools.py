"""Tools for the real-client acceptance tests, deliberately independent of trocket's own
codecs and client (they are what is under test):

* :class:`BrokerProcess`: ``trocket broker`` as a subprocess on free loopback ports;
* :class:`CountingProxy`: a TCP relay the broker advertises (``--advertise``) so every
  client request passes through it; it counts request codes (PULL_MESSAGE per group);
* :class:`RawClient`: blocking JSON-frame requests (runtime info, max offset, pull);
* :func:`decode_records` / :func:`scan_commit_log`: the V1 stored-message record, read
  strictly (sizes, magic code, body CRC);
* :func:`run_client_script`: a client scenario in its own python process, JSON result;
  :func:`run_js_script`: the same for the JS client (``node js/<script>``, ali-ons).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path

from trocket.codecs.acl import ACCESS_KEY, SIGNATURE, signature

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
JS_DIR = HERE / "js"
REPO_ROOT = HERE.parent.parent
#: what installs the JS client (ali-ons, pinned in js/package-lock.json); run from REPO_ROOT
NPM_CI = "npm ci --prefix tests/acceptance/js --no-audit --no-fund"

MESSAGE_MAGIC = 0xDAA320A7  # 0xAABBCCDD ^ (1880681586 + 8)
BLANK_MAGIC = 0xCBD43194  # 0xBBCCDDEE ^ (1880681586 + 8)

PULL_MESSAGE = 11


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port_block() -> int:
    """A free listen port P whose P-2 (the VIP channel, Java's fastListenPort) and P+1
    (HA, a master's default HA port, Java's and trocket's) are free too."""
    for _ in range(200):
        port = free_port()
        if port > 1026 and all(_bindable(p) for p in (port, port - 2, port + 1)):
            return port
    raise RuntimeError("no free port block for a broker")


def trocket_command() -> list[str]:
    """The ``trocket`` console script next to this python, else ``python -m trocket``."""
    exe = Path(sys.executable).with_name("trocket")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "trocket"]


# -- the broker process -------------------------------------------------------------------


#: commit-log segment size of the test brokers (above the 4 MiB message limit)
TEST_SEGMENT_SIZE = "32m"


class BrokerProcess:
    """``trocket broker`` on 127.0.0.1 free ports with ``store``; log in ``log_path``."""

    BOOT_LINE = "boot success"

    def __init__(self, store: Path, log_path: Path, *, flush: str = "async", advertise_port: int | None = None,
                 extra: list[str] | None = None) -> None:
        self.store = Path(store)
        self.log_path = Path(log_path)
        self.flush = flush
        self.port = free_port_block()  # a master listens for its slaves on port + 1
        self.namesrv_port = free_port()
        self.advertise_port = advertise_port
        self.extra = list(extra or [])
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.starts = 0

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def addr(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def start(self, timeout: float = 20.0) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        cmd = [
            *trocket_command(), "broker",
            "--listen", f"127.0.0.1:{self.port}",
            "--namesrv-listen", self.namesrv,
            "--store", str(self.store),
            "--flush", self.flush,
            *self.extra,
        ]
        if "--segment-size" not in self.extra:
            # a 1 GiB default segment is reserved on disk (posix_fallocate), and the next one
            # ahead of need: 2 GiB a broker would make a full test run need tens of GB
            cmd += ["--segment-size", TEST_SEGMENT_SIZE]
        if self.advertise_port is not None:
            cmd += ["--advertise", f"127.0.0.1:{self.advertise_port}"]
        self.starts += 1
        self._log = open(self.log_path, "a")
        self._log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n")
        self._log.flush()
        self._log_start = self.log_path.stat().st_size
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_text()[self._log_start:]
            if self.BOOT_LINE in text:
                return
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"trocket broker exited with {self.proc.returncode} before booting:\n{self.log_tail()}")
            time.sleep(0.05)  # its output goes to the log file a report shows: polled for the boot line
        self.kill()
        raise AssertionError(f"no {self.BOOT_LINE!r} from trocket broker within {timeout} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGINT, wait; returns the exit code (kills and raises on timeout)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc is not None else 0
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"trocket broker did not stop within {timeout} s of SIGINT:\n{self.log_tail()}")
        finally:
            self._close_log()
        return rc

    def kill(self) -> None:
        """SIGKILL (a crash)."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


# -- a counting relay ---------------------------------------------------------------------


class CountingProxy:
    """Relays 127.0.0.1:<port> to the broker; records every client request frame
    (time, code, consumerGroup for pulls). Started before the broker so the broker can
    advertise it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.requests: list[tuple[float, int, str | None, int]] = []  # (time, code, group, conn id)
        #: answered requests: (request time, response time, request code, response code, group)
        self.answers: list[tuple[float, float, int, int, str | None]] = []
        self._open: dict[tuple[int, int], tuple[float, int, str | None]] = {}
        self.lock = threading.Lock()
        self.connections = 0
        self.errors: list[str] = []
        self._closed = False
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def close(self) -> None:
        self._closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        for s in list(self._socks):
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError as exc:
                self.errors.append(f"upstream connect: {exc}")
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._socks += [client, server]
            with self.lock:
                self.connections += 1
                cid = self.connections
            threading.Thread(target=self._pump, args=(client, server, cid, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, cid, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, cid: int, from_client: bool) -> None:
        """Relay one direction, parsing the frames that pass (client requests, broker
        responses; requests the broker makes of clients are ignored). Parsed before they
        are passed on: a request must be on record before the broker can answer it (the
        other direction's thread would otherwise drop an answer that beats it there)."""
        buf = bytearray()
        try:
            while True:
                data = src.recv(262144)
                if not data:
                    break
                buf += data
                self._parse(buf, cid, from_client)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _parse(self, buf: bytearray, cid: int, from_client: bool) -> None:
        now = time.time()
        while len(buf) >= 8:
            (length,) = struct.unpack_from(">i", buf)
            if len(buf) < 4 + length:
                return
            (word,) = struct.unpack_from(">I", buf, 4)
            hlen = word & 0xFFFFFF
            try:
                header = json.loads(bytes(buf[8 : 8 + hlen]))
                code = int(header.get("code", -1))
                opaque = header.get("opaque")
                is_response = bool(int(header.get("flag", 0)) & 1)
                if is_response != (not from_client):
                    pass  # the broker's own calls to clients and their answers
                elif is_response:
                    with self.lock:
                        req = self._open.pop((cid, opaque), None)
                        if req is not None:
                            self.answers.append((req[0], now, req[1], code, req[2]))
                else:
                    # the group a request belongs to: consumerGroup (pulls, offsets,
                    # consumer lists), group (send-back 36), producerGroup / a (sends)
                    ext = header.get("extFields") or {}
                    group = ext.get("consumerGroup") or ext.get("group") or ext.get("producerGroup") or ext.get("a")
                    group = None if group is None else str(group)
                    with self.lock:
                        self.requests.append((now, code, group, cid))
                        self._open[(cid, opaque)] = (now, code, group)
            except Exception as exc:  # noqa: BLE001
                self.errors.append(f"unparsable frame: {exc}")
            del buf[: 4 + length]

    def pulls(self, group: str | None = None, since: float = 0.0, until: float = float("inf")) -> int:
        with self.lock:
            return sum(1 for t, code, g, _ in self.requests
                       if code == PULL_MESSAGE and (group is None or g == group) and since <= t <= until)

    def pull_answers(self, group: str | None = None, since: float = 0.0, until: float = float("inf")):
        """(request time, response time, response code) of answered PULL_MESSAGEs
        sent in [since, until]."""
        with self.lock:
            return [(tq, tr, rc) for tq, tr, code, rc, g in self.answers
                    if code == PULL_MESSAGE and (group is None or g == group) and since <= tq <= until]

    def requests_of(self, code: int, group: str | None = None, since: float = 0.0,
                    until: float = float("inf")) -> list[float]:
        """Times of the requests with ``code`` (from ``group``) sent in [since, until]."""
        with self.lock:
            return [t for t, c, g, _ in self.requests
                    if c == code and (group is None or g == group) and since <= t <= until]

    def answers_of(self, code: int, group: str | None = None) -> list[tuple[float, float, int]]:
        """(request time, response time, response code) of answered ``code`` requests."""
        with self.lock:
            return [(tq, tr, rc) for tq, tr, c, rc, g in self.answers if c == code and (group is None or g == group)]

    def code_counts(self, since: float = 0.0, until: float = float("inf")) -> Counter:
        with self.lock:
            return Counter(code for t, code, _, _ in self.requests if since <= t <= until)


# -- raw requests -------------------------------------------------------------------------


class RawClient:
    """One blocking connection; JSON headers as the C++ client writes them."""

    def __init__(self, addr: tuple[str, int], timeout: float = 10.0, *, acl: tuple[str, str] | None = None) -> None:
        self.sock = socket.create_connection(addr, timeout=timeout)
        self.opaque = 0
        self.buf = bytearray()
        #: (access key, secret key): every request signed, as Java's AclClientRPCHook signs it
        self.acl = acl

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, code: int, ext: dict | None = None, body: bytes = b"") -> tuple[dict, bytes]:
        self.opaque += 1
        ext = dict(ext or {})
        if self.acl is not None:
            ext[ACCESS_KEY] = self.acl[0]
            ext[SIGNATURE] = signature("".join(ext[k] for k in sorted(ext)), body, self.acl[1].encode())
        header = json.dumps({"code": code, "extFields": ext, "flag": 0,
                             "language": "CPP", "opaque": self.opaque, "remark": "", "version": 63},
                            sort_keys=True).encode() + b"\n"
        self.sock.sendall(struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body)
        while True:
            while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack_from(">i", self.buf)[0]:
                data = self.sock.recv(1 << 20)
                if not data:
                    raise EOFError("broker closed the connection")
                self.buf += data
            (length,) = struct.unpack_from(">i", self.buf)
            frame = bytes(self.buf[4 : 4 + length])
            del self.buf[: 4 + length]
            (word,) = struct.unpack_from(">I", frame)
            assert word >> 24 == 0, "response not JSON-serialized"
            hlen = word & 0xFFFFFF
            resp = json.loads(frame[4 : 4 + hlen])
            if resp.get("opaque") == self.opaque:
                return resp, frame[4 + hlen :]

    def runtime_info(self) -> dict[str, str]:
        resp, body = self.call(28)
        assert resp["code"] == 0, resp
        return json.loads(body)["table"]

    def max_offset(self, topic: str, queue_id: int) -> int:
        resp, _ = self.call(30, {"topic": topic, "queueId": str(queue_id)})
        assert resp["code"] == 0, resp
        return int(resp["extFields"]["offset"])

    def create_topic(self, topic: str, queues: int = 4, perm: int = 6) -> None:
        """UPDATE_AND_CREATE_TOPIC (17), as ``mqadmin updateTopic`` sends it."""
        resp, _ = self.call(17, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
            "perm": str(perm), "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
        })
        assert resp["code"] == 0, resp

    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """QUERY_CONSUMER_OFFSET (14): the group's committed offset (None: not found)."""
        resp, _ = self.call(14, {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)})
        if resp["code"] != 0:
            return None
        return int(resp["extFields"]["offset"])

    def pull(self, topic: str, queue_id: int, offset: int, group: str = "acc_raw", max_msgs: int = 32):
        """PULL_MESSAGE without suspend (sysFlag 4), as the C++ pull consumer sends it."""
        return self.call(11, {
            "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
            "maxMsgNums": str(max_msgs), "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "20000",
            "subscription": "*", "subVersion": "0",
        })

    def pull_queue(self, topic: str, queue_id: int) -> list[dict]:
        """Every record of one queue, 0 to max, each decoded strictly; raises on a
        non-FOUND status before the end, a gap or a record at the wrong offset."""
        out: list[dict] = []
        offset = 0
        max_offset = self.max_offset(topic, queue_id)
        while offset < max_offset:
            resp, body = self.pull(topic, queue_id, offset)
            ext = resp.get("extFields") or {}
            assert resp["code"] == 0, f"{topic}:{queue_id}@{offset}/{max_offset}: {resp}"
            records = decode_records(body)
            assert records, f"{topic}:{queue_id}@{offset}: FOUND with no records"
            for rec in records:
                assert rec["topic"] == topic and rec["queue_id"] == queue_id, rec
                assert rec["queue_offset"] == offset, f"{topic}:{queue_id}: expected offset {offset}, got {rec}"
                out.append(rec)
                offset += 1
            assert int(ext["nextBeginOffset"]) == offset, (ext, offset)
        return out


# -- records ------------------------------------------------------------------------------

_FIXED = struct.Struct(">iiiiiqqiq4si q4si iq i")


def decode_record(buf: bytes, at: int = 0) -> tuple[dict, int]:
    """One V1 (IPv4) stored-message record at ``at``, checked strictly; returns it and
    the offset after it. Bodies are returned as stored (``body``) and inflated
    (``plain``) when SYSFLAG bit 0 is set."""
    if len(buf) - at < 4:
        raise ValueError(f"torn record at {at}: {len(buf) - at} bytes")
    (total,) = struct.unpack_from(">i", buf, at)
    if total < 91 or at + total > len(buf):
        raise ValueError(f"torn record at {at}: TOTALSIZE {total}, {len(buf) - at} bytes left")
    (total, magic, crc, qid, flag, qoff, phy, sysflag, born_ts, born_ip, born_port, store_ts, store_ip, store_port,
     reconsume, prepared, body_len) = _FIXED.unpack_from(buf, at)
    if magic & 0xFFFFFFFF != MESSAGE_MAGIC:
        raise ValueError(f"bad magic {magic & 0xFFFFFFFF:#x} at {at}")
    if sysflag & 0x30:
        raise ValueError(f"IPv6 host flags set at {at}: {sysflag:#x}")
    p = at + _FIXED.size
    body = bytes(buf[p : p + body_len])
    p += body_len
    topic_len = buf[p]
    topic = bytes(buf[p + 1 : p + 1 + topic_len]).decode()
    p += 1 + topic_len
    (plen,) = struct.unpack_from(">h", buf, p)
    props_raw = bytes(buf[p + 2 : p + 2 + plen])
    p += 2 + plen
    if p - at != total:
        raise ValueError(f"record at {at}: TOTALSIZE {total} but fields take {p - at}")
    if zlib.crc32(body) & 0x7FFFFFFF != crc:
        raise ValueError(f"record at {at}: BODYCRC {crc} does not match the body")
    props = {}
    for pair in props_raw.decode("utf-8").split("\x02"):
        if pair:
            k, _, v = pair.partition("\x01")
            props[k] = v
    plain = zlib.decompress(body) if sysflag & 1 else body
    return {
        "total": total, "queue_id": qid, "flag": flag, "queue_offset": qoff, "phy": phy, "sysflag": sysflag,
        "born_ts": born_ts, "store_ts": store_ts, "store_port": store_port, "reconsume": reconsume,
        "topic": topic, "props": props, "props_raw": props_raw, "body": body, "plain": plain,
    }, p


def decode_records(buf: bytes) -> list[dict]:
    out, at = [], 0
    while at < len(buf):
        rec, at = decode_record(buf, at)
        out.append(rec)
    return out


def _segments(store: Path) -> list[Path]:
    """The commit-log segment files in order (not a ``<offset>.alloc`` being built ahead)."""
    return sorted(f for f in (Path(store) / "commitlog").iterdir() if f.name.isdigit())


def scan_commit_log(store: Path, end: int | None = None) -> list[dict]:
    """Every record in ``store/commitlog`` (segments in order), strictly decoded, up to
    ``end`` (a physical offset) or the first zero TOTALSIZE (the end of what was written)."""
    out = []
    for f in _segments(store):
        base = int(f.name)
        if end is not None and base >= end:
            break
        data = f.read_bytes()
        at = 0
        while at + 8 <= len(data) and (end is None or base + at < end):
            total, magic = struct.unpack_from(">iI", data, at)
            if total == 0 or magic == BLANK_MAGIC:
                break
            rec, nxt = decode_record(data, at)
            assert rec["phy"] == base + at, f"{f.name}@{at}: PHYSICALOFFSET {rec['phy']} != {base + at}"
            out.append(rec)
            at = nxt
    return out


def inject_torn_record(store: Path) -> tuple[int, int] | None:
    """A torn append after the last good record: the first bytes of a copy of the last
    good one (PHYSICALOFFSET set to where it would go), cut in the middle of its body --
    what a crash in the middle of writing it can leave, and which the body CRC exposes.
    Returns (end of the good data, torn bytes written), or None when the segment has no
    room (or the log's tail is already unreadable)."""
    files = _segments(store)
    last_good = None
    for f in files:
        base = int(f.name)
        data = f.read_bytes()
        at = 0
        while at + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, at)
            if total == 0 or magic == BLANK_MAGIC:
                break
            try:
                _, nxt = decode_record(data, at)
            except ValueError:
                return None
            last_good = (f, base, at, nxt)
            at = nxt
    if last_good is None:
        return None
    f, base, at, nxt = last_good
    data = f.read_bytes()
    record = bytearray(data[at:nxt])
    struct.pack_into(">q", record, 28, base + nxt)
    (body_len,) = struct.unpack_from(">i", record, 84)
    if body_len < 2:
        return None
    torn = bytes(record[: _FIXED.size + body_len // 2])
    if nxt + len(torn) + 8 > len(data) or any(data[nxt : nxt + len(torn)]):
        return None
    with open(f, "r+b") as fh:
        fh.seek(nxt)
        fh.write(torn)
    return base + nxt, len(torn)


# -- client scripts -----------------------------------------------------------------------


class ScriptFailed(AssertionError):
    pass


def script_env(home: Path) -> dict:
    env = dict(os.environ)
    env["HOME"] = str(home)  # librocketmq logs under $HOME/logs/rocketmq-cpp
    env["PYTHONPATH"] = str(SCRIPTS)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def client_log_tail(home: Path, n: int = 40) -> str:
    logs = sorted((Path(home) / "logs" / "rocketmq-cpp").glob("*"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return "(no librocketmq log)"
    lines = logs[-1].read_text(errors="replace").splitlines()
    return f"{logs[-1]}:\n" + "\n".join(lines[-n:])


def start_client_script(name: str, args: list[str], home: Path, **popen) -> subprocess.Popen:
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, str(SCRIPTS / name), *args], env=script_env(home),
                            stdout=popen.pop("stdout", subprocess.PIPE), stderr=popen.pop("stderr", subprocess.PIPE),
                            text=True, stdin=subprocess.DEVNULL, **popen)


def finish_client_script(proc: subprocess.Popen, name: str, home: Path, timeout: float,
                         broker: BrokerProcess | None = None) -> dict:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise ScriptFailed(
            f"{name} hung (killed after {timeout} s)\nstderr:\n{err[-3000:]}\n{client_log_tail(home)}"
            + (f"\nbroker log:\n{broker.log_tail()}" if broker else ""))
    if proc.returncode != 0:
        raise ScriptFailed(
            f"{name} exited with {proc.returncode}"
            + (f" (signal {signal.Signals(-proc.returncode).name})" if proc.returncode < 0 else "")
            + f"\nstderr:\n{err[-3000:]}\n{client_log_tail(home)}"
            + (f"\nbroker log:\n{broker.log_tail()}" if broker else ""))
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ScriptFailed(f"{name} printed no JSON result\nstdout:\n{out[-2000:]}\nstderr:\n{err[-3000:]}") from None


def run_client_script(name: str, args: list[str], home: Path, timeout: float = 90.0,
                      broker: BrokerProcess | None = None) -> dict:
    proc = start_client_script(name, args, home)
    return finish_client_script(proc, name, home, timeout, broker)


def group_by(items, key):
    out = defaultdict(list)
    for it in items:
        out[key(it)].append(it)
    return out


# -- JS client scripts (node, ali-ons) ----------------------------------------------------


def node_executable() -> str | None:
    return shutil.which("node")


def install_js_client() -> str | None:
    """``npm ci`` the pinned ali-ons into js/node_modules when it is not there yet and
    npm is at hand, so the README's one test command runs the JS tests too; returns
    why it could not, or None."""
    if (JS_DIR / "node_modules" / "ali-ons").is_dir():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not on PATH"
    try:
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True, text=True,
                           timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`npm ci` did not finish ({type(exc).__name__}: {exc})"
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        return f"`npm ci` failed (exit {r.returncode}): {' | '.join(tail)}"
    return None


def js_client_status() -> tuple[bool, str]:
    """(True, "") when node runs and ``require('ali-ons')`` works from js/ (installing it
    first with ``npm ci`` if need be); else (False, why, with the command that fixes it)."""
    node = node_executable()
    if node is None:
        return False, ("node is not on PATH: the JS acceptance tests need node (>= 14) and then "
                       f"`cd {REPO_ROOT} && {NPM_CI}`")
    not_installed = install_js_client()
    if not_installed is not None:
        return False, f"the JS client is not installed and could not be: {not_installed}; run `cd {REPO_ROOT} && {NPM_CI}`"
    try:
        r = subprocess.run([node, "-e", "require('ali-ons'); console.log(process.version)"], cwd=JS_DIR,
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{node} does not run ({type(exc).__name__}: {exc})"
    if r.returncode != 0:
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        why = next((ln for ln in lines if "Error" in ln), lines[-1] if lines else f"exit {r.returncode}")
        return False, (f"require('ali-ons') fails under {node} ({why.strip()}): the JS client is not installed; "
                       f"run `cd {REPO_ROOT} && {NPM_CI}`")
    return True, ""


def start_js_script(name: str, args: list[str], home: Path) -> subprocess.Popen:
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(home))
    return subprocess.Popen([node_executable() or "node", str(JS_DIR / name), *args], cwd=JS_DIR, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def finish_js_script(proc: subprocess.Popen, name: str, timeout: float, broker: BrokerProcess | None = None) -> dict:
    """Wait (killing it after ``timeout`` s); the script's JSON result, or ScriptFailed
    with its output when it hung, failed or printed no result. Each script also has its
    own deadline (``--deadline``, exit 3 with a partial result) below ``timeout``."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise ScriptFailed(
            f"node {name} hung (killed after {timeout} s)\nstdout:\n{out[-2000:]}\nstderr:\n{err[-3000:]}"
            + (f"\nbroker log:\n{broker.log_tail()}" if broker else ""))
    result = None
    try:
        result = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        pass
    if proc.returncode != 0 or result is None:
        brief = {k: v for k, v in (result or {}).items() if k not in ("messages", "acked", "sent")}
        raise ScriptFailed(
            f"node {name} exited with {proc.returncode}"
            + (f" and printed no JSON result; stdout ({len(out)} chars):\n{out[:1000]}\n...\n{out[-1000:]}"
               if result is None else f"; result: {json.dumps(brief)[:3000]}")
            + f"\nstderr:\n{err[-3000:]}"
            + (f"\nbroker log:\n{broker.log_tail()}" if broker else ""))
    result["_stderr"] = err[-3000:]
    return result


def run_js_script(name: str, args: list[str], home: Path, timeout: float = 90.0,
                  broker: BrokerProcess | None = None) -> dict:
    return finish_js_script(start_js_script(name, args, home), name, timeout, broker)
