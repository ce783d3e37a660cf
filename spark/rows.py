"""One frame -> one row of the ``frames`` table, decoded with :mod:`trocket.codecs`.

Pure Python, no Spark: the executors call :func:`frame_row` on every frame, and the
single-process baseline of ``benchmarks/spark_analyze.py`` calls the same function, so
both measure the same decoder. A row is a plain tuple in :data:`FRAME_FIELDS` order
(tuples pickle and cross into the JVM cheaper than dicts or Row objects).
"""

from __future__ import annotations

from trocket.codecs.codes import request_code_name, response_code_name
from trocket.codecs.command import RPC_ONEWAY, RPC_RESPONSE, LanguageCode
from trocket.codecs.errors import CodecError
from trocket.codecs.serialize import decode_command

__all__ = [
    "FRAME_FIELDS",
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
    ("seq", "long"),  # position in the capture: file offset (native) or frame index (pcap)
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
    ("broker_name", "string"),
    ("queue_offset", "long"),
    ("msg_id", "string"),
    ("ext", "map<string,string>"),
    ("decode_error", "string"),  # why the header did not decode (the frame is still counted)
)

_LANGUAGES = {int(m): m.name for m in LanguageCode}
_SERIALIZE = ("JSON", "ROCKETMQ")
# ext field -> column; SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE use one-letter names.
_TOPIC_KEYS = ("topic", "b")
_GROUP_KEYS = ("consumerGroup", "producerGroup", "group", "a")
_QUEUE_KEYS = ("queueId", "e")
_BROKER_KEYS = ("brokerName", "bname", "n")
_OFFSET_KEYS = ("queueOffset", "commitOffset", "offset")
_V2_CODES = frozenset({310, 320})


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
        cmd = decode_command(frame[4:])
    except CodecError as exc:
        return (
            capture, seq, ts_ns, connection, client, server, direction,
            None, None, None, None, None, None, None, None, flen, None, None,
            None, None, None, None, None, None, None, None, str(exc) or type(exc).__name__,
        )  # fmt: skip
    flag = cmd.flag
    code = cmd.code
    if flag & RPC_RESPONSE:
        kind = "response"
        code_name = response_code_name(code)
    else:
        kind = "oneway" if flag & RPC_ONEWAY else "request"
        code_name = request_code_name(code)
    ext = cmd.ext_fields or {}
    if ext and not (flag & RPC_RESPONSE) and code in _V2_CODES:
        topic = ext.get("b")
        group = ext.get("a")
        queue = ext.get("e")
    else:
        topic = _first(ext, _TOPIC_KEYS) if ext else None
        group = _first(ext, _GROUP_KEYS) if ext else None
        queue = _first(ext, _QUEUE_KEYS) if ext else None
    body_len = len(cmd.body)
    return (
        capture, seq, ts_ns, connection, client, server, direction,
        kind, _SERIALIZE[cmd.serialize_type], code, code_name, cmd.opaque, flag,
        _LANGUAGES.get(int(cmd.language), str(cmd.language)), cmd.version,
        flen, flen - 8 - body_len, body_len, cmd.remark,
        topic, group, _int(queue, 32),
        _first(ext, _BROKER_KEYS) if ext else None,
        _int(_first(ext, _OFFSET_KEYS)) if ext else None,
        ext.get("msgId") if ext else None,
        ext or None, None,
    )  # fmt: skip
