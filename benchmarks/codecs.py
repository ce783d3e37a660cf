"""Micro-benchmarks of trocket.codecs, one section per topic.

    .venv/bin/python benchmarks/codecs.py                  # every section
    .venv/bin/python benchmarks/codecs.py header           # sections whose title contains "header"
    .venv/bin/python benchmarks/codecs.py --quick          # fewer, shorter repeats (smoke run)
    .venv/bin/python benchmarks/codecs.py --list           # section titles

Each figure is the best of N repeats (timeit style: the minimum is the least disturbed
run), in microseconds per operation. Adding a section: write a function taking a
:class:`Timer` and returning a list of :class:`Row`, decorate it with
``@section("title")``; ``main`` prints every section as a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# -- framework ------------------------------------------------------------------------------


@dataclass
class Row:
    case: str
    path: str
    usec: float | None = None  # µs per op; None for a ratio/info row
    note: str = ""


@dataclass
class Timer:
    repeat: int = 9
    target_seconds: float = 0.1  # per repeat

    def best(self, fn: Callable[[], Any]) -> float:
        """Best-of-``repeat`` time of ``fn`` in µs, each repeat running ~target_seconds."""
        timer = timeit.Timer(fn)
        number, elapsed = timer.autorange()
        if elapsed < self.target_seconds:
            number = max(1, int(number * self.target_seconds / max(elapsed, 1e-9)))
        return min(timer.repeat(repeat=self.repeat, number=number)) / number * 1e6


SECTIONS: list[tuple[str, Callable[[Timer], list[Row]]]] = []


def section(title: str) -> Callable[[Callable[[Timer], list[Row]]], Callable[[Timer], list[Row]]]:
    def register(fn: Callable[[Timer], list[Row]]) -> Callable[[Timer], list[Row]]:
        SECTIONS.append((title, fn))
        return fn

    return register


def print_table(title: str, rows: list[Row]) -> None:
    w_case = max([len("case"), *(len(r.case) for r in rows)])
    w_path = max([len("path"), *(len(r.path) for r in rows)])
    print(f"\n== {title} ==")
    print(f"{'case':<{w_case}}  {'path':<{w_path}}  {'µs/op':>9}  note")
    print(f"{'-' * w_case}  {'-' * w_path}  {'-' * 9}  ----")
    for r in rows:
        usec = f"{r.usec:9.3f}" if r.usec is not None else " " * 9
        print(f"{r.case:<{w_case}}  {r.path:<{w_path}}  {usec}  {r.note}".rstrip())


def ratio_row(case: str, slow: float, fast: float, goal: float | None = None) -> Row:
    ratio = slow / fast
    note = f"generic/fast = {ratio:.1f}x"
    if goal is not None:
        note += f" ({'meets' if ratio >= goal else 'below'} the {goal:g}x goal)"
    return Row(case, "ratio", None, note)


# -- custom headers -------------------------------------------------------------------------

_GOLDEN_DIR = Path(__file__).resolve().parents[1] / "conformance" / "golden" / "java-4.9.8"
_GOLDEN = [_GOLDEN_DIR / "manifest.json"]

# The ext fields of the golden SEND_MESSAGE_V2 frame written by RocketMQ 4.9.8 (used when
# the manifest is not around).
_V2_EXT = {
    "a": "please_rename_unique_group_name",
    "b": "TopicTest",
    "c": "TBW102",
    "d": "4",
    "e": "3",
    "f": "0",
    "g": "1700000000123",
    "h": "0",
    "i": "KEYS\x01OrderID188\x02UNIQ_KEY\x017F00000100002A9F0000000000000000\x02WAIT\x01true\x02TAGS\x01TagA",
    "j": "0",
    "k": "false",
    "l": "16",
    "m": "false",
    "n": "broker-a",
}
_PULL_EXT = {
    "consumerGroup": "cg1",
    "topic": "TopicTest",
    "queueId": "2",
    "queueOffset": "12345678901",
    "maxMsgNums": "32",
    "sysFlag": "7",
    "commitOffset": "12345678000",
    "suspendTimeoutMillis": "15000",
    "subscription": "TagA || TagB",
    "subVersion": "1700000000000",
    "expressionType": "TAG",
    "bname": "broker-a",
}


def _golden_ext(file: str, fallback: dict[str, str]) -> dict[str, str]:
    for path in _GOLDEN:
        if path.is_file():
            for frame in json.loads(path.read_text())["frames"]:
                if frame["file"] == file:
                    return frame["extFields"]
    return fallback


@section("custom header: FastCodes vs generic")
def bench_custom_headers(timer: Timer) -> list[Row]:
    from trocket.codecs.custom_header import (
        compile_codec,
        decode_header,
        encode_header,
        generic_decode,
        generic_encode,
    )
    from trocket.codecs.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2

    rows: list[Row] = []
    cases = [
        ("SendMessageRequestHeaderV2", SendMessageRequestHeaderV2, _golden_ext("send_message_v2__ROCKETMQ.bin", _V2_EXT)),
        ("PullMessageRequestHeader", PullMessageRequestHeader, _golden_ext("pull_message__ROCKETMQ.bin", _PULL_EXT)),
    ]
    for name, cls, ext in cases:
        obj = decode_header(cls, ext)
        assert obj == generic_decode(cls, ext) and encode_header(obj) == generic_encode(obj) == ext
        generated = compile_codec(cls)  # what the class would have without its hand-written codec
        assert generated.decode(ext) == obj and generated.encode(obj) == ext
        fast_dec = timer.best(lambda: decode_header(cls, ext))
        gen_dec = timer.best(lambda: generic_decode(cls, ext))
        cmp_dec = timer.best(lambda: generated.decode(ext))
        fast_enc = timer.best(lambda: encode_header(obj))
        gen_enc = timer.best(lambda: generic_encode(obj))
        cmp_enc = timer.best(lambda: generated.encode(obj))
        n = len(ext)
        rows += [
            Row(f"{name} decode", "fast", fast_dec, "decode_header (FastCodes)"),
            Row(f"{name} decode", "generated", cmp_dec, "compile_codec(cls).decode"),
            Row(f"{name} decode", "generic", gen_dec, "generic_decode (cattrs)"),
            ratio_row(f"{name} decode", gen_dec, fast_dec, goal=5),
            Row(f"{name} encode", "fast", fast_enc, "encode_header (FastCodes)"),
            Row(f"{name} encode", "generated", cmp_enc, "compile_codec(cls).encode"),
            Row(f"{name} encode", "generic", gen_enc, "generic_encode (cattrs)"),
            ratio_row(f"{name} encode", gen_enc, fast_enc, goal=5),
            ratio_row(f"{name} decode+encode", gen_dec + gen_enc, fast_dec + fast_enc, goal=5),
        ]
        # What any encoder producing this dict pays: a bare display of n str->str entries.
        values = list(ext.values())
        keys = list(ext)
        floor_fn = eval(  # noqa: S307 - a literal built from our own key list
            "lambda v: {" + ", ".join(f"{k!r}: v[{i}]" for i, k in enumerate(keys)) + "}"
        )
        rows.append(
            Row(f"{name} encode", "floor", timer.best(lambda: floor_fn(values)), f"dict display of the {n} ext entries")
        )
    return rows


@section("custom header: generated vs generic")
def bench_generated_headers(timer: Timer) -> list[Row]:
    """The headers without a hand-written codec: the codec generated from the declaration
    (what decode_header / encode_header use for them) against the generic cattrs path."""
    from trocket.codecs.custom_header import codec_of, generic_decode, generic_encode, has_fast_codec
    from trocket.codecs.headers import (
        QueryConsumerOffsetResponseHeader,
        RegisterBrokerRequestHeader,
        UpdateConsumerOffsetRequestHeader,
    )

    cases = [
        (UpdateConsumerOffsetRequestHeader, {"consumerGroup": "cg1", "topic": "TopicTest", "queueId": "3",
                                             "commitOffset": "12345678901", "bname": "broker-a"}),
        (QueryConsumerOffsetResponseHeader, {"offset": "12345678901"}),
        (RegisterBrokerRequestHeader, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                                       "clusterName": "DefaultCluster", "haServerAddr": "127.0.0.1:10912",
                                       "brokerId": "0", "compressed": "false", "bodyCrc32": "1234567"}),
    ]
    rows: list[Row] = []
    for cls, ext in cases:
        assert not has_fast_codec(cls)
        codec = codec_of(cls)
        obj = codec.decode(ext)
        assert obj == generic_decode(cls, ext) and codec.encode(obj) == generic_encode(obj)
        name = cls.__name__
        cmp_dec = timer.best(lambda: codec.decode(ext))
        gen_dec = timer.best(lambda: generic_decode(cls, ext))
        cmp_enc = timer.best(lambda: codec.encode(obj))
        gen_enc = timer.best(lambda: generic_encode(obj))
        rows += [
            Row(f"{name} decode", "generated", cmp_dec, f"{len(ext)} fields"),
            Row(f"{name} decode", "generic", gen_dec),
            ratio_row(f"{name} decode", gen_dec, cmp_dec),
            Row(f"{name} encode", "generated", cmp_enc),
            Row(f"{name} encode", "generic", gen_enc),
            ratio_row(f"{name} encode", gen_enc, cmp_enc),
        ]
    return rows


# -- header serializers and whole frames ----------------------------------------------------


def _golden_command(file: str):
    from trocket.codecs.frame import split_frames
    from trocket.codecs.serialize import decode_command

    return decode_command(split_frames((_GOLDEN_DIR / file).read_bytes())[0])


_COMMANDS = [
    ("minimal request", "req_minimal__JSON.bin"),
    ("request, 4 ext, 128 B body", "req_ext4_body128__JSON.bin"),
    ("SEND_MESSAGE_V2 request", "send_message_v2__JSON.bin"),
    ("PULL_MESSAGE request", "pull_message__JSON.bin"),
    ("send response", "send_message_response__JSON.bin"),
]


@section("header serializers: JSON vs ROCKETMQ, per command")
def bench_serializers(timer: Timer) -> list[Row]:
    import attrs

    from trocket.codecs.command import SerializeType
    from trocket.codecs.serialize import decode_command, encode_command, encode_header_bytes

    rows: list[Row] = []
    for name, file in _COMMANDS:
        base = _golden_command(file)
        figures = {}
        for stype in SerializeType:
            cmd = attrs.evolve(base, serialize_type=stype)
            payload = encode_command(cmd)[4:]
            assert encode_command(decode_command(payload)) == encode_command(cmd)
            enc = timer.best(lambda: encode_header_bytes(cmd))
            dec = timer.best(lambda: decode_command(payload))
            figures[stype] = (enc, dec)
            rows.append(Row(f"{name}: encode header", stype.name, enc))
            rows.append(Row(f"{name}: decode command", stype.name, dec))
        (je, jd), (re_, rd) = figures[SerializeType.JSON], figures[SerializeType.ROCKETMQ]
        rows.append(Row(name, "ratio", None, f"JSON/ROCKETMQ: encode {je / re_:.2f}x, decode {jd / rd:.2f}x"))
    return rows


@section("full send frame: decode + encode vs json.loads + json.dumps of its header")
def bench_full_frame(timer: Timer) -> list[Row]:
    from trocket.codecs.frame import FrameDecoder
    from trocket.codecs.serialize import decode_command, encode_command

    rows: list[Row] = []
    for file in ("send_message_v2__JSON.bin", "send_message_v2__ROCKETMQ.bin"):
        raw = (_GOLDEN_DIR / file).read_bytes()
        payload = raw[4:]
        header = payload[4 : 4 + (int.from_bytes(payload[1:4], "big"))]

        def full() -> None:
            decoder = FrameDecoder()
            decoder.feed(raw)
            assert encode_command(decode_command(decoder.next_frame())) is not None

        assert encode_command(decode_command(payload)) == raw
        t_full = timer.best(full)
        rows.append(Row("FrameDecoder + decode_command + encode_command", file.split("__")[1][:-4], t_full))
        if file.endswith("JSON.bin"):
            text = header.decode()
            t_json = timer.best(lambda: json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False).encode())
            rows.append(Row("json.loads + json.dumps of the header", "baseline", t_json))
            ratio = t_full / t_json
            rows.append(Row("trocket / baseline", "ratio", None,
                            f"{ratio:.2f}x ({'meets' if ratio <= 2 else 'above'} the 2x goal)"))
    return rows


@section("SEND_MESSAGE_V2 request decode: ROCKETMQ vs JSON, whole frame")
def bench_send_v2_decode(timer: Timer) -> list[Row]:
    """What the broker does with each send request: frame, command, custom header."""
    from trocket.codecs import header_binary
    from trocket.codecs.frame import FrameDecoder
    from trocket.codecs.custom_header import decode_header
    from trocket.codecs.headers import SendMessageRequestHeaderV2
    from trocket.codecs.serialize import decode_command

    def decode_frame(raw: bytes):
        decoder = FrameDecoder()
        decoder.feed(raw)
        cmd = decode_command(decoder.next_frame())
        return cmd, decode_header(SendMessageRequestHeaderV2, cmd.ext_fields)

    def uncached(raw: bytes):
        # the ext layout seen for the first time: the per-entry reference loop
        header_binary._SHAPES.clear()
        header_binary._MISSES.clear()
        return decode_frame(raw)

    rows: list[Row] = []
    figures = {}
    for stype in ("JSON", "ROCKETMQ"):
        raw = (_GOLDEN_DIR / f"send_message_v2__{stype}.bin").read_bytes()
        cmd, header = decode_frame(raw)
        assert header == decode_frame((_GOLDEN_DIR / "send_message_v2__JSON.bin").read_bytes())[1]
        figures[stype] = timer.best(lambda: decode_frame(raw))
        rows.append(Row("FrameDecoder + decode_command + decode_header", stype, figures[stype]))
    raw = (_GOLDEN_DIR / "send_message_v2__ROCKETMQ.bin").read_bytes()
    cold = timer.best(lambda: uncached(raw))
    rows.append(Row("FrameDecoder + decode_command + decode_header", "ROCKETMQ", cold,
                    "ext layout not cached (reference loop)"))
    ratio = figures["JSON"] / figures["ROCKETMQ"]
    rows.append(Row("JSON / ROCKETMQ", "ratio", None,
                    f"{ratio:.2f}x ({'binary faster' if ratio > 1 else 'binary slower'}); "
                    f"uncached {figures['JSON'] / cold:.2f}x"))
    return rows


# -- compiled accelerator -------------------------------------------------------------------

#: A SEND_MESSAGE (V1) JSON header as the C++ client (PyPI rocketmq 0.4.4) writes it:
#: numbers bare, properties with \u0001/\u0002 escapes and a trailing separator.
_CPP_SEND_HEADER = (
    b'{"code":10,"extFields":{"batch":"0","bornTimestamp":"1700000000123","defaultTopic":"TBW102",'
    b'"defaultTopicQueueNums":4,"flag":0,"producerGroup":"bench_group","properties":"TAGS\\u0001bench'
    b'\\u0002UNIQ_KEY\\u00017F000001000018B4AAC25E4BCD0000\\u0002WAIT\\u0001true\\u0002",'
    b'"queueId":2,"reconsumeTimes":"0","sysFlag":0,"topic":"BenchTopic","unitMode":"0"},"flag":0,'
    b'"language":"CPP","opaque":1234,"serializeTypeCurrentRPC":"JSON","version":409}'
)


def _accel_cases() -> dict[str, Callable[[], Any]]:
    """The request-decode and store-encode steps the broker runs per sent message, through
    the public names (compiled twins or pure functions, whichever this process uses)."""
    from trocket.codecs.frame import FrameDecoder
    from trocket.codecs.header_binary import decode_binary_header
    from trocket.codecs.header_json import decode_json_header
    from trocket.codecs.custom_header import decode_header
    from trocket.codecs.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
    from trocket.codecs.message.properties import decode_properties_bytes, get_property
    from trocket.codecs.message.record import encode_record_into
    from trocket.codecs.command import RemotingCommand, SerializeType
    from trocket.codecs.serialize import decode_command, encode_command

    def request(raw: bytes, cls: type) -> Callable[[], Any]:
        def run() -> Any:
            decoder = FrameDecoder()
            decoder.feed(raw)
            cmd = decode_command(decoder.next_frame())
            return decode_header(cls, cmd.ext_fields)
        return run

    java_rmq = (_GOLDEN_DIR / "send_message_v2__ROCKETMQ.bin").read_bytes()
    java_json = (_GOLDEN_DIR / "send_message_v2__JSON.bin").read_bytes()
    cpp = len(_CPP_SEND_HEADER).to_bytes(4, "big")
    cpp = (4 + len(_CPP_SEND_HEADER) + 128).to_bytes(4, "big") + cpp + _CPP_SEND_HEADER + b"b" * 128
    rmq_header = java_rmq[8 : 8 + int.from_bytes(java_rmq[5:8], "big")]
    props = b"TAGS\x01bench\x02UNIQ_KEY\x017F000001000018B4AAC25E4BCD0000\x02WAIT\x01true"
    buf = bytearray(512)
    record_args = dict(topic=b"BenchTopic", body=b"b" * 128, properties=props, queue_id=2, flag=0, sys_flag=0,
                       born_timestamp=1700000000123, born_host=("127.0.0.1", 50000),
                       store_host=("127.0.0.1", 10911), reconsume_times=0, prepared_transaction_offset=0)
    answers = {
        stype: RemotingCommand.response(0, body=b"b" * 128, ext_fields={"k": "v"}, opaque=7, serialize_type=stype)
        for stype in SerializeType
    }
    return {
        "SEND_MESSAGE_V2 request, Java client (ROCKETMQ): frame+command+header": request(java_rmq, SendMessageRequestHeaderV2),
        "SEND_MESSAGE_V2 request, Java client (JSON): frame+command+header": request(java_json, SendMessageRequestHeaderV2),
        "SEND_MESSAGE request, C++ client (JSON): frame+command+header": request(cpp, SendMessageRequestHeader),
        "decode_binary_header (Java send)": lambda: decode_binary_header(rmq_header),
        "decode_json_header (C++ send)": lambda: decode_json_header(_CPP_SEND_HEADER),
        "encode_record_into (commit log's call, 128 B body)": lambda: encode_record_into(buf, 0, **record_args),
        "get_property x3 (TAGS, WAIT, DELAY absent)": lambda: (
            get_property(props, "TAGS"), get_property(props, "WAIT"), get_property(props, "DELAY")),
        "decode_properties_bytes (3 properties, the client's pull path)": lambda: decode_properties_bytes(props),
        "encode_command, a generic answer (ROCKETMQ, 128 B body)": lambda: encode_command(answers[SerializeType.ROCKETMQ]),
        "encode_command, a generic answer (JSON, 128 B body)": lambda: encode_command(answers[SerializeType.JSON]),
    }


def _accel_child(repeat: int, target: float) -> None:
    from trocket.codecs import accel

    timer = Timer(repeat=repeat, target_seconds=target)
    figures = {name: timer.best(fn) for name, fn in _accel_cases().items()}
    print(json.dumps({"active": accel.ACTIVE, "reason": accel.REASON, "figures": figures}))


@section("compiled accelerator: pure vs compiled, per sent message")
def bench_accel(timer: Timer) -> list[Row]:
    """Each path in its own child process (``TROCKET_PURE=1`` for the pure one), same cases;
    three rounds alternating the two, best figure of each kept (a busy machine's load
    moves between children)."""
    import subprocess

    runs: dict[str, dict] = {}
    repeat = max(1, timer.repeat // 3)
    for _ in range(3):
        for label, pure in (("pure", True), ("compiled", False)):
            env = dict(os.environ)
            env.pop("TROCKET_PURE", None)
            if pure:
                env["TROCKET_PURE"] = "1"
            out = subprocess.run(
                [sys.executable, __file__, "--accel-child", str(repeat), str(timer.target_seconds)],
                env=env, check=True, capture_output=True, text=True,
            ).stdout
            run = json.loads(out.strip().splitlines()[-1])
            if label in runs:
                best = runs[label]["figures"]
                for name, usec in run["figures"].items():
                    best[name] = min(best[name], usec)
            else:
                runs[label] = run
    if not runs["compiled"]["active"]:
        return [Row("accelerator", "off", None, runs["compiled"]["reason"])]
    rows: list[Row] = []
    for name, pure_us in runs["pure"]["figures"].items():
        fast_us = runs["compiled"]["figures"][name]
        rows.append(Row(name, "pure", pure_us))
        rows.append(Row(name, "compiled", fast_us, f"pure/compiled = {pure_us / fast_us:.1f}x"))
    return rows


# -- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("filters", nargs="*", help="run sections whose title contains any of these")
    parser.add_argument("--quick", action="store_true", help="3 repeats of ~0.05 s (smoke run)")
    parser.add_argument("--repeat", type=int, default=9, help="repeats per figure (best is kept)")
    parser.add_argument("--list", action="store_true", help="list section titles and exit")
    parser.add_argument("--accel-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.accel_child:
        _accel_child(int(args.accel_child[0]), float(args.accel_child[1]))
        return 0

    if args.list:
        for title, _ in SECTIONS:
            print(title)
        return 0
    timer = Timer(repeat=3, target_seconds=0.05) if args.quick else Timer(repeat=args.repeat)
    chosen = [(t, fn) for t, fn in SECTIONS if not args.filters or any(f.lower() in t.lower() for f in args.filters)]
    if not chosen:
        parser.error(f"no section matches {args.filters}")

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"trocket codecs benchmark: {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, load {load:.2f}; best of {timer.repeat}, µs per op"
    )
    for title, fn in chosen:
        started = time.perf_counter()
        rows = fn(timer)
        print_table(title, rows)
        print(f"({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
