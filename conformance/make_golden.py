"""Write trocket's own golden frames into ``conformance/golden/``.

    .venv/bin/python -m trocket.conformance.make_golden [DIR]

Each case is a command written in both serializations. The Java-written frames in
``golden/java-4.9.8/`` are the reference; these extend the coverage to edges the Java
set leaves out (empty vs absent, non-ASCII, control characters, large bodies, codes
only JSON can carry). The conformance check proves they decode to the manifest and
re-encode byte for byte; regenerating them must not change a byte.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trocket.codecs.command import RPC_ONEWAY, RPC_RESPONSE, LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.serialize import encode_command

from .golden import MANIFEST, command_to_entry, write_manifest

DEFAULT_DIR = Path(__file__).parent / "golden"

_BODY128 = bytes(range(128))
_UNIQ = "7F00000100002A9F0000000000000001"
_PROPS = "KEYS\x01OrderID188\x02UNIQ_KEY\x017F00000100002A9F0000000000000000\x02WAIT\x01true\x02TAGS\x01TagA"


def _cases() -> list[tuple[str, str, RemotingCommand, bool]]:
    """(name, note, command, json_only)."""
    c = RemotingCommand
    return [
        ("req_remark_absent_ext_absent", "request: no remark, no ext fields, no body", c(code=100, opaque=1), False),
        ("req_remark_empty_ext_empty", "request: remark \"\" and ext {} (JSON writes them; binary reads them back as absent)",
         c(code=100, opaque=2, remark="", ext_fields={}), False),
        ("req_remark_unicode", "request: non-ASCII remark, raw UTF-8 in JSON",
         c(code=100, opaque=3, remark="h\u00e9llo \u4e2d\u6587 \U0001F680"), False),
        ("req_ext_unicode", "request: non-ASCII ext keys and values",
         c(code=100, opaque=4, ext_fields={"t\u00f6pic": "\u6d88\u606f", "k": "v"}), False),
        ("req_ext_empty_value", "request: an ext field with the empty string",
         c(code=100, opaque=5, ext_fields={"empty": "", "k": "v"}), False),
        ("req_ext_control_chars", "request: control characters fastjson escapes as \\u00XX upper-case, and 0x7F..0x9F",
         c(code=100, opaque=6, ext_fields={"ctl": "a\x01b\x0bc\x1fd\x7fe\x9f", "ws": "\t\n\r\b\f", "q": "\"\\/"}), False),
        ("req_oneway", "oneway request (flag bit 1)",
         c(code=100, opaque=7, flag=RPC_ONEWAY, ext_fields={"k": "v"}, body=_BODY128[:16]), False),
        ("req_body_empty_ext4", "request with 4 ext fields and an empty body",
         c(code=100, opaque=8, ext_fields={"k1": "v1", "key3": "3", "k2": "value2", "key4": "hello world"}), False),
        ("req_body_large", "request with a 64 KiB body",
         c(code=100, opaque=9, body=bytes(i % 251 for i in range(64 * 1024))), False),
        ("req_language_cpp", "request from a CPP client, version 63",
         c(code=105, language=LanguageCode.CPP, version=63, opaque=10, ext_fields={"topic": "TopicTest"}), False),
        ("req_opaque_negative", "opaque wrapped past int32 max, as Java's AtomicInteger does",
         c(code=100, opaque=-2147483648), False),
        ("req_code_large", "a code above 32767: only JSON can carry it",
         c(code=40000, opaque=11), True),
        ("send_message_v2", "SEND_MESSAGE_V2 (310) with a..m as the Java producer writes them",
         c(code=310, version=409, opaque=1000, ext_fields={
             "a": "please_rename_unique_group_name", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3",
             "f": "0", "g": "1700000000123", "h": "0", "i": _PROPS, "j": "0", "k": "false", "l": "16", "m": "false"},
           body=_BODY128), False),
        ("pull_message", "PULL_MESSAGE (11) as a push consumer sends it (sysFlag 7, suspend 15000)",
         c(code=11, version=409, opaque=2000, ext_fields={
             "consumerGroup": "cg1", "topic": "TopicTest", "queueId": "2", "queueOffset": "100",
             "maxMsgNums": "32", "sysFlag": "7", "commitOffset": "90", "suspendTimeoutMillis": "15000",
             "subscription": "*", "subVersion": "1700000000000", "expressionType": "TAG"}), False),
        ("end_transaction", "END_TRANSACTION (37), oneway, a commit as TransactionMQProducer ends it (HashMap order)",
         c(code=37, version=409, opaque=1001, flag=RPC_ONEWAY, ext_fields={
             "producerGroup": "tx_producer_group", "commitLogOffset": "11414", "msgId": _UNIQ,
             "tranStateTableOffset": "7", "commitOrRollback": "8", "fromTransactionCheck": "false"}), False),
        ("check_transaction_state", "CHECK_TRANSACTION_STATE (39), broker -> producer, oneway, a record body",
         c(code=39, opaque=3000, flag=RPC_ONEWAY, ext_fields={
             "commitLogOffset": "11650", "msgId": _UNIQ, "tranStateTableOffset": "8",
             "offsetMsgId": "7F00000100002A9F0000000000002D82", "transactionId": _UNIQ}, body=_BODY128), False),
        ("resp_success_ext", "response SUCCESS to a send: msgId, queueId, queueOffset",
         c(code=0, opaque=1000, flag=RPC_RESPONSE, ext_fields={
             "msgId": "7F00000100002A9F0000000000000003", "queueId": "3", "queueOffset": "42"}), False),
        ("resp_system_busy", "response SYSTEM_BUSY (2) with RocketMQ's flow-control remark",
         c(code=2, opaque=12, flag=RPC_RESPONSE,
           remark="[OVERLOAD]system busy, start flow control for a while"), False),
        ("resp_not_supported", "response REQUEST_CODE_NOT_SUPPORTED (3) naming the code",
         c(code=3, opaque=13, flag=RPC_RESPONSE, remark=" request type 999 not supported"), False),
        ("resp_pull_not_found", "response PULL_NOT_FOUND (19) with offsets",
         c(code=19, opaque=2000, flag=RPC_RESPONSE, remark="No new message", ext_fields={
             "suggestWhichBrokerId": "0", "nextBeginOffset": "100", "minOffset": "0", "maxOffset": "100"}), False),
        ("resp_with_body", "response with a JSON body (route data shape)",
         c(code=0, opaque=14, flag=RPC_RESPONSE,
           body=b'{"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}'), False),
    ]


def write_golden(folder: Path = DEFAULT_DIR) -> list[dict]:
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, note, cmd, json_only in _cases():
        stypes = [SerializeType.JSON] if json_only else [SerializeType.JSON, SerializeType.ROCKETMQ]
        for stype in stypes:
            cmd.serialize_type = stype
            file = f"{name}__{stype.name}.bin"
            (folder / file).write_bytes(encode_command(cmd))
            entry = command_to_entry(cmd, file, note)
            if stype is SerializeType.ROCKETMQ:
                # What the binary form reads back: "" and {} are absent there.
                entry["remark"] = cmd.remark or None
                entry["extFields"] = cmd.ext_fields or None
            entries.append(entry)
    write_manifest(folder, entries)
    return entries


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else DEFAULT_DIR
    entries = write_golden(folder)
    print(f"wrote {len(entries)} frames and {MANIFEST} to {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
