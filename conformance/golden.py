"""Golden frames: a folder of ``*.bin`` frames and a ``manifest.json`` of what each
decodes to; the checks the conformance runner applies to them.

Manifest schema (shared with ``shared/golden-java``)::

    {"frames": [{"file", "serializeType": "JSON"|"ROCKETMQ", "code", "language",
                 "version", "opaque", "flag", "remark": str|null,
                 "extFields": {..}|null, "bodyHex", "note"}]}

A frame conforms when (1) it decodes to exactly the manifest's fields, ext fields
in the listed order, (2) re-encoding the decoded command reproduces the file byte
for byte, and (3) written in the other serialization and decoded again it carries
the same content (serializer switching). An entry with ``"reencodes": false`` is a
frame a foreign encoder wrote (a real client's JSON layout, from the committed
captures): for it (2) is that the re-encoded frame decodes to the same fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.errors import CodecError
from trocket.codecs.frame import split_frames
from trocket.codecs.serialize import decode_command, encode_command

__all__ = ["GoldenEntry", "FrameResult", "load_manifest", "find_manifests", "check_entry", "check_dir", "entry_to_command", "command_to_entry", "write_manifest"]

MANIFEST = "manifest.json"


@attrs.frozen
class GoldenEntry:
    path: Path
    fields: dict[str, Any]

    @property
    def name(self) -> str:
        return self.fields["file"]


@attrs.frozen
class FrameResult:
    entry: GoldenEntry
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def load_manifest(folder: Path) -> list[GoldenEntry]:
    data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    return [GoldenEntry(folder / f["file"], f) for f in data["frames"]]


def find_manifests(root: Path) -> list[Path]:
    """Every folder at or below ``root`` that holds a manifest, sorted."""
    return sorted(p.parent for p in root.rglob(MANIFEST))


def write_manifest(folder: Path, entries: list[dict[str, Any]]) -> None:
    """``folder/manifest.json`` listing ``entries`` (the layout the golden sets share)."""
    text = json.dumps({"frames": entries}, indent=1, ensure_ascii=False) + "\n"
    (folder / MANIFEST).write_text(text, encoding="utf-8")


def command_to_entry(cmd: RemotingCommand, file: str, note: str) -> dict[str, Any]:
    return {
        "file": file,
        "serializeType": cmd.serialize_type.name,
        "code": cmd.code,
        "language": cmd.language.name,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
        "remark": cmd.remark,
        "extFields": cmd.ext_fields,
        "bodyHex": bytes(cmd.body).hex(),
        "note": note,
    }


def entry_to_command(fields: dict[str, Any]) -> RemotingCommand:
    return RemotingCommand(
        code=fields["code"],
        language=LanguageCode[fields["language"]],
        version=fields["version"],
        opaque=fields["opaque"],
        flag=fields["flag"],
        remark=fields["remark"],
        ext_fields=fields["extFields"],
        body=bytes.fromhex(fields["bodyHex"]),
        serialize_type=SerializeType[fields["serializeType"]],
    )


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


_COMPARED = ("serializeType", "code", "language", "version", "opaque", "flag", "remark", "extFields", "bodyHex")


def check_entry(entry: GoldenEntry) -> FrameResult:
    problems: list[str] = []
    try:
        raw = entry.path.read_bytes()
    except OSError as exc:
        return FrameResult(entry, (f"cannot read: {exc}",))
    try:
        [payload] = split_frames(raw)
        cmd = decode_command(payload)
    except (CodecError, ValueError) as exc:
        return FrameResult(entry, (f"does not decode: {exc}",))

    got = command_to_entry(cmd, entry.name, "")
    for key in _COMPARED:
        if got[key] != entry.fields[key]:
            problems.append(f"{key}: decoded {got[key]!r}, manifest says {entry.fields[key]!r}")
    if got["extFields"] == entry.fields["extFields"] and got["extFields"] is not None:
        if list(got["extFields"]) != list(entry.fields["extFields"]):
            problems.append(f"extFields order: decoded {list(got['extFields'])}, manifest {list(entry.fields['extFields'])}")

    again = encode_command(cmd)
    if entry.fields.get("reencodes", True) is False:
        # a foreign encoder's layout (the C++ client's JSON): the content must survive
        back = decode_command(split_frames(again)[0])
        if command_to_entry(back, entry.name, "") != got:
            problems.append("re-encoding changes the content of a foreign frame")
    elif again != raw:
        at = _first_difference(again, raw)
        problems.append(
            f"re-encoding differs at offset {at} (file {len(raw)} bytes, re-encoded {len(again)} bytes)"
        )

    other = SerializeType.ROCKETMQ if cmd.serialize_type is SerializeType.JSON else SerializeType.JSON
    if other is SerializeType.JSON or -0x8000 <= cmd.code <= 0x7FFF:
        switched = attrs.evolve(cmd, serialize_type=other)
        try:
            back = decode_command(split_frames(encode_command(switched))[0])
        except CodecError as exc:
            problems.append(f"switching to {other.name} fails: {exc}")
        else:
            lossy = other is SerializeType.ROCKETMQ  # binary reads "" and {} as absent
            want = (cmd.remark or None, cmd.ext_fields or None) if lossy else (cmd.remark, cmd.ext_fields)
            if (back.code, back.opaque, back.flag, back.remark, back.ext_fields, back.body) != (
                cmd.code, cmd.opaque, cmd.flag, *want, cmd.body
            ):
                problems.append(f"content changes when switched to {other.name}")
    return FrameResult(entry, tuple(problems))


def check_dir(root: Path) -> Iterator[FrameResult]:
    """Check every manifest entry at or below ``root``."""
    for folder in find_manifests(root):
        for entry in load_manifest(folder):
            yield check_entry(entry)
