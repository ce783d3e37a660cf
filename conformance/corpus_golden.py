"""Extract the distinct frames of the committed corpus into ``conformance/golden/captures/``.

    .venv/bin/python -m trocket.conformance.corpus_golden [CAPTURES_DIR [GOLDEN_DIR]]

For every native capture in ``conformance/captures/`` (its pcap twin holds the same
frames), the first frame of each kind -- (sender, code, for a response the request
code it answers), and the serialization and language -- is written to
``golden/captures/<session>/`` with a manifest entry (:mod:`trocket.conformance.golden`),
so ``trocket conformance check`` covers what real clients send and what the broker
answers them. Frames a foreign encoder wrote (the C++ client's and ali-ons' JSON
layouts differ from fastjson's) carry ``"reencodes": false``: the check proves they
decode to the manifest and that trocket's re-encoding decodes to the same content,
not that it is the same bytes. Regenerating from the same captures changes no byte.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from trocket.codecs.codes import request_code_name, response_code_name
from trocket.codecs.serialize import decode_command, encode_command

from .golden import command_to_entry, write_manifest
from .sources import read_frames

HERE = Path(__file__).resolve().parent
DEFAULT_CAPTURES = HERE / "captures"
DEFAULT_GOLDEN = HERE / "golden" / "captures"


def extract_session(capture: Path, folder: Path) -> list[dict]:
    frames = read_frames(str(capture)).frames
    pending: dict[tuple, int] = {}
    seen: set[tuple] = set()
    entries: list[dict] = []
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for f in frames:
        cmd = decode_command(f.frame[4:])
        if not cmd.is_response:
            pending[(f.conn, cmd.opaque)] = cmd.code
            kind = ("request", cmd.code)
            label = f"{'client' if f.from_client else 'server'} request {request_code_name(cmd.code)} ({cmd.code})"
        else:
            req = pending.pop((f.conn, cmd.opaque), None)
            kind = ("response", req, cmd.code)
            label = (f"{'client' if f.from_client else 'server'} response {response_code_name(cmd.code)} "
                     f"({cmd.code}) to {request_code_name(req) if req is not None else 'an unknown request'}")
        key = (f.from_client, *kind, cmd.serialize_type, cmd.language)
        if key in seen:
            continue
        seen.add(key)
        name = "_".join(str(k) for k in ("c" if f.from_client else "s", *kind))
        file = f"{len(entries):02d}_{name}__{cmd.serialize_type.name}.bin"
        (folder / file).write_bytes(f.frame)
        entry = command_to_entry(cmd, file, f"{capture.stem}: {label}, {cmd.language.name} {cmd.version}")
        if encode_command(cmd) != f.frame:
            entry["reencodes"] = False
        entries.append(entry)
    write_manifest(folder, entries)
    return entries


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    captures = Path(args[0]) if args else DEFAULT_CAPTURES
    golden = Path(args[1]) if len(args) > 1 else DEFAULT_GOLDEN
    for capture in sorted(captures.glob("*.trkcap")):
        entries = extract_session(capture, golden / capture.stem)
        print(f"{capture.name}: {len(entries)} distinct frames -> {golden / capture.stem}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
