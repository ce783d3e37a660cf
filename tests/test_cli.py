import json
import subprocess
import sys
from pathlib import Path

import pytest

from trocket import __version__
from trocket.cli import main
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.serialize import encode_command

ROOT = Path(__file__).parents[1]
GOLDEN = ROOT / "conformance" / "golden"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"trocket {__version__}"


def test_console_script_is_installed():
    exe = Path(sys.executable).parent / "trocket"
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"trocket {__version__}"


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
