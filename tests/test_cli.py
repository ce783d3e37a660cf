import io
import json
import re
import signal
import struct
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trocket import __version__
from trocket.cli import main
from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.headers import REQUEST_HEADERS
from trocket.codecs.serialize import encode_command

ROOT = Path(__file__).parents[1]
GOLDEN = ROOT / "conformance" / "golden"
TROCKET = Path(sys.executable).parent / "trocket"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    from trocket.codecs import accel

    assert " ".join(capsys.readouterr().out.split()) == f"trocket {__version__} ({accel.describe()})"


def test_console_script_is_installed():
    exe = Path(sys.executable).parent / "trocket"
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith(f"trocket {__version__} (codec accelerator: ")


def test_decode_file_shows_custom_header(capsys):
    code, out, _ = run(capsys, "decode", str(GOLDEN / "java-4.9.8" / "send_message_v2__ROCKETMQ.bin"))
    assert code == 0
    doc = json.loads(out)
    assert doc["type"] == "request"
    assert doc["code"] == 310 and doc["codeName"] == "SEND_MESSAGE_V2"
    assert doc["serializeType"] == "ROCKETMQ"
    assert doc["extFields"]["b"] == "TopicTest"
    assert doc["customHeader"]["class"] == "SendMessageRequestHeaderV2"
    assert doc["customHeader"]["fields"]["b"] == "TopicTest"
    assert doc["customHeader"]["fields"]["e"] == 3
    assert doc["body"]["length"] == 128 and doc["body"]["hex"].startswith("000102")
    assert doc["body"]["truncated"] is True


def test_decode_hex_and_payload_without_prefix(capsys):
    raw = encode_command(RemotingCommand(code=105, opaque=3, ext_fields={"topic": "T"}, body="h\u00e9".encode()))
    for arg in (raw.hex(), raw[4:].hex(), " ".join(f"{b:02x}" for b in raw)):
        code, out, _ = run(capsys, "decode", arg)
        assert code == 0
        doc = json.loads(out)
        assert doc["codeName"] == "GET_ROUTEINFO_BY_TOPIC"
        assert doc["customHeader"]["fields"] == {"topic": "T"}
        assert doc["body"] == {"length": 3, "hex": "68c3a9", "utf8": "h\u00e9"}


def test_decode_response_with_request_code(capsys):
    code, out, _ = run(
        capsys, "decode", str(GOLDEN / "java-4.9.8" / "send_message_response__JSON.bin"), "--request-code", "310"
    )
    doc = json.loads(out)
    assert doc["type"] == "response" and doc["codeName"] == "SUCCESS"
    assert doc["customHeader"]["fields"]["queueOffset"] == 42


def test_decode_oneway(capsys):
    raw = encode_command(RemotingCommand(code=100, flag=2, serialize_type=SerializeType.ROCKETMQ))
    _, out, _ = run(capsys, "decode", raw.hex())
    assert json.loads(out)["type"] == "oneway request"


@pytest.mark.parametrize(
    "arg, message",
    [("zz-not-hex", "neither a file nor hex"), ("0000000c01000004ffff", "not a valid frame")],
)
def test_decode_bad_input(capsys, arg, message):
    code, out, err = run(capsys, "decode", arg)
    assert code == 1 and out == ""
    assert message in err


def test_conformance_check_passes_on_golden(capsys):
    code, out, _ = run(capsys, "conformance", "check", str(GOLDEN))
    assert code == 0
    last = out.strip().splitlines()[-1]
    n, m = last.split()[0].split("/")
    assert n == m and int(m) >= 16 + 37


def test_conformance_check_reports_mismatch(capsys, tmp_path):
    src = GOLDEN / "java-4.9.8"
    manifest = json.loads((src / "manifest.json").read_text())
    entries = manifest["frames"][:2]
    for e in entries:
        (tmp_path / e["file"]).write_bytes((src / e["file"]).read_bytes())
    entries[0]["opaque"] = 999  # the manifest now disagrees with the frame
    raw = bytearray((tmp_path / entries[1]["file"]).read_bytes())
    raw[-1:] = b""  # cut the frame
    raw[0:4] = (len(raw) - 4).to_bytes(4, "big")
    (tmp_path / entries[1]["file"]).write_bytes(bytes(raw))
    (tmp_path / "manifest.json").write_text(json.dumps({"frames": entries}))
    code, out, _ = run(capsys, "conformance", "check", str(tmp_path))
    assert code == 1
    assert "opaque: decoded 1, manifest says 999" in out
    assert "FAIL" in out and out.strip().endswith("0/2 frames conform")


def test_conformance_reencode_mismatch_names_offset(capsys, tmp_path):
    # A JSON header with a space: it decodes, but trocket (like Java) writes no spaces.
    body = b'{"code":100, "flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":0}'
    frame = (len(body) + 4).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body
    (tmp_path / "f.bin").write_bytes(frame)
    entry = {"file": "f.bin", "serializeType": "JSON", "code": 100, "language": "JAVA", "version": 0,
             "opaque": 1, "flag": 0, "remark": None, "extFields": None, "bodyHex": "", "note": ""}
    (tmp_path / "manifest.json").write_text(json.dumps({"frames": [entry]}))
    code, out, _ = run(capsys, "conformance", "check", str(tmp_path))
    assert code == 1
    # one byte shorter: the length prefix is the first byte to differ
    assert "re-encoding differs at offset 3 (file 104 bytes, re-encoded 103 bytes)" in out


def test_conformance_check_without_manifest(capsys, tmp_path):
    code, _, err = run(capsys, "conformance", "check", str(tmp_path))
    assert code == 1 and "no manifest.json" in err


def test_golden_set_is_current(tmp_path):
    from trocket.conformance.make_golden import write_golden

    write_golden(tmp_path)
    for path in sorted(tmp_path.iterdir()):
        assert path.read_bytes() == (GOLDEN / path.name).read_bytes(), path.name


# -- decode: any input, a clean exit -----------------------------------------------------

#: The issue's frame: a JSON header whose ext field holds an escaped lone surrogate.
SURROGATE_FRAME = (
    "00000058000000547b22636f6465223a3130302c226578744669656c6473223a7b22656d707479223a22"
    "615c7564666666222c226b223a2276227d2c22666c6167223a302c226f7061717565223a352c227665"
    "7273696f6e223a307d"
)


def decode_in_process(argv, stdin: bytes = b"") -> tuple[int, bytes, bytes]:
    """``main(["decode", ...])`` with real byte streams behind stdin/stdout/stderr, encoded
    as a UTF-8 terminal's are (stdout strict, stderr backslashreplace, as Python sets
    them); an exception escaping ``main`` fails the test as a traceback would."""
    out, err = io.BytesIO(), io.BytesIO()
    streams = (
        io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"),
        io.TextIOWrapper(out, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True),
    )
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        code = main(["decode", *argv])
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, out: bytes, err: bytes) -> dict | None:
    """Exit 0 with one JSON document on stdout, or exit 1 with one error line on stderr."""
    assert b"Traceback" not in err
    if code == 0:
        doc = json.loads(out)
        assert doc["type"] in ("request", "oneway request", "response") and err == b""
        return doc
    assert code == 1 and out == b""
    assert err.startswith(b"trocket: error: ") and err.count(b"\n") == 1, err
    return None


def test_decode_escaped_lone_surrogate_prints_it_escaped():
    code, out, err = decode_in_process([SURROGATE_FRAME])
    doc = assert_clean(code, out, err)
    assert b'"empty": "a\\udfff"' in out  # escaped as JSON writes it, so it reads back
    assert doc["extFields"] == {"empty": "a\udfff", "k": "v"}


def test_decode_escapes_everything_when_stdout_is_not_unicode():
    raw = encode_command(RemotingCommand(code=105, ext_fields={"topic": "T\u00e9"}, remark="\u263a"))
    result = subprocess.run(
        [str(TROCKET), "decode", raw.hex()], capture_output=True, env={"PYTHONIOENCODING": "ascii"}
    )
    doc = assert_clean(result.returncode, result.stdout, result.stderr)
    assert b'"topic": "T\\u00e9"' in result.stdout and doc["remark"] == "\u263a"


def test_decode_stdin_takes_hex_or_raw_bytes():
    raw = bytes.fromhex(SURROGATE_FRAME)
    spaced = " ".join(SURROGATE_FRAME[i : i + 8] for i in range(0, len(SURROGATE_FRAME), 8))
    wrapped = "\n".join(SURROGATE_FRAME[i : i + 32] for i in range(0, len(SURROGATE_FRAME), 32)) + "\n"
    docs = []
    for stdin in (raw, SURROGATE_FRAME.encode(), ("0x" + SURROGATE_FRAME).encode(), spaced.encode(), wrapped.encode()):
        docs.append(assert_clean(*decode_in_process(["-"], stdin)))
    assert all(doc == docs[0] for doc in docs) and docs[0]["opaque"] == 5


def test_decode_file_holding_hex(tmp_path):
    (tmp_path / "frame.hex").write_text(SURROGATE_FRAME + "\n")
    doc = assert_clean(*decode_in_process([str(tmp_path / "frame.hex")]))
    assert doc["extFields"]["k"] == "v"


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        (["-"], b"abc", b"odd number of hex digits (3)"),
        (["-"], b"", b"not a valid frame"),
        (["abc"], b"", b"odd number of hex digits"),
        (["0x"], b"", b"neither a file nor hex"),
        (["\udcff"], b"", b"neither a file nor hex"),  # a non-UTF-8 byte in argv
        (["a\x00b"], b"", b"neither a file nor hex"),
    ],
)
def test_decode_bad_hex_is_one_error_line(argv, stdin, message):
    code, out, err = decode_in_process(argv, stdin)
    assert_clean(code, out, err)
    assert code == 1 and message in err


def _frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


_codes = st.sampled_from(sorted(REQUEST_HEADERS)) | st.integers(-(2**31), 2**31 - 1)
# Any text, lone surrogates included (JSON can carry them escaped, as "\udfff"); a list
# joined, since st.text() leaves surrogates out whatever its alphabet.
_any_text = st.lists(
    st.characters(exclude_categories=()) | st.sampled_from("abcxyz019-_ \x00\x01\u00e9\u263a\U0001f600\udfff"), max_size=12
).map("".join)
_json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | _any_text
_json_values = st.recursive(_json_scalars, lambda v: st.lists(v, max_size=3) | st.dictionaries(_any_text, v, max_size=3), max_leaves=6)


def _mostly(usual: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    """``usual`` seven times in eight, so that most frames get past the header."""
    return st.sampled_from([True] * 7 + [False]).flatmap(lambda is_usual: usual if is_usual else odd)


@st.composite
def json_frames(draw) -> bytes:
    """JSON headers as any peer might write them: known codes, any ext values (numbers,
    nested objects, escaped surrogates), any flag, odd field types now and then."""
    header = {
        "code": draw(_codes),
        "flag": draw(_mostly(st.sampled_from([0, 1, 2, 3]), st.integers())),
        "language": draw(_mostly(st.sampled_from([lang.name for lang in LanguageCode]), _json_values)),
        "opaque": draw(st.integers(-(2**31), 2**31 - 1)),
        "version": draw(st.integers(0, 500)),
    }
    code = header["code"]
    cls = REQUEST_HEADERS.get(code)
    names = [f.name for f in attrs.fields(cls)] if cls else []
    keys = st.sampled_from(names) | _any_text if names else _any_text
    header["extFields"] = draw(st.dictionaries(keys, _json_values | st.from_regex(r"-?[0-9]{1,20}", fullmatch=True), max_size=8))
    if draw(st.booleans()):
        header["remark"] = draw(_mostly(_any_text, _json_values))
    text = json.dumps(header, ensure_ascii=draw(st.booleans()))
    body = draw(st.binary(max_size=80))
    return _frame(text.encode("utf-8", "surrogatepass"), body)


@st.composite
def binary_frames(draw) -> bytes:
    """ROCKETMQ headers with arbitrary bytes in remark, keys and values (invalid UTF-8
    too), lengths that lie now and then."""
    utf8 = st.text(max_size=12).map(str.encode)
    fields = draw(st.lists(st.tuples(_mostly(utf8, st.binary(max_size=12)), _mostly(utf8, st.binary(max_size=24))), max_size=6))
    names = sorted({f.name.encode() for cls in REQUEST_HEADERS.values() for f in attrs.fields(cls)})
    digits = st.from_regex(rb"-?[0-9]{1,20}", fullmatch=True)
    fields += [(draw(st.sampled_from(names)), draw(_mostly(digits, utf8))) for _ in range(draw(st.integers(0, 4)))]
    ext = b"".join(struct.pack(">H", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in fields)
    remark = draw(_mostly(utf8, st.binary(max_size=16)))
    fixed = struct.pack(
        ">hBhii", draw(st.sampled_from(sorted(c for c in REQUEST_HEADERS if c < 2**15)) | st.integers(-(2**15), 2**15 - 1)),
        draw(_mostly(st.sampled_from([lang.value for lang in LanguageCode]), st.integers(0, 255))),
        draw(st.integers(0, 500)), draw(st.integers(-(2**31), 2**31 - 1)),
        draw(st.sampled_from([0, 1, 2, 3])),
    )
    lie = draw(st.sampled_from([0, 0, 0, 1, -1, 1000]))
    header = fixed + struct.pack(">i", len(remark) + lie) + remark + struct.pack(">i", len(ext)) + ext
    return _frame(header, draw(st.binary(max_size=40)), stype=1)


def _golden_frames() -> list[bytes]:
    return [p.read_bytes() for p in sorted(GOLDEN.rglob("*.bin"))]


@st.composite
def mutated_golden_frames(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(_golden_frames())))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if op == "flip" and pos < len(data):
            data[pos] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 4))]
        else:
            del data[pos:]
    if draw(st.booleans()) and len(data) >= 4:  # keep the length prefix true, to reach the header
        data[0:4] = struct.pack(">i", len(data) - 4)
    return bytes(data)


_any_frame = st.binary(max_size=200) | json_frames() | binary_frames() | mutated_golden_frames()
_decode_options = st.lists(
    st.sampled_from([["--request-code", "310"], ["--request-code", "11"], ["--request-code", "-7"], ["--preview", "0"], ["--preview", "3"]]),
    max_size=2,
).map(lambda opts: [a for o in opts for a in o])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(_any_frame, _decode_options)
def test_decode_any_hex_argument_exits_cleanly(data, options):
    doc = assert_clean(*decode_in_process([data.hex(), *options]))
    event("decoded" if doc else "refused")
    if doc and doc["customHeader"]:
        event("custom header " + ("error" if "error" in doc["customHeader"] else "decoded"))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_any_frame, _decode_options, st.sampled_from(["raw", "hex", "spaced hex"]))
def test_decode_any_stdin_exits_cleanly(data, options, form):
    if form == "hex":
        stdin = data.hex().encode()
    elif form == "spaced hex":
        stdin = b"\n".join(data[i : i + 16].hex(" ").encode() for i in range(0, len(data), 16))
    else:
        stdin = data
    code, out, err = decode_in_process(["-", *options], stdin)
    assert_clean(code, out, err)
    if form != "raw" or not re.fullmatch(rb"\s*(0[xX])?[0-9a-fA-F\s]*", data):  # (such raw bytes read as hex)
        assert (code, out) == decode_in_process([data.hex(), *options])[:2]  # the same frame, the same result


@pytest.mark.parametrize(
    "argv, stdin",
    [
        (["decode", SURROGATE_FRAME], b""),
        (["decode", "-"], SURROGATE_FRAME.encode() + b"\n"),
        (["decode", "-", "--request-code", "310"], _golden_frames()[0][:-3]),  # raw bytes, cut short
        (["decode", "-"], bytes(range(256)) * 3),
    ],
    ids=["surrogate-arg", "surrogate-stdin-hex", "cut-frame-stdin-raw", "garbage-stdin"],
)
def test_decode_subprocess_exits_cleanly(argv, stdin):
    result = subprocess.run([str(TROCKET), *argv], input=stdin, capture_output=True, timeout=60)
    doc = assert_clean(result.returncode, result.stdout, result.stderr)
    if argv[1:] == [SURROGATE_FRAME] or stdin.startswith(SURROGATE_FRAME.encode()):
        assert doc["extFields"]["empty"] == "a\udfff"


# -- broker and name server: Ctrl-C is a clean stop ---------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["namesrv", "--listen", "127.0.0.1:0"],
        ["broker", "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0", "--segment-size", "1M"],
    ],
    ids=["namesrv", "broker"],
)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
async def test_a_signal_stops_the_servers_cleanly_with_130_or_143(argv, signum, tmp_path):
    proc = await trio.lowlevel.open_process(
        [str(TROCKET), *argv], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    log = b""
    try:
        with trio.fail_after(30):
            while b"boot success" not in log:
                chunk = await proc.stderr.receive_some()
                assert chunk, log.decode()
                log += chunk
            proc.send_signal(signum)
            while chunk := await proc.stderr.receive_some():
                log += chunk
            code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
    name = signal.Signals(signum).name.encode()
    assert code == 128 + signum and b"Traceback" not in log and name + b": shutting down" in log, log.decode()
