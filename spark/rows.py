"""One frame -> one row of the ``frames`` table, decoded with :mod:`trocket.codecs`.

Pure Python, no Spark: the executors call :func:`frame_row` on every frame, and the
single-process baseline of ``benchmarks/spark_analyze.py`` calls the same function, so
both measure the same decoder. A row is a plain tuple in :data:`FRAME_FIELDS` order
(tuples pickle and cross into the JVM cheaper than dicts or Row objects).
"""

from __future__ import annotations

import re
import struct

from trocket.codecs.codes import request_code_name, response_code_name
from trocket.codecs.command import RPC_ONEWAY, RPC_RESPONSE, LanguageCode
from trocket.codecs.errors import CodecError
from trocket.codecs.serialize import decode_command

__all__ = [
    "FRAME_FIELDS",
    "F",
    "TO_SERVER",
    "TO_CLIENT",
    "frame_row",
    "endpoints",
]

TO_SERVER = "to_server"
TO_CLIENT = "to_client"

#: (name, Spark SQL type) of every column of ``frames``, in row order.
FRAME_FIELDS: tuple[tuple[str, str], ...] = (
    ("capture", "string"),  # the capture file's name
    # the connection within the capture: the recorder's connection id (native), the file
    # offset of the connection's first packet in this capture (pcap)
    ("connection_id", "long"),
    # position in the connection: file offset (native) or frame index (pcap); with the
    # two above the key of a frame
    ("seq", "long"),
    ("ts_ns", "long"),  # Unix time in nanoseconds
    ("connection", "string"),  # "client->server"
    ("client", "string"),
    ("server", "string"),
    ("direction", "string"),  # to_server / to_client
    ("kind", "string"),  # request / oneway / response; null when the header did not decode
    ("serialize", "string"),  # JSON / ROCKETMQ
    ("code", "int"),
    ("code_name", "string"),
    ("opaque", "int"),
    ("flag", "int"),
    ("language", "string"),
    ("version", "int"),
    ("frame_len", "int"),  # whole frame, length prefix included
    ("header_len", "int"),
    ("body_len", "int"),
    ("remark", "string"),
    ("topic", "string"),
    ("group", "string"),
    ("queue_id", "int"),
    # a PULL_MESSAGE that lets the broker hold it (sysFlag's suspend bit): how long, in
    # ms (suspendTimeoutMillis); null for every other frame
    ("suspend_ms", "long"),
    ("broker_name", "string"),
    ("queue_offset", "long"),
    ("msg_id", "string"),
    ("ext", "map<string,string>"),
    ("decode_error", "string"),  # why the header did not decode (the frame is still counted)
    # message level (null where the frame says nothing of it):
    ("client_id", "string"),  # the client instance: a HEART_BEAT's clientID, or an ext clientID
    ("commit_offset", "long"),  # a consumer's committed offset (PULL_MESSAGE, UPDATE_CONSUMER_OFFSET)
    ("max_offset", "long"),  # the queue's max offset in a pull's answer
    # messages a frame carries: 1 for a SEND_MESSAGE(_V2), the entries of a batch, the
    # stored messages of a pull's answer; their bytes (bodies for a send, the stored
    # records for a pull: what BrokerStatsManager counts as got)
    ("messages", "int"),
    ("message_bytes", "long"),
)


class F:
    """Indices of the ``frames`` row fields (:data:`FRAME_FIELDS`)."""

    CAPTURE, CONN_ID, SEQ, TS, CONNECTION, CLIENT, SERVER, DIRECTION, KIND, SERIALIZE, CODE, CODE_NAME, OPAQUE = range(13)
    FLAG, LANGUAGE, VERSION, FRAME_LEN, HEADER_LEN, BODY_LEN, REMARK, TOPIC, GROUP, QUEUE_ID = range(13, 23)
    SUSPEND_MS, BROKER_NAME, QUEUE_OFFSET, MSG_ID, EXT, DECODE_ERROR = range(23, 29)
    CLIENT_ID, COMMIT_OFFSET, MAX_OFFSET, MESSAGES, MESSAGE_BYTES = range(29, 34)


_LANGUAGES = {m: m.name for m in LanguageCode}  # keyed by the enum (an IntEnum: ints find it too)
_SERIALIZE = ("JSON", "ROCKETMQ")
# ext field -> column; SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE use one-letter names.
_TOPIC_KEYS = ("topic", "b")
_GROUP_KEYS = ("consumerGroup", "producerGroup", "group", "a")
_QUEUE_KEYS = ("queueId", "e")
_BROKER_KEYS = ("brokerName", "bname", "n")
_OFFSET_KEYS = ("queueOffset", "commitOffset", "offset")
_V2_CODES = frozenset({310, 320})
_PULL = 11  # PULL_MESSAGE
_SEND_CODES = frozenset({10, 310})  # SEND_MESSAGE, SEND_MESSAGE_V2: one message, the body
_SEND_BATCH = 320
_HEART_BEAT = 34
_CLIENT_ID = re.compile(rb'"clientID"\s*:\s*"([^"]*)"')
#: MAGICCODE of stored messages (v1, v2): a pull's answer body is a run of them
_STORED_MAGICS = (b"\xda\xa3\x20\xa7", b"\xda\xa3\x20\xab")
_U32 = struct.Struct(">I")


def _walk_records(body: bytes) -> tuple[int, int]:
    """(entries, bytes) of a run of length-prefixed records (TOTALSIZE first): stored
    messages or a batch's entries; a record cut short ends the walk."""
    n = pos = 0
    end = len(body)
    unpack = _U32.unpack_from
    while pos + 4 <= end:
        size = unpack(body, pos)[0]
        if size < 8 or pos + size > end:
            break
        pos += size
        n += 1
    return n, pos
_FLAG_SUSPEND = 0x2  # PullSysFlag.FLAG_SUSPEND: the broker may hold the pull (long polling)


def endpoints(local: str, remote: str, sent: bool, recorder_is_client: bool) -> tuple[str, str, str]:
    """(client, server, direction) of a frame seen by a recording endpoint."""
    if recorder_is_client:
        return local, remote, TO_SERVER if sent else TO_CLIENT
    return remote, local, TO_CLIENT if sent else TO_SERVER


def _first(ext: dict[str, str], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = ext.get(key)
        if value is not None:
            return value
    return None


def _int(value: str | None, bits: int = 64) -> int | None:
    """An ext field as an integer column value; None when absent, not a number or out of range."""
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        return None
    limit = 1 << (bits - 1)
    return n if -limit <= n < limit else None


def frame_row(
    capture: str,
    connection_id: int,
    seq: int,
    ts_ns: int,
    client: str,
    server: str,
    direction: str,
    frame: bytes,
) -> tuple:
    """The ``frames`` row of one whole frame (its 4-byte length prefix included)."""
    connection = f"{client}->{server}"
    flen = len(frame)
    try:
        # bytes, not a view: the codecs' compiled twin of decode_command reads bytes
        # only (a memoryview takes the pure-Python path)
        cmd = decode_command(frame[4:])
    except CodecError as exc:
        return (
            capture, connection_id, seq, ts_ns, connection, client, server, direction,
            None, None, None, None, None, None, None, None, flen, None, None,
            None, None, None, None, None, None, None, None, None, str(exc) or type(exc).__name__,
            None, None, None, None, None,
        )  # fmt: skip
    flag = cmd.flag
    code = cmd.code
    if flag & RPC_RESPONSE:
        kind = "response"
        code_name = _RESPONSE_NAMES.get(code) or _name(_RESPONSE_NAMES, response_code_name, code)
    else:
        kind = "oneway" if flag & RPC_ONEWAY else "request"
        code_name = _REQUEST_NAMES.get(code) or _name(_REQUEST_NAMES, request_code_name, code)
    language = _LANGUAGES.get(cmd.language)
    if language is None:
        language = str(cmd.language)
    body = cmd.body
    body_len = len(body)
    messages = message_bytes = client_id = None
    if body_len >= 8:
        if flag & RPC_RESPONSE:
            if body[4:8] in _STORED_MAGICS:  # a pull's answer: stored messages
                messages, message_bytes = _walk_records(body)
        elif code in _SEND_CODES:
            messages, message_bytes = 1, body_len
        elif code == _SEND_BATCH:
            messages, message_bytes = _walk_records(body)
        elif code == _HEART_BEAT:
            m = _CLIENT_ID.search(body)
            client_id = m.group(1).decode("utf-8", "replace") if m else None
    ext = cmd.ext_fields
    if not ext:
        return (
            capture, connection_id, seq, ts_ns, connection, client, server, direction,
            kind, _SERIALIZE[cmd.serialize_type], code, code_name, cmd.opaque, flag, language, cmd.version,
            flen, flen - 8 - body_len, body_len, cmd.remark,
            None, None, None, None, None, None, None, None, None, client_id, None, None, messages, message_bytes,
        )  # fmt: skip
    get = ext.get
    if code in _V2_CODES and not (flag & RPC_RESPONSE):
        topic = get("b")
        group = get("a")
        queue = get("e")
    else:
        topic = get("topic")
        if topic is None:
            topic = get("b")
        group = _first(ext, _GROUP_KEYS)
        queue = get("queueId")
        if queue is None:
            queue = get("e")
    offset = _first(ext, _OFFSET_KEYS)
    suspend = None
    if code == _PULL and not (flag & RPC_RESPONSE):
        sys_flag = _int(get("sysFlag"), 32)
        if sys_flag is not None and sys_flag & _FLAG_SUSPEND:
            suspend = _int(get("suspendTimeoutMillis")) or 0
    return (
        capture, connection_id, seq, ts_ns, connection, client, server, direction,
        kind, _SERIALIZE[cmd.serialize_type], code, code_name, cmd.opaque, flag, language, cmd.version,
        flen, flen - 8 - body_len, body_len, cmd.remark,
        topic, group, None if queue is None else _small_int(queue, 32), suspend,
        _first(ext, _BROKER_KEYS), None if offset is None else _int(offset), get("msgId"),
        ext, None, client_id or get("clientID"), _int(get("commitOffset")), _int(get("maxOffset")), messages, message_bytes,
    )  # fmt: skip


_REQUEST_NAMES: dict[int, str] = {}  # caches of the codecs' names, bounded
_RESPONSE_NAMES: dict[int, str] = {}


def _name(cache: dict[int, str], lookup, code: int) -> str:
    if len(cache) >= 4096:
        cache.clear()
    cache[code] = name = lookup(code)
    return name


_SMALL: dict[tuple[str, int], int | None] = {}


def _small_int(value: str, bits: int) -> int | None:
    """:func:`_int` through a bounded cache (queue ids repeat)."""
    key = (value, bits)
    n = _SMALL.get(key, _SMALL)
    if n is _SMALL:
        n = _int(value, bits)
        if len(_SMALL) >= 4096:
            _SMALL.clear()
        _SMALL[key] = n
    return n  # type: ignore[return-value]
