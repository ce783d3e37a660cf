"""Hand-written codecs for the hot headers: Java's ``FastCodesHeader`` idea.

One decode and one encode function per header, written out field by field: direct
ext lookups, the usual values converted inline, no per-field dispatch.

*Decode* is optimistic. It handles the values real traffic carries:

* small ints (queue ids, flags, counts) by lookup in a table of canonical spellings
  (``"0"``..``"1023"``, ``"-1"``): a hit is valid by construction;
* other non-negative ints by a precompiled check, ``isdigit() and isascii()`` and
  fewer than 10 (int32) / 19 (int64) digits, which is always in range, then ``int``;
* bools by lookup of the accepted spellings (``custom_header._java.BOOLS``);
* a pull request's poll timeout and subscription version, the same from one pull to
  the next, by lookup of the int64 spellings already validated (bounded).

Anything else (a missing or null required field, a sign, leading zeros, a long digit
run, garbage, a non-string value) makes it hand the *whole* ext map to
:func:`~trocket.codecs.custom_header.generic_decode`, the single authority on errors. So the fast path
returns only for input the generic path accepts, returns an equal object, and every
error is the generic path's error: equivalence by construction, which
``tests/codecs/test_headers_equivalence.py`` also checks.

Objects are built with ``object.__new__`` and slot stores rather than the attrs
``__init__`` (a 15-keyword call costs about four times as much as the stores). That
is only valid because header classes have no attrs validators or converters; adding
any to a class here means adding it here too.

*Encode* builds the whole ext dict with one dict display in declaration order (the
dict itself is about half of the cost, and a display is the cheapest way to build
one), small ints by table lookup (a miss takes ``str``), then deletes the optional
fields that are ``None``. A required field that is ``None`` (an object Java would not
send either) makes it use the generic encoder, so the output is always the generic
path's. Encoders trust the object's types (as the generic path does).

Each codec is registered with :func:`~trocket.codecs.custom_header.register_codec`
(:data:`FAST_CODECS`); headers without one use the codec generated from their
declaration (:mod:`trocket.codecs.custom_header.compiled`). With their compiled twins
these beat the generated codec 1.4x (V2 decode) and 2-2.5x (V2 and pull encode); the
pull decoder, pure Python, is on a par with it (``benchmarks/codecs.py``).

Measured on SendMessageRequestHeaderV2 (``benchmarks/codecs.py``): a tuple build and
unpack of the 14 attributes, a per-field ``int()``/``str()`` and an ``__init__`` call
each cost more than the table lookups, direct subscripts and slot stores used here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ..command import RemotingCommand
from ..accel import accelerated, provide
from ..custom_header import HeaderCodec, generic_decode, generic_encode, register_codec
from ..custom_header._java import BOOLS as _BOOLS
from .pull import PullMessageRequestHeader, PullMessageResponseHeader
from .send import SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader

__all__ = ["FAST_CODECS", "SendFields", "command_send_fields", "decode_send_fields", "send_fields_of"]

_new = object.__new__

#: Canonical decimal spellings of small ints and back: most int fields on the wire.
#: Under 0.5 MB for the four tables.
_SI: dict[str, int] = {str(i): i for i in range(-1, 1024)}
_SS: dict[int, str] = {i: t for t, i in _SI.items()}
_si = _SI.get
_ss = _SS.get
#: The same with ``None -> None`` (optional fields) / ``None -> False`` (Java primitive
#: booleans, which are ``false`` when absent).
_SIN: dict[str | None, int | None] = {**_SI, None: None}
_SSN: dict[int | None, str | None] = {**_SS, None: None}
_BN: dict[str | None, bool] = {**_BOOLS, None: False}


class _Fallback(Exception):
    """Raised inside a fast decoder: let the generic path decide."""


#: What makes a fast decoder hand over to the generic path: a missing key or a table
#: miss (KeyError), a non-string value (AttributeError), an unhashable one (TypeError).
_HANDOVER = (KeyError, AttributeError, TypeError, _Fallback)


def _i32(v: str) -> int:
    """An int32 value the table missed: plain digits inline, else hand over."""
    x = _si(v)
    if x is None:
        if not (v.isdigit() and v.isascii() and len(v) < 10):
            raise _Fallback
        x = int(v)
    return x


def _i64(v: str) -> int:
    """An int64 value the table missed: plain digits inline, else hand over."""
    x = _si(v)
    if x is None:
        if not (v.isdigit() and v.isascii() and len(v) < 19):
            raise _Fallback
        x = int(v)
    return x


#: Spellings of int64 values that stay the same request after request (a consumer's
#: poll timeout and subscription version), validated once; bounded, cleared when full.
_KNOWN_I64: dict[str, int] = {}
_known_i64 = _KNOWN_I64.get
_MAX_KNOWN_I64 = 4096


def _learn_i64(v: str) -> int:
    """An int64 value not yet known: checked as :func:`_i64` does, then remembered."""
    x = _i64(v)
    if len(_KNOWN_I64) >= _MAX_KNOWN_I64:
        _KNOWN_I64.clear()
    _KNOWN_I64[v] = x
    return x


# -- SendMessageRequestHeaderV2 ---------------------------------------------------------

_V2 = SendMessageRequestHeaderV2


def decode_send_message_v2(ext: Mapping[str, str] | None) -> SendMessageRequestHeaderV2:
    try:
        a = ext["a"]
        b = ext["b"]
        c = ext["c"]
        if a is None or b is None or c is None:
            raise _Fallback
        g = ext["g"]
        g = int(g) if g.isdigit() and g.isascii() and len(g) < 19 else _i64(g)
        get = ext.get
        o = _new(_V2)
        o.a = a
        o.b = b
        o.c = c
        try:
            o.d = _SI[ext["d"]]
            o.e = _SI[ext["e"]]
            o.f = _SI[ext["f"]]
            o.h = _SI[ext["h"]]
            o.j = _SIN[get("j")]
            o.l = _SIN[get("l")]
        except KeyError:  # a missing key raises again below and hands over
            o.d = _i32(ext["d"])
            o.e = _i32(ext["e"])
            o.f = _i32(ext["f"])
            o.h = _i32(ext["h"])
            v = get("j")
            o.j = v if v is None else _i32(v)
            v = get("l")
            o.l = v if v is None else _i32(v)
        o.g = g
        o.i = get("i")
        o.k = _BN[get("k")]
        o.m = _BN[get("m")]
        o.n = get("n")
        o.bname = get("bname")
        return o
    except _HANDOVER:
        return generic_decode(_V2, ext)


def encode_send_message_v2(o: SendMessageRequestHeaderV2) -> dict[str, str]:
    a = o.a
    b = o.b
    c = o.c
    g = o.g
    if a is None or b is None or c is None or g is None:
        return generic_encode(o)
    i = o.i
    j = o.j
    k = o.k
    l = o.l  # noqa: E741
    m = o.m
    n = o.n
    try:
        d = _SS[o.d]
        e = _SS[o.e]
        f = _SS[o.f]
        h = _SS[o.h]
        js = _SSN[j]
        ls = _SSN[l]
    except KeyError:
        d, e, f, h = o.d, o.e, o.f, o.h
        if d is None or e is None or f is None or h is None:
            return generic_encode(o)
        d, e, f, h = str(d), str(e), str(f), str(h)
        js = j if j is None else str(j)
        ls = l if l is None else str(l)
    out = {
        "a": a,
        "b": b,
        "c": c,
        "d": d,
        "e": e,
        "f": f,
        "g": str(g),
        "h": h,
        "i": i,
        "j": js,
        "k": k if k is None else "true" if k else "false",
        "l": ls,
        "m": m if m is None else "true" if m else "false",
        "n": n,
    }
    if i is None:
        del out["i"]
    if j is None:
        del out["j"]
    if k is None:
        del out["k"]
    if l is None:
        del out["l"]
    if m is None:
        del out["m"]
    if n is None:
        del out["n"]
    v = o.bname
    if v is not None:
        out["bname"] = v
    return out


# -- SendMessageRequestHeader (V1) ------------------------------------------------------

_V1 = SendMessageRequestHeader


def decode_send_message(ext: Mapping[str, str] | None) -> SendMessageRequestHeader:
    try:
        a = ext["producerGroup"]
        b = ext["topic"]
        c = ext["defaultTopic"]
        if a is None or b is None or c is None:
            raise _Fallback
        g = ext["bornTimestamp"]
        g = int(g) if g.isdigit() and g.isascii() and len(g) < 19 else _i64(g)
        get = ext.get
        o = _new(_V1)
        o.producerGroup = a
        o.topic = b
        o.defaultTopic = c
        try:
            o.defaultTopicQueueNums = _SI[ext["defaultTopicQueueNums"]]
            o.queueId = _SI[ext["queueId"]]
            o.sysFlag = _SI[ext["sysFlag"]]
            o.flag = _SI[ext["flag"]]
            o.reconsumeTimes = _SIN[get("reconsumeTimes")]
            o.maxReconsumeTimes = _SIN[get("maxReconsumeTimes")]
        except KeyError:  # a missing key raises again below and hands over
            o.defaultTopicQueueNums = _i32(ext["defaultTopicQueueNums"])
            o.queueId = _i32(ext["queueId"])
            o.sysFlag = _i32(ext["sysFlag"])
            o.flag = _i32(ext["flag"])
            v = get("reconsumeTimes")
            o.reconsumeTimes = v if v is None else _i32(v)
            v = get("maxReconsumeTimes")
            o.maxReconsumeTimes = v if v is None else _i32(v)
        o.bornTimestamp = g
        o.properties = get("properties")
        o.unitMode = _BN[get("unitMode")]
        o.batch = _BN[get("batch")]
        o.bname = get("bname")
        return o
    except _HANDOVER:
        return generic_decode(_V1, ext)


def encode_send_message(o: SendMessageRequestHeader) -> dict[str, str]:
    a = o.producerGroup
    b = o.topic
    c = o.defaultTopic
    g = o.bornTimestamp
    if a is None or b is None or c is None or g is None:
        return generic_encode(o)
    i = o.properties
    j = o.reconsumeTimes
    k = o.unitMode
    m = o.batch
    l = o.maxReconsumeTimes  # noqa: E741
    try:
        d = _SS[o.defaultTopicQueueNums]
        e = _SS[o.queueId]
        f = _SS[o.sysFlag]
        h = _SS[o.flag]
        js = _SSN[j]
        ls = _SSN[l]
    except KeyError:
        d, e, f, h = o.defaultTopicQueueNums, o.queueId, o.sysFlag, o.flag
        if d is None or e is None or f is None or h is None:
            return generic_encode(o)
        d, e, f, h = str(d), str(e), str(f), str(h)
        js = j if j is None else str(j)
        ls = l if l is None else str(l)
    out = {
        "producerGroup": a,
        "topic": b,
        "defaultTopic": c,
        "defaultTopicQueueNums": d,
        "queueId": e,
        "sysFlag": f,
        "bornTimestamp": str(g),
        "flag": h,
        "properties": i,
        "reconsumeTimes": js,
        "unitMode": k if k is None else "true" if k else "false",
        "batch": m if m is None else "true" if m else "false",
        "maxReconsumeTimes": ls,
    }
    if i is None:
        del out["properties"]
    if j is None:
        del out["reconsumeTimes"]
    if k is None:
        del out["unitMode"]
    if m is None:
        del out["batch"]
    if l is None:
        del out["maxReconsumeTimes"]
    v = o.bname
    if v is not None:
        out["bname"] = v
    return out


# -- SendMessageResponseHeader ----------------------------------------------------------

_SR = SendMessageResponseHeader


def decode_send_message_response(ext: Mapping[str, str] | None) -> SendMessageResponseHeader:
    try:
        a = ext["msgId"]
        if a is None:
            raise _Fallback
        o = _new(_SR)
        o.msgId = a
        v = ext["queueId"]
        o.queueId = _SI[v] if v in _SI else _i32(v)
        v = ext["queueOffset"]
        o.queueOffset = int(v) if v.isdigit() and v.isascii() and len(v) < 19 else _i64(v)
        o.transactionId = ext.get("transactionId")
        return o
    except _HANDOVER:
        return generic_decode(_SR, ext)


def encode_send_message_response(o: SendMessageResponseHeader) -> dict[str, str]:
    a = o.msgId
    b = o.queueId
    c = o.queueOffset
    if a is None or b is None or c is None:
        return generic_encode(o)
    out = {"msgId": a, "queueId": _ss(b) or str(b), "queueOffset": str(c)}
    v = o.transactionId
    if v is not None:
        out["transactionId"] = v
    return out


# -- PullMessageRequestHeader -----------------------------------------------------------

_PQ = PullMessageRequestHeader


def decode_pull_message(ext: Mapping[str, str] | None) -> PullMessageRequestHeader:
    try:
        a = ext["consumerGroup"]
        b = ext["topic"]
        if a is None or b is None:
            raise _Fallback
        get = ext.get
        o = _new(_PQ)
        o.consumerGroup = a
        o.topic = b
        try:
            o.queueId = _SI[ext["queueId"]]
            o.maxMsgNums = _SI[ext["maxMsgNums"]]
            o.sysFlag = _SI[ext["sysFlag"]]
        except KeyError:  # a missing key raises again below and hands over
            o.queueId = _i32(ext["queueId"])
            o.maxMsgNums = _i32(ext["maxMsgNums"])
            o.sysFlag = _i32(ext["sysFlag"])
        # offsets, timeouts and versions: mostly beyond the table, so the digit check first
        v = ext["queueOffset"]
        o.queueOffset = int(v) if v.isdigit() and v.isascii() and len(v) < 19 else _i64(v)
        v = ext["commitOffset"]
        o.commitOffset = int(v) if v.isdigit() and v.isascii() and len(v) < 19 else _i64(v)
        # a consumer's constants: its poll timeout and its subscription's version
        v = ext["suspendTimeoutMillis"]
        x = _known_i64(v)
        o.suspendTimeoutMillis = _learn_i64(v) if x is None else x
        o.subscription = get("subscription")
        v = ext["subVersion"]
        x = _known_i64(v)
        o.subVersion = _learn_i64(v) if x is None else x
        o.expressionType = get("expressionType")
        o.bname = get("bname")
        return o
    except _HANDOVER:
        return generic_decode(_PQ, ext)


def encode_pull_message(o: PullMessageRequestHeader) -> dict[str, str]:
    a = o.consumerGroup
    b = o.topic
    d = o.queueOffset
    g = o.commitOffset
    h = o.suspendTimeoutMillis
    sv = o.subVersion
    if a is None or b is None or d is None or g is None or h is None or sv is None:
        return generic_encode(o)
    try:
        c = _SS[o.queueId]
        e = _SS[o.maxMsgNums]
        f = _SS[o.sysFlag]
    except KeyError:
        c, e, f = o.queueId, o.maxMsgNums, o.sysFlag
        if c is None or e is None or f is None:
            return generic_encode(o)
        c, e, f = str(c), str(e), str(f)
    i = o.subscription
    x = o.expressionType
    bn = o.bname
    out = {
        "consumerGroup": a,
        "topic": b,
        "queueId": c,
        "queueOffset": str(d),
        "maxMsgNums": e,
        "sysFlag": f,
        "commitOffset": str(g),
        "suspendTimeoutMillis": str(h),
        "subscription": i,
        "subVersion": str(sv),
        "expressionType": x,
        "bname": bn,
    }
    if i is None:
        del out["subscription"]
    if x is None:
        del out["expressionType"]
    if bn is None:
        del out["bname"]
    return out


# -- PullMessageResponseHeader ----------------------------------------------------------

_PR = PullMessageResponseHeader


def decode_pull_message_response(ext: Mapping[str, str] | None) -> PullMessageResponseHeader:
    try:
        o = _new(_PR)
        v = ext["suggestWhichBrokerId"]
        o.suggestWhichBrokerId = int(v) if v.isdigit() and v.isascii() and len(v) < 19 else _i64(v)
        v = ext["nextBeginOffset"]
        o.nextBeginOffset = int(v) if v.isdigit() and v.isascii() and len(v) < 19 else _i64(v)
        v = ext["minOffset"]
        o.minOffset = int(v) if v.isdigit() and v.isascii() and len(v) < 19 else _i64(v)
        v = ext["maxOffset"]
        o.maxOffset = int(v) if v.isdigit() and v.isascii() and len(v) < 19 else _i64(v)
        return o
    except _HANDOVER:
        return generic_decode(_PR, ext)


def encode_pull_message_response(o: PullMessageResponseHeader) -> dict[str, str]:
    a = o.suggestWhichBrokerId
    b = o.nextBeginOffset
    c = o.minOffset
    d = o.maxOffset
    if a is None or b is None or c is None or d is None:
        return generic_encode(o)
    return {"suggestWhichBrokerId": str(a), "nextBeginOffset": str(b), "minOffset": str(c), "maxOffset": str(d)}


# -- what the broker's send path reads of either send header ---------------------------


class SendFields(NamedTuple):
    """The fields of a send request header the broker's send path reads, under V1's
    names, from a V1 (SEND_MESSAGE, the C++ client's) or a V2 header (SEND_MESSAGE_V2,
    SEND_BATCH_MESSAGE: Java's and JS's single letters). :func:`decode_send_fields`
    gives them as a plain tuple in this order (``SendFields._make`` names them)."""

    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: int
    flag: int
    properties: str | None
    reconsumeTimes: int | None
    maxReconsumeTimes: int | None
    batch: bool


def decode_send_fields(ext: Mapping[str, str] | None, v2: bool) -> tuple:
    """The :class:`SendFields` of a V2 (``v2``) or V1 send header's ext fields as a
    plain tuple, in that order: the fast decoder's header (the same checks, the same
    errors), its fields in the tuple. Plain, because the send path unpacks it: Python
    3.11 unpacks an exact tuple in one specialized step, while a NamedTuple is unpacked
    through an iterator and its fields read by name through a descriptor (~200
    instructions each); its compiled twin builds it straight from the ext fields."""
    if v2:
        h = decode_send_message_v2(ext)
        return (h.b, h.c, h.d, h.e, h.f, h.g, h.h, h.i, h.j, h.l, h.m)
    return send_fields_of(decode_send_message(ext))


def command_send_fields(cmd: RemotingCommand, v2: bool) -> tuple:
    """:func:`decode_send_fields` of a send request's ext fields (the same tuple, the same
    errors). Its compiled twin hands over the tuple the header decoder (JSON or ROCKETMQ)
    read in its pass over the header when it left the ext fields undecoded
    (:func:`~trocket.codecs.command.ext_fields_descriptor`), so a send that nothing else
    reads the ext fields of makes no dict of them."""
    return decode_send_fields(cmd.ext_fields, v2)


def send_fields_of(h: SendMessageRequestHeader) -> tuple:
    """A V1 send header's fields as :func:`decode_send_fields` gives them (for a path that
    has the header already: the reply processor's)."""
    return (
        h.topic, h.defaultTopic, h.defaultTopicQueueNums, h.queueId, h.sysFlag, h.bornTimestamp, h.flag,
        h.properties, h.reconsumeTimes, h.maxReconsumeTimes, h.batch,
    )


# The compiled twin when built (codecs/accel.py); the function above stays the reference.
provide("send_headers", (_V1, _V2, _BN, _PQ))
decode_send_message = accelerated(decode_send_message)
decode_send_message_v2 = accelerated(decode_send_message_v2)
decode_send_fields = accelerated(decode_send_fields)
command_send_fields = accelerated(command_send_fields)
encode_send_message_v2 = accelerated(encode_send_message_v2)
encode_pull_message = accelerated(encode_pull_message)

#: Header class -> its hand-written codec, registered as the class's codec.
FAST_CODECS: dict[type, HeaderCodec] = {
    SendMessageRequestHeader: HeaderCodec(decode_send_message, encode_send_message),
    SendMessageRequestHeaderV2: HeaderCodec(decode_send_message_v2, encode_send_message_v2),
    SendMessageResponseHeader: HeaderCodec(decode_send_message_response, encode_send_message_response),
    PullMessageRequestHeader: HeaderCodec(decode_pull_message, encode_pull_message),
    PullMessageResponseHeader: HeaderCodec(decode_pull_message_response, encode_pull_message_response),
}
for _cls, _codec in FAST_CODECS.items():
    register_codec(_cls, _codec.decode, _codec.encode)
