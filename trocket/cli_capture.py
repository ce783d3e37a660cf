"""``trocket capture ...``: look at captures (native trocket captures, pcap, pcapng).

    trocket capture show FILE... [--code N] [--conn C] [--opaque N] [--json]
    trocket capture stats FILE... [--json]

:func:`add_capture_parser` creates the ``capture`` group and returns its subparsers
object; another module adds its own subcommand to the group with one line in
``trocket/cli.py``::

    capture_commands = add_capture_parser(sub)
    add_proxy_command(capture_commands)    # ``subparsers.add_parser("proxy", ...)``, ``run`` set

(``add_capture_parser(sub, add_proxy_command, ...)`` does the same.)

A native capture's RAW records (bytes a capture proxy forwarded without parsing them as
frames) show as ``raw bytes (N)`` (``"kind": "raw"`` in ``--json``) and are counted apart
from the frames by ``stats`` (``raw_records``, ``raw_bytes``).

FILE is a local path or a ``file://``, ``s3://``/``s3a://`` or ``hdfs://`` URI (read
through pyarrow, the ``spark`` extra: :mod:`trocket.spark.storage`; ``--s3-endpoint`` or
``AWS_ENDPOINT_URL`` for an S3-compatible store).

Exit status: 0 when every file was read completely; 1 when a file is missing, of an
unknown type, cut off, or a stream had gaps or bytes that are no RocketMQ frames
(what could be read is still shown).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from trocket.exit_codes import EXIT_FAIL as EXIT_INCOMPLETE
from trocket.exit_codes import EXIT_OK

__all__ = ["add_capture_parser", "run_show", "run_stats"]

_PROGRESS_MIN_BYTES = 16 << 20  # smaller files get no progress line
_PROGRESS_SECONDS = 0.3  # between updates
_PROGRESS_RECORDS = 1024  # records between looks at the clock


def add_capture_parser(sub: argparse._SubParsersAction, *more: Callable[[argparse._SubParsersAction], Any]) -> argparse._SubParsersAction:
    """Add ``capture`` (with ``show`` and ``stats``) to ``sub``, then let each of ``more``
    add its own subcommand to the group; return the group's subparsers."""
    capture = sub.add_parser(
        "capture",
        help="look at captured traffic (trocket captures, pcap, pcapng)",
        description="Read captures of RocketMQ remoting traffic: trocket's own capture format "
        "(--tap), pcap and pcapng files (tcpdump, tshark) with TCP reassembly.",
    )
    csub = capture.add_subparsers(dest="capture_command", metavar="COMMAND", required=True)

    show = csub.add_parser(
        "show",
        help="one frame a line (or one JSON object a line)",
        description="Print every frame of the captures, one a line like tshark's summary: time "
        "(seconds since the first frame), connection, source -> destination, request/oneway/"
        "response, code name, opaque, key ext fields, remark, body size. Problems (gaps, cut-off "
        "files, non-RocketMQ bytes) go to stderr.",
    )
    show.add_argument("files", nargs="+", type=capture_file, metavar="FILE", help=_FILE_HELP)
    show.add_argument("--s3-endpoint", metavar="URL", help=_S3_HELP)
    show.add_argument("--code", type=request_code, metavar="CODE",
                      help="only frames of CODE (a number or a name: 310, SEND_MESSAGE_V2): requests with it, "
                      "responses with it or answering it")
    show.add_argument("--conn", type=int, metavar="C", help="only connection C")
    show.add_argument("--opaque", type=int, metavar="N", help="only frames with opaque N")
    show.add_argument("--json", action="store_true", help="one JSON object a line (ts, conn, src, dst, kind, code, opaque, serialize, remark, ext, body_len, ...)")
    show.set_defaults(run=run_show)

    stats = csub.add_parser(
        "stats",
        help="counts: frames, requests and responses by code, unanswered requests, per connection",
        description="Count the frames of the captures: requests and responses by code, request/"
        "response pairs, latency percentiles by request code, unanswered requests (no response "
        "by the end of the capture; oneway requests never count), per connection, and the "
        "problems met while reading.",
    )
    stats.add_argument("files", nargs="+", type=capture_file, metavar="FILE", help=_FILE_HELP)
    stats.add_argument("--s3-endpoint", metavar="URL", help=_S3_HELP)
    stats.add_argument("--json", action="store_true", help="print the counts as one JSON document")
    stats.set_defaults(run=run_stats)
    for add in more:
        add(csub)
    return csub


# -- reading ------------------------------------------------------------------------------

_FILE_HELP = "a capture: a path, or a file://, s3://, s3a:// or hdfs:// URI"
_S3_HELP = "the S3-compatible store s3:// files are read from (default: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS)"


def capture_file(text: str) -> Path | str:
    """FILE: a local path (a ``file:`` URI's path), or a store's URI kept as given."""
    from trocket.spark.storage import local_path

    local = local_path(text)
    return Path(local) if local is not None else text


def _open(path: Path | str, s3_endpoint: str | None):
    """A capture file opened for reading: a local one with ``open``, a URI through
    :mod:`trocket.spark.storage` (OSError when it cannot be read)."""
    if isinstance(path, Path):
        return open(path, "rb")
    from trocket.spark.storage import Storage, StorageError, open_input

    try:
        return open_input(path, Storage.from_environment(s3_endpoint))
    except FileNotFoundError:  # said as for a local file
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path) from None
    except ImportError:
        raise OSError("reading a URI needs pyarrow: pip install 'trocket[spark]'") from None
    except StorageError as exc:
        raise OSError(str(exc)) from None


def _name(path: Path | str) -> str:
    return path.name if isinstance(path, Path) else path.rstrip("/").rpartition("/")[2]


def _progress(name: str, size: int):
    """The progress line of a long file (only on a terminal): the share of it read."""
    from trocket.progress import ProgressLine

    def text(position: int) -> str:
        pct = 100.0 * position / size if size else 100.0
        return f"  {name}: {pct:5.1f}% of {size / 1e6:.1f} MB"

    return ProgressLine(size, interval=_PROGRESS_SECONDS, text=text,
                        enabled=None if size >= _PROGRESS_MIN_BYTES else False)


class _Files:
    """Items of several capture files, with their problems reported and counted."""

    def __init__(self, paths: list[Path | str], *, on_problem, s3_endpoint: str | None = None) -> None:
        self.paths = paths
        self._s3_endpoint = s3_endpoint
        self.incomplete = False
        self.errors = 0
        self._on_problem = on_problem

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        from trocket.codecs.capture import CaptureRecord
        from trocket.codecs.capture_files import CaptureFile
        from trocket.codecs.errors import CaptureFormatError

        for index, path in enumerate(self.paths):
            try:
                stream = _open(path, self._s3_endpoint)
            except OSError as exc:
                _error(f"{path}: {exc.strerror or exc}")
                self.incomplete = True
                self.errors += 1
                continue
            with stream:
                try:
                    capture = CaptureFile(stream)
                except CaptureFormatError as exc:
                    _error(f"{path}: {exc}")
                    self.incomplete = True
                    self.errors += 1
                    continue
                except OSError as exc:
                    _error(f"{path}: {exc}")
                    self.incomplete = True
                    self.errors += 1
                    continue
                progress = _progress(_name(path), _size(stream))
                n = 0
                try:
                    for item in capture:
                        if type(item) is CaptureRecord:
                            yield index, item
                            n += 1
                            if progress.on and not n % _PROGRESS_RECORDS:
                                progress.update(capture.position)
                        else:
                            progress.close(clear=True)
                            self._on_problem(path, item)
                except OSError as exc:
                    _error(f"{path}: read failed: {exc}")
                    self.incomplete = True
                finally:
                    progress.close(clear=True)
                if not capture.complete:
                    self.incomplete = True


def _size(stream) -> int:
    from trocket.spark.storage import file_size

    try:
        return file_size(stream)  # by seeking: a store's file has no descriptor
    except (OSError, ValueError):  # a pipe
        return 0


def _error(message: str) -> None:
    print(f"trocket: error: {message}", file=sys.stderr)


# -- show ---------------------------------------------------------------------------------


def _format_line(view, rel: float, conn: str) -> str:
    parts = [f"{rel:12.6f}", f"{conn:>5}", f"{view.src} -> {view.dst}"]
    if view.kind == "raw":
        parts.append(f"raw bytes ({view.frame_len}), not parsed as a frame")
        return "  ".join(parts)
    if view.kind == "undecodable":
        parts.append(f"undecodable frame of {view.frame_len} bytes: {view.error}")
        return "  ".join(parts)
    if view.kind == "response":
        what = f"response {view.code_name}({view.code})"
        if view.request_code is not None:
            from trocket.codecs.codes import request_code_name

            what += f" to {request_code_name(view.request_code)}({view.request_code})"
    else:
        what = f"{view.kind:<8} {view.code_name}({view.code})"
    parts.append(what)
    parts.append(f"#{view.opaque}")
    parts.append("JSON" if view.serialize == "JSON" else "RMQ")
    fields = view.key_fields()
    if fields:
        parts.append(" ".join(f"{k}={v}" for k, v in fields.items()))
    if view.remark:
        remark = view.remark if len(view.remark) <= 80 else view.remark[:77] + "..."
        parts.append(f"remark={json.dumps(remark, ensure_ascii=False)}")
    parts.append(f"body={view.body_len}")
    return "  ".join(parts)


def _problem_printer(path: Path | str, problem) -> None:
    print(f"trocket: {path}: problem: {problem}", file=sys.stderr)


def request_code(text: str) -> int:
    """``--code``: a number, or a ``RequestCode`` name in any case (the nearest names
    suggested for a typo)."""
    import difflib

    from trocket.codecs.codes import RequestCode

    if text.strip().lstrip("-").isdigit():
        return int(text)
    name = text.strip().upper()
    if name in RequestCode.__members__:
        return int(RequestCode[name])
    near = difflib.get_close_matches(name, list(RequestCode.__members__), n=3)
    raise argparse.ArgumentTypeError(
        f"{text!r} is no request code{' (did you mean ' + ' or '.join(near) + '?)' if near else ''}")


def run_show(args: argparse.Namespace) -> int:
    from trocket.conformance.capture_stats import RequestTracker, view_record

    files = _Files(args.files, on_problem=_problem_printer, s3_endpoint=args.s3_endpoint)
    tracker = RequestTracker()
    multi = len(args.files) > 1
    first_ns: int | None = None
    out = sys.stdout
    enc = getattr(out, "encoding", None) or "utf-8"
    code, conn_filter, opaque = args.code, args.conn, args.opaque
    for index, record in files:
        if conn_filter is not None and record.connection_id != conn_filter:
            continue
        view = view_record(record, tracker, (index, record.connection_id))
        if code is not None and view.code != code and view.request_code != code:
            continue
        if opaque is not None and view.opaque != opaque:
            continue
        if args.json:
            doc = view.to_json()
            if multi:
                doc["file"] = str(args.files[index])
            out.write(json.dumps(doc) + "\n")  # ASCII: lone surrogates a JSON header escaped stay escaped
        else:
            if first_ns is None:
                first_ns = view.ts_ns
            conn = f"{index + 1}:{view.conn}" if multi else str(view.conn)
            line = _format_line(view, (view.ts_ns - first_ns) / 1e9, conn)
            if not line.isascii():  # what stdout cannot encode (or a lone surrogate) shown escaped
                line = line.encode(enc, "backslashreplace").decode(enc, "replace")
            out.write(line + "\n")
    out.flush()
    if files.incomplete:
        print("trocket: the captures could not be read completely (see the problems above)", file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_OK


# -- stats --------------------------------------------------------------------------------


def run_stats(args: argparse.Namespace) -> int:
    from trocket.codecs.codes import request_code_name, response_code_name
    from trocket.conformance.capture_stats import CaptureStats

    stats = CaptureStats()
    problems: list[str] = []

    def on_problem(path: Path | str, problem) -> None:
        stats.add_problem(problem)
        if len(problems) < 50:
            problems.append(f"{path}: {problem}")

    files = _Files(args.files, on_problem=on_problem, s3_endpoint=args.s3_endpoint)
    multi = len(args.files) > 1
    for index, record in files:
        stats.add(record, f"{index + 1}:{record.connection_id}" if multi else record.connection_id)
    doc = stats.to_json()
    doc["captures"] = [str(p) for p in args.files]
    doc["problems"] = problems
    doc["complete"] = not files.incomplete
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print_stats(doc, request_code_name, response_code_name)
    return EXIT_INCOMPLETE if files.incomplete else EXIT_OK


def _print_stats(doc: dict[str, Any], req_name, resp_name) -> None:
    p = print
    span = ""
    if doc["first_ts"] is not None:
        span = f" over {doc['last_ts'] - doc['first_ts']:.3f} s"
    p(f"frames: {doc['frames']} ({doc['bytes']} bytes){span} on {doc['connections']} connections")
    p(f"requests: {doc['requests']}  oneway: {doc['oneway_requests']}  responses: {doc['responses']}  "
      f"undecodable: {doc['undecodable']}  orphan responses: {doc['orphan_responses']}")
    if doc["raw_records"]:
        p(f"raw (not frames): {doc['raw_records']} records, {doc['raw_bytes']} bytes")
    if doc["frames_by_serialize"]:
        p("serialization: " + "  ".join(f"{k} {v}" for k, v in sorted(doc["frames_by_serialize"].items())))
    unanswered = doc["unanswered_by_code"]
    oneway = doc["oneway_requests_by_code"]
    codes = sorted({*map(int, doc["requests_by_code"]), *map(int, oneway)})
    if codes:
        p("")
        p(f"{'request code':<44}{'requests':>10}{'oneway':>10}{'unanswered':>12}")
        for c in codes:
            s = str(c)
            p(f"{req_name(c) + f' ({c})':<44}{doc['requests_by_code'].get(s, 0):>10}{oneway.get(s, 0):>10}{unanswered.get(s, 0):>12}")
    if doc["responses_by_code"]:
        p("")
        p(f"{'response code':<44}{'responses':>10}")
        for s, n in doc["responses_by_code"].items():
            p(f"{resp_name(int(s)) + f' ({s})':<44}{n:>10}")
    if doc["pairs"]:
        p("")
        p(f"{'request -> response':<60}{'count':>10}")
        for pair in doc["pairs"]:
            label = f"{req_name(pair['request_code'])} -> {resp_name(pair['response_code'])}"
            p(f"{label:<60}{pair['count']:>10}")
    if doc["latency_ms_by_code"]:
        p("")
        p(f"{'latency (ms) by request code':<44}{'p50':>10}{'p95':>10}{'p99':>10}{'max':>10}")
        for code, q in doc["latency_ms_by_code"].items():
            p(f"{req_name(int(code)) + f' ({code})':<44}{q['p50']:>10.3f}{q['p95']:>10.3f}{q['p99']:>10.3f}{q['max']:>10.3f}")
    if doc["per_connection"]:
        p("")
        p(f"{'conn':>8}  {'client -> server':<50}{'frames':>8}{'requests':>10}{'responses':>11}{'bytes':>12}")
        for c in doc["per_connection"]:
            p(f"{c['conn']:>8}  {c['client'] + ' -> ' + c['server']:<50}{c['frames']:>8}{c['requests']:>10}{c['responses']:>11}{c['bytes']:>12}")
    if doc["problems_by_kind"]:
        p("")
        p("problems: " + "  ".join(f"{k} {v}" for k, v in sorted(doc["problems_by_kind"].items())))
        for line in doc["problems"]:
            p(f"  {line}")
    if not doc["complete"]:
        p("")
        p("INCOMPLETE: the captures could not be read completely")
