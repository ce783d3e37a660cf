"""Synthetic captures whose answers are known: ``trocket capture synth``.

A name server and two brokers; producers, consumers and the brokers themselves as
clients; mixed request codes in both serializations (each client speaks one, as real
ones do); lognormal latencies per code; some error answers; long-polling pulls, the
ones still held when the capture ends left unanswered; a broker's oneway
NOTIFY_CONSUMER_IDS_CHANGED to its consumers and the Java client's oneway
UPDATE_CONSUMER_OFFSET; a few responses to requests made before the capture started
(orphans); a few frames whose header is garbage; and a few torn connections (the
client vanishes, its calls in flight never answered; in a pcap capture, a lost TCP
segment as well).

The generator writes the capture and ``FILE.truth.json`` beside it: every count of
``summary.json`` (same keys, same shape; ``stream_problems`` lists the connections
that must be reported) and the exact latency percentiles. Frames are encoded once per
template with :func:`trocket.codecs.serialize.encode_command` and the opaque patched
in (a frame's bytes are exactly what the codec writes for that opaque).
"""

from __future__ import annotations

import heapq
import json
import os
import random
import struct
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator

import attrs

from trocket.codecs.capture import Direction, Role, encode_file_header, encode_record_fields
from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.serialize import encode_command

__all__ = ["SynthFrame", "generate", "write_native", "percentile", "truth_path"]

T0_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
_SENTINEL = 1_987_654_321
_SENTINEL_TEXT = str(_SENTINEL).encode()
_PREFIX = struct.Struct(">II")

NAMESRV = "10.0.0.1:9876"
BROKERS = ("10.0.0.11:10911", "10.0.0.12:10911")
TOPICS = ("orders", "payments", "audit", "clicks", "inventory")


@attrs.frozen(slots=True)
class SynthFrame:
    ts_ns: int
    conn_id: int
    client: str
    server: str
    to_server: bool
    frame: bytes


@attrs.define(slots=True)
class _Conn:
    conn_id: int
    client: str
    server: str
    serialize: SerializeType
    language: LanguageCode
    opaque: int = 0
    torn_at: int | None = None  # ns: nothing on this connection from then on
    frames: int = 0
    suspend: bool = False  # a push consumer's pulls let the broker hold them (long polling)


def percentile(sorted_values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (Spark's ``percentile``, numpy's default)."""
    n = len(sorted_values)
    pos = p * (n - 1)
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class _Templates:
    """Encoded frames with a placeholder opaque, patched per use."""

    def __init__(self) -> None:
        self._cache: dict[tuple, tuple[bytes, int, bool]] = {}

    def frame(self, key: tuple, build: Callable[[], RemotingCommand], opaque: int) -> bytes:
        entry = self._cache.get(key)
        if entry is None:
            cmd = build()
            cmd.opaque = _SENTINEL
            data = encode_command(cmd)
            if cmd.serialize_type == SerializeType.ROCKETMQ:
                entry = (data, 13, True)
            else:
                entry = (data, data.index(_SENTINEL_TEXT), False)
            self._cache[key] = entry
        data, at, binary = entry
        if binary:
            return b"".join((data[:at], opaque.to_bytes(4, "big", signed=True), data[at + 4 :]))
        text = str(opaque).encode()
        delta = len(text) - len(_SENTINEL_TEXT)
        total, word = _PREFIX.unpack_from(data, 0)
        return b"".join(
            (_PREFIX.pack(total + delta, word + delta), data[8:at], text, data[at + len(_SENTINEL_TEXT) :])
        )


def _rng_latency_ns(rng: random.Random, median_ms: float, sigma: float) -> int:
    return max(20_000, int(rng.lognormvariate(0.0, sigma) * median_ms * 1e6))


# (code, weight, oneway?) of what clients send to brokers, by client kind
_PRODUCER_MIX = ((310, 70, False), (34, 6, False), (320, 8, False))
_CONSUMER_MIX = ((11, 60, False), (34, 5, False), (15, 10, True), (14, 3, False), (38, 4, False), (36, 2, False))


def generate(n_frames: int, *, seed: int = 7) -> tuple[Iterator[SynthFrame], dict]:
    """Frames in timestamp order (a generator) and, once it is exhausted, the truth dict
    (filled in place)."""
    truth: dict = {}
    return _frames(n_frames, seed, truth), truth


def _frames(n_frames: int, seed: int, truth: dict) -> Iterator[SynthFrame]:
    rng = random.Random(seed)
    tpl = _Templates()
    duration_ns = max(10, n_frames // 2000) * 10**9
    end_ns = T0_NS + duration_ns
    conns: list[_Conn] = []
    by_kind: dict[str, list[_Conn]] = defaultdict(list)
    port = iter(range(40000, 65000))

    def conn(kind: str, client_host: str, server: str, serialize: SerializeType, language: LanguageCode) -> _Conn:
        c = _Conn(len(conns) + 1, f"{client_host}:{next(port)}", server, serialize, language)
        conns.append(c)
        by_kind[kind].append(c)
        return c

    n_clients = max(4, min(40, n_frames // 2000))
    for i in range(n_clients):
        kind = "producer" if i % 2 == 0 else "consumer"
        host = f"10.0.{1 if kind == 'producer' else 2}.{i + 10}"
        ser = SerializeType.ROCKETMQ if i % 3 == 0 else SerializeType.JSON
        lang = LanguageCode.CPP if ser == SerializeType.JSON else LanguageCode.JAVA
        conn(f"{kind}-ns", host, NAMESRV, ser, lang)
        for b in BROKERS:
            conn(kind, host, b, ser, lang)
    for b in BROKERS:
        conn("broker-ns", b.split(":")[0], NAMESRV, SerializeType.JSON, LanguageCode.JAVA)
    for c in by_kind["consumer"]:
        c.suspend = c.conn_id % 3 != 0  # push consumers; the rest pull without suspending
    # a few torn connections: the client vanishes somewhere in the second half
    for c in rng.sample(by_kind["consumer"] + by_kind["producer"], k=min(3, len(by_kind["producer"]))):
        c.torn_at = T0_NS + int(duration_ns * rng.uniform(0.5, 0.9))

    requests = Counter()
    oneways = Counter()
    responses = Counter()
    pairs = Counter()
    unanswered = Counter()
    serialize = Counter()
    latencies: dict[int, array] = defaultdict(lambda: array("d"))
    held_latencies: dict[int, array] = defaultdict(lambda: array("d"))
    held = Counter()  # (code, outcome) of the held polls
    connections_seen: set[str] = set()
    counts = Counter()
    problems: set[str] = set()
    pending: list[tuple[int, int, int, int, bytes, int, int]] = []  # heap of responses
    seq = 0
    budget = n_frames

    def make_request(c: _Conn, code: int, oneway: bool, to_server: bool = True) -> bytes:
        topic = TOPICS[c.conn_id % len(TOPICS)]
        group = f"group-{c.conn_id % 7}"
        ext: dict[str, str]
        body = b""
        if code in (310, 320):
            ext = {"a": f"P{group}", "b": topic, "c": "TBW102", "d": "4", "e": str(c.conn_id % 4), "f": "0",
                   "g": "1767225600000", "h": "0", "i": "KEYS\x01k\x02WAIT\x01true\x02", "j": "0", "k": "false", "m": "false"}  # fmt: skip
            # a batch is entries led by their TOTALSIZE (MessageDecoder.encodeMessages)
            body = b"m" * 200 if code == 310 else b"".join(struct.pack(">II", 500, 0) + b"m" * 492 for _ in range(4))
        elif code == 11:
            ext = {"consumerGroup": f"C{group}", "topic": topic, "queueId": str(c.conn_id % 4), "queueOffset": "1024",
                   "maxMsgNums": "32", "sysFlag": "6" if c.suspend else "4", "commitOffset": "1000",
                   "suspendTimeoutMillis": "15000", "subVersion": "0"}  # fmt: skip
        elif code in (14, 15):
            ext = {"consumerGroup": f"C{group}", "topic": topic, "queueId": str(c.conn_id % 4)}
            if code == 15:
                ext["commitOffset"] = "1024"
        elif code == 36:
            ext = {"group": f"C{group}", "offset": "77", "delayLevel": "3", "originMsgId": "0A00000100002A9F0000000000000001", "originTopic": topic, "maxReconsumeTimes": "16"}  # fmt: skip
        elif code == 38:
            ext = {"consumerGroup": f"C{group}"}
        elif code == 40:
            ext = {"consumerGroup": f"C{group}"}
        elif code == 105:
            ext = {"topic": topic}
        elif code == 103:
            ext = {"brokerName": "broker-a", "brokerAddr": c.client, "clusterName": "DefaultCluster", "haServerAddr": c.client, "brokerId": "0", "compressed": "false"}  # fmt: skip
            body = b"{}" * 600
        else:
            ext = {}
            client_id = f"{c.client.split(':')[0]}@{c.conn_id % 2}"
            body = f'{{"clientID":"{client_id}","heartbeatFingerprint":0,"producerDataSet":[],"consumerDataSet":[]}}'.encode() if code == 34 else b""
        key = ("req", c.conn_id, code, oneway, to_server)
        return tpl.frame(
            key,
            lambda: RemotingCommand.request(code, ext_fields=ext, body=body, oneway=oneway, language=c.language,
                                            serialize_type=c.serialize),  # fmt: skip
            c.opaque,
        )

    def make_response(c: _Conn, req_code: int, code: int, opaque: int) -> bytes:
        remark = None if code == 0 else f"error {code}"
        ext = None
        body = b""
        if req_code in (310, 320) and code == 0:
            ext = {"msgId": "0A00000B00002A9F00000000000A0B0C", "queueId": "1", "queueOffset": "4242"}
        elif req_code == 11 and code == 0:
            ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": "1056", "minOffset": "0", "maxOffset": "9000"}
            # stored messages (TOTALSIZE, MAGICCODE, ...), three of them
            body = b"".join(struct.pack(">II", 1000, 0xDAA320A7) + b"x" * 992 for _ in range(3))
        elif req_code == 105 and code == 0:
            body = b'{"brokerDatas":[],"queueDatas":[]}' * 5
        elif req_code == 14 and code == 0:
            ext = {"offset": "1000"}
        key = ("resp", c.conn_id, req_code, code)
        return tpl.frame(
            key,
            lambda: RemotingCommand.response(code, remark, ext_fields=ext, body=body, serialize_type=c.serialize),
            opaque,
        )

    def emit(ts: int, c: _Conn, to_server: bool, frame: bytes) -> SynthFrame:
        nonlocal budget
        budget -= 1
        c.frames += 1
        connections_seen.add(f"{c.client}->{c.server}")
        return SynthFrame(ts, c.conn_id, c.client, c.server, to_server, frame)

    def answer(c: _Conn, code: int) -> tuple[int, int]:
        """(response code, latency ns) of one request."""
        r = rng.random()
        if code in (310, 320):
            rc = 0 if r < 0.95 else (17 if r < 0.97 else (2 if r < 0.99 else 10))
            return rc, _rng_latency_ns(rng, 2.0 if code == 310 else 5.0, 0.6)
        if code == 11 and not c.suspend:
            return (0 if r < 0.65 else 19), _rng_latency_ns(rng, 1.2, 0.6)
        if code == 11:
            if r < 0.65:
                return 0, _rng_latency_ns(rng, 1.5, 0.7)
            if r < 0.75:
                return 20, _rng_latency_ns(rng, 0.8, 0.5)
            return 19, int(rng.uniform(1.0, 15.0) * 1e9)  # held by long polling until it expired
        if code == 105:
            return (0 if r < 0.9 else 17), _rng_latency_ns(rng, 0.6, 0.4)
        if code == 103:
            return 0, _rng_latency_ns(rng, 4.0, 0.4)
        return 0, _rng_latency_ns(rng, 0.9, 0.5)

    broker_clients = by_kind["broker-ns"]
    all_client = [(c, "producer") for c in by_kind["producer"]] + [(c, "consumer") for c in by_kind["consumer"]]
    ns_conns = by_kind["producer-ns"] + by_kind["consumer-ns"]
    mean_gap = duration_ns / max(1, n_frames * 0.6)
    t = T0_NS
    # a few orphans at the start: answers to requests made before the capture began
    for c in rng.sample([c for c, _ in all_client], k=min(3, len(all_client))):
        if budget <= 0:
            break
        t += int(rng.expovariate(1 / mean_gap))
        yield emit(t, c, False, make_response(c, 11, 19, 900_000 + c.conn_id))
        counts["orphans"] += 1
        responses[19] += 1
        serialize[c.serialize.name] += 1
    garbage_left = 3
    while budget > 0:
        t += max(1, int(rng.expovariate(1 / mean_gap)))
        while pending and pending[0][0] <= t and budget > 0:
            ts, _, cid, req_code, frame, rc, lat = heapq.heappop(pending)
            c = conns[cid - 1]
            long_poll = req_code == 11 and c.suspend
            if c.torn_at is not None and ts >= c.torn_at:
                unanswered[req_code] += 1
                if long_poll:
                    held[(req_code, "unanswered")] += 1
                continue
            yield emit(ts, c, False, frame)
            responses[rc] += 1
            pairs[(req_code, rc)] += 1
            serialize[c.serialize.name] += 1
            if long_poll:
                held_latencies[req_code].append(lat / 1e6)
                held[(req_code, {0: "arrival", 19: "expired", 20: "expired"}.get(rc, "other"))] += 1
            else:
                latencies[req_code].append(lat / 1e6)
        if budget <= 0:
            break
        r = rng.random()
        if r < 0.004 and broker_clients:
            c, code, oneway, to_server = rng.choice(broker_clients), 103, False, True
        elif r < 0.03:
            c, code, oneway, to_server = rng.choice(ns_conns), 105, False, True
        elif r < 0.04:
            c = rng.choice(by_kind["consumer"])
            code, oneway, to_server = 40, True, False  # the broker calls its consumer
        elif garbage_left and r < 0.0405 + 0.002 * (n_frames < 5000):
            garbage_left -= 1
            c = rng.choice([c for c, _ in all_client])
            if c.torn_at is not None and t >= c.torn_at:
                continue
            yield emit(t, c, True, b"\x00\x00\x00\x0c\x00\x00\x00\x08{garbage")
            counts["garbage"] += 1
            continue
        else:
            c, kind = rng.choice(all_client)
            mix = _PRODUCER_MIX if kind == "producer" else _CONSUMER_MIX
            code, _, oneway = rng.choices(mix, weights=[m[1] for m in mix])[0]
            to_server = True
        if c.torn_at is not None and t >= c.torn_at:
            continue
        c.opaque += 1
        yield emit(t, c, to_server, make_request(c, code, oneway, to_server))
        requests[code] += 1
        serialize[c.serialize.name] += 1
        if oneway:
            oneways[code] += 1
            continue
        rc, lat = answer(c, code)
        if t + lat >= end_ns:
            unanswered[code] += 1  # still pending when the capture ends
            if code == 11 and c.suspend:
                held[(code, "unanswered")] += 1
            continue
        seq += 1
        heapq.heappush(pending, (t + lat, seq, c.conn_id, code, make_response(c, code, rc, c.opaque), rc, lat))
    for _, _, cid, req_code, *_ in pending:
        unanswered[req_code] += 1
        if req_code == 11 and conns[cid - 1].suspend:
            held[(req_code, "unanswered")] += 1
    for c in conns:
        if c.torn_at is not None and c.frames:
            problems.add(f"{c.client}->{c.server}")

    def by_code(counter: Counter) -> dict[str, int]:
        return {str(k): int(counter[k]) for k in sorted(counter) if counter[k]}

    def figures(values: list[float]) -> dict[str, float]:
        values = sorted(values)
        return {
            "p50": round(percentile(values, 0.5), 6),
            "p95": round(percentile(values, 0.95), 6),
            "p99": round(percentile(values, 0.99), 6),
            "max": round(values[-1], 6),
        }

    latency = {str(code): figures(latencies[code]) for code in sorted(latencies) if latencies[code]}
    held_polls = {}
    for code in sorted({c for c, _ in held}):
        ended = {o: held[(code, o)] for o in ("arrival", "expired", "other", "unanswered")}
        held_polls[str(code)] = {"calls": sum(ended.values()), **ended,
                                 "held_ms": figures(held_latencies[code]) if held_latencies[code] else None}  # fmt: skip
    n_requests = sum(requests.values())
    n_responses = sum(responses.values())
    truth.update(
        {
            "captures": [],
            "frames": n_requests + n_responses + counts["garbage"],
            "requests": n_requests,
            "oneway_requests": sum(oneways.values()),
            "responses": n_responses,
            "connections": len(connections_seen),
            "header_decode_errors": counts["garbage"],
            "frames_by_serialize": {"JSON": serialize["JSON"], "ROCKETMQ": serialize["ROCKETMQ"]},
            "requests_by_code": by_code(requests),
            "responses_by_code": by_code(responses),
            "pairs": [{"request_code": a, "response_code": b, "count": n} for (a, b), n in sorted(pairs.items())],
            "unanswered_by_code": by_code(unanswered),
            "unmatched_responses": counts["orphans"],
            "stream_problems": [],  # native: none; pcap: the torn connections (see write_pcap)
            "latency_ms_by_code": latency,
            "held_polls": held_polls,
            # beyond summary.json: what the capture holds besides
            "torn_connections": sorted(problems),
        }
    )


def truth_path(capture: str) -> str:
    return capture + ".truth.json"


def _write(path: str, chunks: Iterator[bytes]) -> None:
    """Write ``chunks`` to ``path`` about a MiB at a time."""
    buf: list[bytes] = []
    size = 0
    with open(path, "wb") as f:
        for chunk in chunks:
            buf.append(chunk)
            size += len(chunk)
            if size >= 1 << 20:
                f.write(b"".join(buf))
                buf.clear()
                size = 0
        f.write(b"".join(buf))


def _write_truth(path: str, truth: dict) -> dict:
    truth["captures"] = [os.path.basename(path)]
    with open(truth_path(path), "w", encoding="utf-8") as f:
        json.dump(truth, f, indent=2)
        f.write("\n")
    return truth


def write_native(path: str, n_frames: int, *, seed: int = 7) -> dict:
    """Write a native capture of ``n_frames`` frames and its truth file; returns the truth."""
    frames, truth = generate(n_frames, seed=seed)

    def records() -> Iterator[bytes]:
        yield encode_file_header()
        for fr in frames:
            # recorded by the server end (a tap on the name server and the brokers)
            yield encode_record_fields(
                fr.ts_ns, fr.conn_id, fr.server, fr.client,
                Direction.RECEIVED if fr.to_server else Direction.SENT, Role.SERVER, fr.frame,
            )  # fmt: skip

    _write(path, records())
    return _write_truth(path, truth)


def write_pcap(path: str, n_frames: int, *, seed: int = 7) -> dict:
    """The same traffic as :func:`write_native` as a pcap of TCP segments (Ethernet,
    nanosecond timestamps), written with :mod:`trocket.codecs.pcap_write`: each
    connection opens with a handshake; a torn connection ends in the middle of a frame
    (its first half sent, then nothing), which the reader must report."""
    from trocket.codecs.pcap_write import PcapWriter, TcpFlow

    writer = PcapWriter(nanos=True)
    frames, truth = generate(n_frames, seed=seed)
    flows: dict[int, TcpFlow] = {}

    def packets() -> Iterator[bytes]:
        yield writer.header()
        for fr in frames:
            flow = flows.get(fr.conn_id)
            if flow is None:
                flow = flows[fr.conn_id] = TcpFlow(writer, fr.client, fr.server, client_isn=fr.conn_id * 7919, server_isn=fr.conn_id * 104729)
                yield from flow.handshake(fr.ts_ns - 3000)
            yield from flow.send(fr.ts_ns, "client" if fr.to_server else "server", fr.frame)
        half = b"\x00\x00\x01\x00\x00\x00\x00\x10" + b"{" * 40  # a frame of 256 bytes, cut after 48
        for conn in truth["torn_connections"]:
            flow = next(fl for fl in flows.values() if f"{fl.client}->{fl.server}" == conn)
            yield from flow.send(T0_NS + 10**12, "client", half)

    _write(path, packets())
    truth["stream_problems"] = list(truth["torn_connections"])  # the connections that must be reported
    return _write_truth(path, truth)
