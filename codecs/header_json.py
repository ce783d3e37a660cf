"""The JSON header serializer, byte for byte as RocketMQ's fastjson writes it.

fastjson writes a ``RemotingCommand`` with no spaces, fields in alphabetical order
(code, extFields, flag, language, opaque, remark, serializeTypeCurrentRPC, version),
the language by name, and leaves out a null remark or null extFields. Strings are
raw UTF-8 except: ``"`` and ``\\`` escaped; ``\\b \\t \\n \\f \\r`` as short escapes;
every other C0 control and U+007F..U+009F as ``\\u00XX`` with upper-case hex;
U+2028 and U+2029 as ``\\u2028``/``\\u2029``; ``/`` left alone.

Decoding accepts what real clients send (``shared/REAL-CLIENTS.md``): keys in any
order or missing (Java's field defaults apply), trailing whitespace, ext-field values
that are JSON numbers, booleans or null (turned into strings as Java's fastjson reads
them into a ``HashMap<String, String>``; a null value is dropped).
"""

from __future__ import annotations

import json
import json.scanner
import re
from collections.abc import Callable
from typing import Any

from .command import LanguageCode, RemotingCommand, SerializeType
from .errors import HeaderDecodeError, HeaderEncodeError
from .java_ints import INT32_MAX, INT32_MIN

__all__ = ["encode_json_header", "decode_json_header"]

_SHORT = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_FASTJSON_ESCAPES: dict[int, str] = {}
for _c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]:
    _FASTJSON_ESCAPES[_c] = _SHORT.get(chr(_c), f"\\u{_c:04X}")
_FASTJSON_ESCAPES[ord('"')] = '\\"'
_FASTJSON_ESCAPES[ord("\\")] = "\\\\"
# Where Python's json output differs from fastjson's: escapes whose hex has a letter
# (Python writes lower case, fastjson upper), and characters Python leaves raw.
# \x01 and \x02, in every message-properties string, are written alike by both.
# A literal backslash followed by "u000b" matches too: harmless, the slow path is exact.
_PY_LOWER_HEX = re.compile(r"\\u00(?:0[bef]|1[a-f])")
_PY_RAW = re.compile("[\x7f-\x9f\u2028\u2029]")

_LANGUAGE_NAMES = {lang: lang.name for lang in LanguageCode}
_LANGUAGE_BY_NAME = {lang.name: lang for lang in LanguageCode}


def fastjson_quote(s: str) -> str:
    """``s`` as a JSON string literal exactly as fastjson writes it."""
    return '"' + s.translate(_FASTJSON_ESCAPES) + '"'


def _encode(cmd: RemotingCommand, ext: dict[str, str] | None, quote: Callable[[str], str]) -> str:
    parts = ['{"code":', str(cmd.code)]
    if ext is not None:
        parts.append(',"extFields":{')
        parts.append(",".join([quote(k) + ":" + quote(v) for k, v in ext.items() if v is not None]))
        parts.append("}")
    parts += [
        ',"flag":', str(cmd.flag),
        ',"language":"', _LANGUAGE_NAMES[cmd.language],
        '","opaque":', str(cmd.opaque),
    ]
    if cmd.remark is not None:
        parts += [',"remark":', quote(cmd.remark)]
    parts += [',"serializeTypeCurrentRPC":"JSON","version":', str(cmd.version), "}"]
    return "".join(parts)


def _make_encode() -> Callable[[Any], str]:
    # The C encoder made once: json.JSONEncoder.encode builds a new one on every call.
    make = json.encoder.c_make_encoder
    if make is None:  # not CPython's accelerator
        return json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
    chunks = make(None, None, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    return lambda obj: "".join(chunks(obj, 0))


_c_encode = _make_encode()


def encode_json_header(cmd: RemotingCommand, ext: dict[str, str] | None) -> bytes:
    """Header bytes for ``cmd`` with ``ext`` as its ext fields (already merged)."""
    # One call into the C encoder for the whole header: keys are already in
    # fastjson's alphabetical order, and dicts keep it.
    obj: dict[str, Any] = {"code": cmd.code}
    if ext is not None:
        if None in ext.values():  # fastjson leaves null map values out
            ext = {k: v for k, v in ext.items() if v is not None}
        obj["extFields"] = ext
    obj["flag"] = cmd.flag
    obj["language"] = _LANGUAGE_NAMES[cmd.language]
    obj["opaque"] = cmd.opaque
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = cmd.version
    try:
        text = _c_encode(obj)
        if ("\\u00" in text and _PY_LOWER_HEX.search(text)) or (
            not text.isascii() and _PY_RAW.search(text)
        ):
            # Rare: a character fastjson escapes unlike Python; redo it the slow way.
            text = _encode(cmd, ext, fastjson_quote)
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise HeaderEncodeError(f"header text is not encodable as UTF-8: {exc}") from None
    except (TypeError, KeyError, ValueError) as exc:
        raise HeaderEncodeError(f"cannot write command as JSON: {exc!r}") from None


class _FloatText(str):
    """A JSON number with a fraction or exponent, kept as its literal text."""


def _ext_value(value: Any) -> str | None:
    # Java's fastjson reads any JSON scalar into a String field by its text.
    if isinstance(value, str):
        return str(value)  # a _FloatText becomes its plain text: values are exactly str
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _ext_strings(ext: dict[str, Any]) -> dict[str, str]:
    """Every ext value as the text Java reads (:func:`_ext_value`), nulls dropped. The
    C++ client sends every request's numbers and booleans bare, so the common types
    are handled here without a call each."""
    out: dict[str, str] = {}
    for key, value in ext.items():
        kind = type(value)
        if kind is str:
            out[key] = value
        elif kind is int:
            out[key] = str(value)
        elif value is not None:
            out[key] = _ext_value(value)
    return out


_decoder = json.JSONDecoder(parse_float=_FloatText)
_scan = json.scanner.c_make_scanner(_decoder) if json.scanner.c_make_scanner else _decoder.scan_once
_WS = " \t\n\r"


def _decode(text: str) -> Any:
    """``json.loads`` for a header: the C scanner called directly (``JSONDecoder.decode``
    adds two regex scans for the whitespace around the value)."""
    start = 0
    if text and text[0] in _WS:
        start = len(text) - len(text.lstrip(_WS))
    try:
        obj, end = _scan(text, start)
    except StopIteration as exc:
        raise ValueError(f"Expecting value at char {exc.value}") from None
    if end != len(text) and text[end:].strip(_WS):
        raise ValueError(f"Extra data at char {end}")
    return obj


def _int_field(obj: dict, name: str) -> int:
    value = obj.get(name)
    if type(value) is int and INT32_MIN <= value <= INT32_MAX:
        return value
    if value is None:
        return 0
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            pass
    if type(value) is not int:
        raise HeaderDecodeError(f"JSON header field {name!r} is not an integer: {value!r}")
    if not INT32_MIN <= value <= INT32_MAX:
        raise HeaderDecodeError(f"JSON header field {name!r} out of range: {value}")
    return value


def _language(value: Any) -> LanguageCode:
    if type(value) is str:
        lang = _LANGUAGE_BY_NAME.get(value)
        if lang is None:
            raise HeaderDecodeError(f"unknown language {value!r} in JSON header")
        return lang
    if value is None:
        return LanguageCode.JAVA
    if type(value) is int:
        try:
            return LanguageCode(value)
        except ValueError:
            raise HeaderDecodeError(f"unknown language code {value} in JSON header") from None
    raise HeaderDecodeError(f"bad language in JSON header: {value!r}")


def decode_json_header(header: bytes | memoryview) -> RemotingCommand:
    """Decode a JSON header into a command without a body."""
    try:
        text = str(header, "utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderDecodeError(f"JSON header is not valid UTF-8: {exc}") from None
    try:
        obj = _decode(text)
    except (ValueError, RecursionError) as exc:
        raise HeaderDecodeError(f"JSON header does not parse: {exc}") from None
    if type(obj) is not dict:
        raise HeaderDecodeError(f"JSON header is not an object: {type(obj).__name__}")

    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        raise HeaderDecodeError(f"JSON header remark is not a string: {remark!r}")

    ext = obj.get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise HeaderDecodeError(f"JSON header extFields is not an object: {ext!r}")
        for value in ext.values():
            if type(value) is not str:  # the C++ client sends numbers and booleans
                ext = _ext_strings(ext)
                break

    return RemotingCommand(
        _int_field(obj, "code"),
        _language(obj.get("language")),
        _int_field(obj, "version"),
        _int_field(obj, "opaque"),
        _int_field(obj, "flag"),
        remark,
        ext,
        b"",
        None,
        SerializeType.JSON,
    )


# The compiled twin when built (codecs/accel.py); the function above stays the reference.
from .accel import accelerated  # noqa: E402

decode_json_header = accelerated(decode_json_header)
encode_json_header = accelerated(encode_json_header)
