import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.errors import CustomHeaderError, HeaderDecodeError
from trocket.codecs.header_json import decode_json_header, encode_json_header
from trocket.codecs.custom_header import decode_header, generic_decode
from trocket.codecs.headers import SendMessageRequestHeaderV2

from .strategies import text


def enc(cmd: RemotingCommand) -> str:
    return encode_json_header(cmd, cmd.ext_fields).decode("utf-8")


def test_field_order_and_no_spaces():
    cmd = RemotingCommand(code=105, opaque=9, flag=1, remark="r", ext_fields={"topic": "T"}, version=409)
    assert enc(cmd) == (
        '{"code":105,"extFields":{"topic":"T"},"flag":1,"language":"JAVA","opaque":9,'
        '"remark":"r","serializeTypeCurrentRPC":"JSON","version":409}'
    )


def test_null_remark_and_ext_are_left_out_empty_ones_written():
    assert enc(RemotingCommand(code=1)) == (
        '{"code":1,"flag":0,"language":"JAVA","opaque":0,"serializeTypeCurrentRPC":"JSON","version":0}'
    )
    assert enc(RemotingCommand(code=1, remark="", ext_fields={})) == (
        '{"code":1,"extFields":{},"flag":0,"language":"JAVA","opaque":0,"remark":"",'
        '"serializeTypeCurrentRPC":"JSON","version":0}'
    )


def test_language_written_by_name():
    assert '"language":"NODE_JS"' in enc(RemotingCommand(code=1, language=LanguageCode.NODE_JS))


@pytest.mark.parametrize(
    "value, written",
    [
        ("a/b", '"a/b"'),  # slash not escaped
        ('q"b\\s', '"q\\"b\\\\s"'),
        ("\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'),
        ("\x00\x01\x0b\x1b\x1f", '"\\u0000\\u0001\\u000B\\u001B\\u001F"'),  # upper-case hex
        ("\x7f\x85\x9f\xa0", '"\\u007F\\u0085\\u009F\xa0"'),  # fastjson escapes 7F..9F only
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("中文 é 🎉", '"中文 é 🎉"'),  # raw UTF-8
    ],
)
def test_strings_escaped_as_fastjson(value, written):
    out = enc(RemotingCommand(code=1, remark=value))
    assert f'"remark":{written},' in out
    # and it still parses back to the same value
    assert json.loads(out)["remark"] == value


def test_ext_key_escaping_too():
    out = enc(RemotingCommand(code=1, ext_fields={"k\x01": "v\x02"}))
    assert '"extFields":{"k\\u0001":"v\\u0002"}' in out


def test_decodes_cpp_client_header():
    raw = (
        b'{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"HiDg=",'
        b'"topic":"PeerTopic"},"flag":0,"language":"CPP","opaque":0,"remark":"","version":63}\n'
    )
    cmd = decode_json_header(raw)
    assert cmd.code == 105 and cmd.language is LanguageCode.CPP and cmd.version == 63
    assert cmd.remark == ""
    assert cmd.ext_fields == {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "HiDg=", "topic": "PeerTopic"}
    assert cmd.serialize_type is SerializeType.JSON


def test_decodes_js_client_header_with_typed_values():
    raw = (
        b'{"code":310,"language":"JAVA","opaque":1,"flag":0,"version":121,'
        b'"extFields":{"a":"G","d":4,"e":0,"k":false,"j":0,"queueOffset":null,"x":true,"f":1.50,"big":1e20}}'
    )
    cmd = decode_json_header(raw)
    assert cmd.remark is None
    assert cmd.ext_fields == {"a": "G", "d": "4", "e": "0", "k": "false", "j": "0", "x": "true", "f": "1.50", "big": "1e20"}
    assert list(cmd.ext_fields) == ["a", "d", "e", "k", "j", "x", "f", "big"]  # order kept
    assert {type(v) for v in cmd.ext_fields.values()} == {str}  # plain text, not a parser's str subclass


def test_a_fraction_for_an_integer_field_names_the_field_and_the_type():
    # What a JS client sends for a queueId it computed as 1.5: the custom header's error
    # (the broker's remark) says which field and what it should hold, in Java's terms.
    raw = b'{"code":310,"extFields":{"a":"G","b":"T","c":"TBW102","d":"4","e":1.5,"f":"0","g":"1","h":"0"}}'
    cmd = decode_json_header(raw)
    for decode in (decode_header, generic_decode):
        with pytest.raises(CustomHeaderError) as info:
            decode(SendMessageRequestHeaderV2, cmd.ext_fields)
        assert (info.value.field, info.value.reason) == (
            "e", "cannot parse '1.5': expected an integer (Java Integer: optional sign, ASCII digits)"
        )


def test_missing_fields_take_java_defaults():
    cmd = decode_json_header(b"{}")
    assert (cmd.code, cmd.flag, cmd.opaque, cmd.version, cmd.language) == (0, 0, 0, 0, LanguageCode.JAVA)


def test_numeric_strings_and_language_ordinals_accepted():
    cmd = decode_json_header(b'{"code":"105","language":1}')
    assert cmd.code == 105 and cmd.language is LanguageCode.CPP


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"", "does not parse"),
        (b"{", "does not parse"),
        (b"[1]", "not an object"),
        (b'{"code":"x"}', "'code' is not an integer"),
        (b'{"code":true}', "'code' is not an integer"),
        (b'{"opaque":2147483648}', "out of range"),
        (b'{"language":"KLINGON"}', "unknown language"),
        (b'{"language":99}', "unknown language"),
        (b'{"remark":5}', "remark is not a string"),
        (b'{"extFields":[1]}', "extFields is not an object"),
        (b'{"code":1}\xff', "not valid UTF-8"),
    ],
)
def test_bad_headers_raise_typed_errors(raw, message):
    with pytest.raises(HeaderDecodeError, match=message):
        decode_json_header(raw)


@given(st.binary(max_size=120))
def test_garbage_raises_only_header_errors(raw):
    try:
        decode_json_header(raw)
    except HeaderDecodeError:
        pass


@given(text)
def test_any_string_round_trips(value):
    cmd = RemotingCommand(code=1, remark=value, ext_fields={value: value})
    back = decode_json_header(encode_json_header(cmd, cmd.ext_fields))
    assert back.remark == value and back.ext_fields == {value: value}
