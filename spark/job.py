"""The analysis job: captures in, Parquet tables and a summary out.

Shape (nothing but the plan, the problem list and the summary's small tallies passes
through the driver, and no table row goes through the JVM):

1. the driver names the inputs (a missing file or an unknown file type is a problem,
   the rest go on) and sniffs each file's format from its first bytes;
2. native captures: one task per file cuts it into ranges on record boundaries, the
   ranges are spread over the executors (a shuffle of small tuples) and each is read
   and decoded there (:mod:`trocket.spark.native`);
   pcap/pcapng: see :mod:`trocket.spark.pcap` (packets read in parallel, grouped by
   connection, reassembled and decoded per connection in the executors);
3. each stretch of decoded frames (a range, or a partition of whole connections) is,
   in one pass (:func:`trocket.spark.stretch.decode_stretch`): written as its own
   Parquet part of ``frames``, paired into calls written as its own part of ``calls``
   (:mod:`trocket.spark.calls`: pairing is local to a connection, so most calls close
   inside the stretch), and counted into a tally (:mod:`trocket.spark.summary`);
4. the stretches' leftovers (calls still open at a range's edge), one marker per
   connection and the tallies go through one sorted shuffle by connection; each task
   of that stage pairs its connections' leftovers (the rest: unanswered requests and
   orphan responses) into one more ``calls`` part and merges the tallies; the driver
   collects one tally per task;
5. the exact latency percentiles: the merged histograms name the few buckets that
   hold the wanted ranks, one pass over the ``calls`` parts fetches those values.

Problems (bad files, torn streams, raw bytes) are gathered in a set accumulator,
bounded, so a retried task does not count one twice. Part files are named by their
range or partition and written under a hidden name then renamed, so a retried task
replaces its part whole.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import time
from collections.abc import Sequence

import attrs


__all__ = ["Inputs", "resolve_inputs", "analyze", "decode_and_pair", "latency_values", "MAX_PROBLEMS"]

NATIVE_MAGIC = b"TRKCAP\r\n"
PCAP_MAGICS = (b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1")
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
#: at most this many problems are kept (a capture of garbage must not fill the driver)
MAX_PROBLEMS = 1000
DEFAULT_SPLIT_BYTES = 32 * 1024 * 1024


@attrs.define(slots=True)
class Inputs:
    """The captures named on the command line, sorted by format."""

    names: list[str] = attrs.Factory(list)  # every capture named, in order (the summary's "captures")
    native: list[tuple[str, str, int]] = attrs.Factory(list)  # (path, name, size)
    pcap: list[tuple[str, str, int]] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)


def sniff_format(head: bytes) -> str | None:
    if head.startswith(NATIVE_MAGIC):
        return "native"
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    if head[:4] == PCAPNG_MAGIC:
        return "pcapng"
    return None


def resolve_inputs(paths: Sequence[str]) -> Inputs:
    """Expand directories, sniff formats; what cannot be read becomes a problem."""
    inputs = Inputs()
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            files.extend(os.path.join(p, f) for f in sorted(os.listdir(p)) if os.path.isfile(os.path.join(p, f)))
        else:
            files.append(p)
    for path in files:
        name = os.path.basename(path) or path
        inputs.names.append(name)
        try:
            with open(path, "rb") as f:
                head = f.read(8)
                size = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            inputs.problems.append(f"{name}: no such file")
            continue
        except OSError as exc:
            inputs.problems.append(f"{name}: cannot read ({exc.strerror or exc})")
            continue
        if size == 0:
            inputs.problems.append(f"{name}: empty capture (no records)")
            continue
        fmt = sniff_format(head)
        if fmt == "native":
            inputs.native.append((os.path.abspath(path), name, size))
        elif fmt in ("pcap", "pcapng"):
            inputs.pcap.append((os.path.abspath(path), name, size))
        else:
            inputs.problems.append(f"{name}: not a capture (neither a trocket capture nor pcap/pcapng; first bytes {head!r})")
    return inputs


def _problem_accumulator(sc):
    from pyspark.accumulators import AccumulatorParam

    class _SetParam(AccumulatorParam):
        def zero(self, value):
            return frozenset()

        def addInPlace(self, a, b):
            if len(a) >= MAX_PROBLEMS:
                return a
            merged = set(a) | set(b)
            if len(merged) > MAX_PROBLEMS:
                merged = set(sorted(merged)[:MAX_PROBLEMS])
            return frozenset(merged)

    return sc.accumulator(frozenset(), _SetParam())


def _native_records(sc, files, split_bytes, acc, frames_path, calls_path, since_ns, until_ns):
    """Native captures: ranges planned per file, then each range decoded, paired and
    written by the task that reads it. An RDD of stretch records."""
    from .native import plan_native, read_native_range
    from .stretch import decode_stretch

    bases = list(itertools.accumulate((math.ceil(size / split_bytes) for _, _, size in files), initial=0))
    n_ranges = max(1, bases[-1])

    def plan(item):
        (path, name, _), index = item
        found: list[str] = []
        ranges = plan_native(path, name, split_bytes, found.append)
        if found:
            acc.add(frozenset(found))
        # keyed by about where the range falls among all ranges: one range a partition
        return [((bases[index] + rng[2] // split_bytes) % n_ranges, (index, rng)) for rng in ranges]

    def decode(item) -> list[tuple]:
        index, rng = item
        found: list[str] = []
        rows = read_native_range(rng, found.append, since_ns, until_ns)
        records = decode_stretch(rows, frames_path, calls_path, f"part-n{index:04d}-{rng[2]:014d}")
        if found:
            acc.add(frozenset(found))
        return records

    def plan_all(items):
        # every slot gets a task in this stage, an empty one too where there are fewer
        # files than slots: each starts its Python worker and imports the decoding
        # and table modules while the files are planned, and the decoding stage
        # reuses the warm workers (they started one by one before: ~1.5 s on 2 cores)
        import numpy  # noqa: F401
        import pyarrow.parquet  # noqa: F401

        from . import stretch  # noqa: F401

        return [r for item in items for r in plan(item)]

    slots = max(len(files), sc.defaultParallelism)
    ranges = sc.parallelize(list(zip(files, range(len(files)))), slots).mapPartitions(plan_all)
    # partitionBy, not repartition: PySpark's repartition moves pickled batches of
    # records, and a batch of a few small ranges would land in one partition whole
    ranges = ranges.partitionBy(n_ranges, lambda k: k).values()
    return ranges.flatMap(decode)


def decode_and_pair(spark, inputs: Inputs, acc, frames_path: str, calls_path: str, *, split_bytes=DEFAULT_SPLIT_BYTES,
                    since_ns=None, until_ns=None):  # fmt: skip
    """Decode every capture in the executors into ``frames_path`` and ``calls_path``
    (Parquet parts written by the tasks); returns the merged :class:`Tally`. One Spark
    job: the stretches, then one sorted shuffle of their leftovers and tallies by
    connection (:func:`trocket.spark.stretch.resolve_records`); the driver receives
    one tally per task of the second stage."""
    from .arrow import calls_schema, frames_schema, write_parquet
    from .stretch import decode_stretch, record_partition, resolve_records
    from .summary import Tally

    sc = spark.sparkContext
    for path in (frames_path, calls_path):
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
    parts = []
    if inputs.native:
        parts.append(_native_records(sc, inputs.native, split_bytes, acc, frames_path, calls_path, since_ns, until_ns))
    if inputs.pcap:
        from .pcap import pcap_rows

        rows = pcap_rows(sc, inputs.pcap, split_bytes, acc, since_ns, until_ns)
        parts.append(rows.mapPartitionsWithIndex(lambda i, it: decode_stretch(it, frames_path, calls_path, f"part-p{i:05d}")))
    tally = Tally()
    if parts:
        records = parts[0] if len(parts) == 1 else sc.union(parts)
        n = max(1, sc.defaultParallelism)
        resolved = records.repartitionAndSortWithinPartitions(n, record_partition(n)).mapPartitionsWithIndex(
            lambda i, it: [resolve_records(it, calls_path, f"part-r{i:05d}")]
        )
        for t in resolved.collect():
            tally.merge(t)
    for path, schema in ((frames_path, frames_schema()), (calls_path, calls_schema())):
        if not _parts(path):
            write_parquet([], path, "part-empty.parquet", schema)  # nothing readable: the table exists, empty
    return tally


def _parts(directory: str) -> list[str]:
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".parquet") and not n.startswith("."))


def latency_values(spark, tally, calls_path: str) -> dict:
    """The latencies the percentiles need (:meth:`Tally.latency_targets`), found by one
    pass over the ``calls`` parts in the executors."""
    from .summary import select_latencies

    targets = tally.latency_targets()
    if not targets:
        return {}
    wanted = {code: {b for _, b, _ in found} for code, found in targets.items()}
    files = _parts(calls_path)
    sc = spark.sparkContext
    n = max(1, min(len(files), 2 * sc.defaultParallelism))
    out: dict = {}
    for part in sc.parallelize(files, n).mapPartitions(lambda it: [select_latencies(it, wanted)]).collect():
        for key, values in part.items():
            out.setdefault(key, []).extend(values)
    return out


@attrs.define(slots=True)
class Result:
    summary: dict
    frames_path: str
    calls_path: str
    #: seconds per phase: decode and pair (both tables written, tallies merged), percentiles
    timings: dict[str, float] = attrs.Factory(dict)


def analyze(
    spark,
    captures: Sequence[str],
    out: str,
    *,
    since_ns: int | None = None,
    until_ns: int | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    progress=None,
) -> Result:
    """Run the job: ``out/frames``, ``out/calls`` (Parquet) and the summary dict."""
    from .summary import build_summary

    sc = spark.sparkContext
    os.makedirs(out, exist_ok=True)
    frames_path = os.path.join(out, "frames")
    calls_path = os.path.join(out, "calls")

    def phase(text: str) -> None:
        if progress is not None:
            progress.phase = text

    clock = time.monotonic
    t0 = clock()
    inputs = resolve_inputs(captures)
    acc = _problem_accumulator(sc)
    sc.setJobDescription("read, decode and pair")
    phase("reading, decoding and pairing")
    tally = decode_and_pair(spark, inputs, acc, frames_path, calls_path, split_bytes=split_bytes, since_ns=since_ns, until_ns=until_ns)
    t1 = clock()
    phase("latency percentiles")
    sc.setJobDescription("latency percentiles")
    selected = latency_values(spark, tally, calls_path)
    problems = sorted(set(inputs.problems) | set(acc.value))
    summary = build_summary(tally, selected, inputs.names, problems)
    timings = {"decode and pair": t1 - t0, "percentiles": clock() - t1}
    return Result(summary, frames_path, calls_path, timings)
