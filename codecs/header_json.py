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
import re
from typing import Any

from .command import LanguageCode, RemotingCommand, SerializeType
from .errors import HeaderDecodeError, HeaderEncodeError

__all__ = ["encode_json_header", "decode_json_header"]

_quote = json.encoder.encode_basestring  # C-accelerated; ensure_ascii=False flavour

_SHORT = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_FASTJSON_ESCAPES: dict[int, str] = {}
for _c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]:
    _FASTJSON_ESCAPES[_c] = _SHORT.get(chr(_c), f"\\u{_c:04X}")
_FASTJSON_ESCAPES[ord('"')] = '\\"'
_FASTJSON_ESCAPES[ord("\\")] = "\\\\"
# Characters fastjson escapes differently from Python's json module.
_PY_DIFFERS = re.compile("[\x00-\x07\x0b\x0e-\x1f\x7f-\x9f\u2028\u2029]")

_LANGUAGE_NAMES = {lang: lang.name for lang in LanguageCode}
_LANGUAGE_BY_NAME = {lang.name: lang for lang in LanguageCode}
_SERIALIZE_NAMES = {SerializeType.JSON: "JSON", SerializeType.ROCKETMQ: "ROCKETMQ"}


def _fastjson_quote(s: str) -> str:
    return '"' + s.translate(_FASTJSON_ESCAPES) + '"'


def _encode(cmd: RemotingCommand, ext: dict[str, str] | None, quote) -> str:
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


def encode_json_header(cmd: RemotingCommand, ext: dict[str, str] | None) -> bytes:
    """Header bytes for ``cmd`` with ``ext`` as its ext fields (already merged)."""
    try:
        text = _encode(cmd, ext, _quote)
        if not text.isascii() or "\\u00" in text:
            # Rare: a character fastjson escapes unlike Python; redo it the slow way.
            if _PY_DIFFERS.search(text) or "\\u00" in text:
                text = _encode(cmd, ext, _fastjson_quote)
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
        return value
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _int_field(obj: dict, name: str, default: int, lo: int, hi: int) -> int:
    value = obj.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise HeaderDecodeError(f"JSON header field {name!r} is not an integer: {value!r}")
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise HeaderDecodeError(f"JSON header field {name!r} is not an integer: {value!r}") from None
    if not lo <= value <= hi:
        raise HeaderDecodeError(f"JSON header field {name!r} out of range: {value}")
    return value


_I32 = (-(2**31), 2**31 - 1)


def decode_json_header(header: bytes | memoryview) -> RemotingCommand:
    """Decode a JSON header into a command without a body."""
    try:
        text = bytes(header).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderDecodeError(f"JSON header is not valid UTF-8: {exc}") from None
    try:
        obj = json.loads(text, parse_float=_FloatText)
    except (ValueError, RecursionError) as exc:
        raise HeaderDecodeError(f"JSON header does not parse: {exc}") from None
    if not isinstance(obj, dict):
        raise HeaderDecodeError(f"JSON header is not an object: {type(obj).__name__}")

    code = _int_field(obj, "code", 0, *_I32)
    flag = _int_field(obj, "flag", 0, *_I32)
    opaque = _int_field(obj, "opaque", 0, *_I32)
    version = _int_field(obj, "version", 0, *_I32)

    language = obj.get("language", "JAVA")
    if isinstance(language, str):
        lang = _LANGUAGE_BY_NAME.get(language)
        if lang is None:
            raise HeaderDecodeError(f"unknown language {language!r} in JSON header")
    elif isinstance(language, int) and not isinstance(language, bool):
        try:
            lang = LanguageCode(language)
        except ValueError:
            raise HeaderDecodeError(f"unknown language code {language} in JSON header") from None
    elif language is None:
        lang = LanguageCode.JAVA
    else:
        raise HeaderDecodeError(f"bad language in JSON header: {language!r}")

    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise HeaderDecodeError(f"JSON header remark is not a string: {remark!r}")

    raw_ext = obj.get("extFields")
    ext: dict[str, str] | None
    if raw_ext is None:
        ext = None
    elif isinstance(raw_ext, dict):
        ext = {}
        for key, value in raw_ext.items():
            if isinstance(value, str):
                ext[key] = value
            else:
                text_value = _ext_value(value)
                if text_value is not None:
                    ext[key] = text_value
    else:
        raise HeaderDecodeError(f"JSON header extFields is not an object: {raw_ext!r}")

    return RemotingCommand(
        code=code,
        language=lang,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.JSON,
    )
