"""The analysis job: captures in, Parquet tables and a summary out.

Shape (nothing but the plan, the problem list and the summary's small tallies passes
through the driver, and no table row goes through the JVM):

1. the driver names the inputs (:mod:`trocket.spark.inputs`: a missing file or an
   unknown file type is a problem, the rest go on) and sniffs each file's format from
   its first bytes; when nothing is readable no JVM starts;
2. native captures: one task per file cuts it into ranges on record boundaries (the
   plans, with each capture's span, come back to the driver), the ranges are spread
   over the executors and each is read and decoded there (:mod:`trocket.spark.native`);
   pcap/pcapng: see :mod:`trocket.spark.pcap` (packets read in parallel, grouped by
   connection, reassembled and decoded per connection in the executors);
3. each stretch of decoded frames (a range, or a partition of whole connections) is,
   in one pass (:func:`trocket.spark.stretch.decode_stretch`): written as its own
   Parquet part of ``frames``, paired into calls written as its own part of ``calls``
   (:mod:`trocket.spark.calls`: pairing is local to a connection, so most calls close
   inside the stretch), and counted into a tally (:mod:`trocket.spark.summary`);
4. the stretches' leftovers (calls still open at a range's edge), markers of the
   connection pieces seen and the tallies go through one sorted shuffle by address
   pair; each task of that stage resolves its pieces into streams (a connection in
   several captures, :mod:`trocket.spark.streams`), pairs the leftovers by stream (the
   rest: unanswered requests and orphan responses) into one more ``calls`` part and
   merges the tallies; the driver collects one tally per task;
5. the exact latency percentiles: the merged histograms name the few buckets that
   hold the wanted ranks, one pass over the ``calls`` parts fetches those values.

Problems (bad files, torn streams, raw bytes) are gathered in a set accumulator,
bounded (:mod:`trocket.spark.problems`), so a retried task does not count one twice. Part files are named by their
range or partition and written under a hidden name then renamed, so a retried task
replaces its part whole.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Sequence

import attrs

from .inputs import Inputs, resolve_inputs
from .problems import Problem, incomplete, keep, problem_accumulator
from .storage import LOCAL, Storage, hidden_name, is_local, join, list_files, local_path, make_dirs, remove_tree, write_bytes

__all__ = ["analyze", "decode_and_pair", "latency_values", "write_empty_tables", "finish_tables", "summarize", "part_files", "map_files"]

#: the size of the ranges a large file is read in: 64 MiB measured 3% faster than 32 (fewer
#: tasks, each opening and writing its own Parquet parts) for 373 vs 338 MB worker RSS
#: (benchmarks/spark_analyze.py, 2M frames, local[2])
DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024


def _counted(records: list[tuple], frames_acc) -> list[tuple]:
    """A stretch's records, its frames added to ``frames_acc`` (its tally is the last record)."""
    if frames_acc is not None:
        frames_acc.add(sum(records[-1][1].frames.values()))
    return records


def _native_records(sc, files, split_bytes, acc, frames_path, calls_path, since_ns, until_ns, frames_acc=None, storage=LOCAL):
    """Native captures: one task per file plans its ranges (collected: the driver learns
    each capture's span), then each range is decoded, paired and written by the task
    that reads it. (An RDD of stretch records, the native captures' spans.) ``storage``:
    how the tasks reach the files (:class:`trocket.spark.storage.Storage`)."""
    from .native import plan_native, read_native_range
    from .stretch import decode_stretch

    def plan(capture):
        found: list = []
        got = plan_native(capture.path, capture.name, split_bytes, found.append, capture.base, storage)
        if found:
            acc.add(frozenset(found))
        return capture.name, got

    def warm_plan(items):
        # each slot's Python worker imports the decoding and table modules while the
        # files are planned; the decoding stage reuses the warm workers
        import numpy  # noqa: F401
        import pyarrow.parquet  # noqa: F401

        from . import stretch  # noqa: F401

        return [plan(c) for c in items]

    slots = max(len(files), sc.defaultParallelism)
    plans = sc.parallelize(files, slots).mapPartitions(warm_plan).collect()
    spans: dict[str, tuple[int, int]] = {}  # a capture's span: of its files' (a rotation set's) together
    for name, p in plans:
        if p.first_ts is not None:
            lo, hi = spans.get(name, (p.first_ts, p.last_ts))
            spans[name] = (min(lo, p.first_ts), max(hi, p.last_ts))
    ranges = [rng for _, p in plans for rng in p.ranges]

    def decode(rng) -> list[tuple]:
        found: list = []
        account: Counter = Counter()
        rows = read_native_range(rng, found.append, since_ns, until_ns, account, storage)
        records = decode_stretch(rows, frames_path, calls_path, f"part-n{_name_key(rng[1])}-{rng[4] + rng[2]:014d}", "native", account=account,
                                 storage=storage)  # fmt: skip
        if found:
            acc.add(frozenset(found))
        return _counted(records, frames_acc)

    if not ranges:
        return None, spans
    return sc.parallelize(ranges, len(ranges)).flatMap(decode), spans


def _name_key(name: str) -> str:
    import zlib

    return f"{zlib.crc32(name.encode('utf-8', 'surrogatepass')):08x}"


def decode_and_pair(spark, inputs: Inputs, acc, frames_path: str, calls_path: str, *, split_bytes=DEFAULT_SPLIT_BYTES,
                    since_ns=None, until_ns=None, frames_acc=None):  # fmt: skip
    """Decode every capture in the executors into ``frames_path`` and ``calls_path``
    (Parquet parts written by the tasks); returns the merged :class:`Tally`
    (``frames_acc``: an accumulator each task adds its frames to, for the progress). The
    stretches, then one sorted shuffle of their pieces, leftovers and tallies by
    address pair (:func:`trocket.spark.stretch.resolve_records`); the driver receives
    one tally per task of that stage."""
    from .stretch import decode_stretch, record_partition, resolve_records
    from .summary import Tally

    sc = spark.sparkContext
    storage = inputs.storage
    _clear_tables(storage, frames_path, calls_path)
    parts = []
    spans: dict = {}
    if inputs.native:
        native, spans = _native_records(sc, inputs.native, split_bytes, acc, frames_path, calls_path, since_ns, until_ns, frames_acc, storage)
        if native is not None:
            parts.append(native)
    if inputs.pcap:
        from .pcap import pcap_stretches

        def decode(i, rows, pieces, account):
            return _counted(decode_stretch(rows, frames_path, calls_path, f"part-p{i:05d}", "pcap", pieces=pieces, account=account, storage=storage),
                            frames_acc)  # fmt: skip

        parts.append(pcap_stretches(sc, inputs.pcap, split_bytes, acc, since_ns, until_ns, decode, storage))
    tally = Tally()
    if parts:
        records = parts[0] if len(parts) == 1 else sc.union(parts)
        n = max(1, sc.defaultParallelism)
        resolved = records.repartitionAndSortWithinPartitions(n, record_partition(n)).mapPartitionsWithIndex(
            lambda i, it: [resolve_records(it, calls_path, f"part-r{i:05d}", spans, storage)]
        )
        for t in resolved.collect():
            tally.merge(t)
    finish_tables(frames_path, calls_path, storage)
    return tally


def _clear_tables(storage: Storage, *paths: str) -> None:
    for path in paths:
        remove_tree(path, storage)
        make_dirs(path, storage)


def write_empty_tables(frames_path: str, calls_path: str, storage: Storage = LOCAL) -> None:
    """Both tables, empty (nothing was readable): written without Spark."""
    _clear_tables(storage, frames_path, calls_path)
    finish_tables(frames_path, calls_path, storage)


def finish_tables(frames_path: str, calls_path: str, storage: Storage = LOCAL) -> None:
    """An empty part where a table got none (it exists, with its columns), and each
    table's ``_SUCCESS`` marker."""
    from .arrow import calls_file_schema, frames_file_schema, write_parquet

    for path, schema in ((frames_path, frames_file_schema()), (calls_path, calls_file_schema())):
        if not part_files(path, storage):
            write_parquet([], path, "part-empty.parquet", schema, storage=storage)  # nothing readable: the table exists, empty
        write_bytes(join(path, "_SUCCESS"), b"", storage)


def part_files(directory: str, storage: Storage = LOCAL) -> list[str]:
    """Every Parquet part file below ``directory`` (partition folders included; names
    starting with ``.`` or ``_`` left out, as Spark does)."""
    return [path for path, rel, _ in list_files(directory, storage, hidden_name) if rel.endswith(".parquet")]


def latency_values(spark, tally, calls_path: str, storage: Storage = LOCAL) -> dict:
    """The latencies the percentiles need (:meth:`Tally.latency_targets`), found by one
    pass over the ``calls`` parts in the executors."""
    from .summary import select_latencies

    targets = tally.latency_targets()
    if not targets:
        return {}
    wanted = {code: {b for _, b, _ in found} for code, found in targets.items()}
    out: dict = {}
    for part in map_files(spark, lambda files: select_latencies(files, wanted, storage), part_files(calls_path, storage)):
        for key, values in part.items():
            out.setdefault(key, []).extend(values)
    return out


def map_files(spark, fn, files: list) -> list:
    """``fn(share)`` for shares of ``files`` (Parquet parts, or items naming them) in the
    executors, about two tasks a slot; the results, collected."""
    if not files:
        return []
    sc = spark.sparkContext
    n = max(1, min(len(files), 2 * sc.defaultParallelism))
    return sc.parallelize(files, n).mapPartitions(lambda it: [fn(share)] if (share := list(it)) else []).collect()


def summarize(tally, selected: dict, inputs: Inputs, problems) -> dict:
    """The summary: the merged tally, the percentiles' values, the problems (a capture
    whose bytes do not add up is one more, of its own kind)."""
    from .summary import build_summary, bytes_by_capture

    problems = set(problems)
    for name, b in bytes_by_capture(tally, inputs.names).items():
        if b["unaccounted"]:
            problems.add(Problem("unaccounted", name, f"{name}: {b['unaccounted']} stream bytes unaccounted for (neither in a frame nor in a reported problem)"))
    problems = keep(problems)
    bad = {p.capture for p in problems if incomplete(p)}
    return build_summary(tally, selected, inputs.names, sorted(p.text for p in problems), sorted(bad))


@attrs.define(slots=True)
class Result:
    summary: dict
    frames_path: str
    calls_path: str
    #: seconds per phase: decode and pair (both tables written, tallies merged), percentiles
    timings: dict[str, float] = attrs.Factory(dict)


def analyze(
    spark,
    captures: Sequence[str] | Inputs,
    out: str,
    *,
    since_ns: int | None = None,
    until_ns: int | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    progress=None,
) -> Result:
    """Run the job: ``out/frames``, ``out/calls`` (Parquet) and the summary dict.
    ``captures``: paths, or the :class:`Inputs` already resolved from them."""
    from .summary import Tally

    inputs = captures if isinstance(captures, Inputs) else resolve_inputs(captures)
    storage = inputs.storage
    if is_local(out):
        out = os.path.abspath(local_path(out))
    make_dirs(out, storage)
    frames_path = join(out, "frames")
    calls_path = join(out, "calls")

    def phase(text: str) -> None:
        if progress is not None:
            progress.phase = text

    clock = time.monotonic
    t0 = clock()
    if not inputs.captures:
        write_empty_tables(frames_path, calls_path, storage)
        return Result(summarize(Tally(), {}, inputs, inputs.problems), frames_path, calls_path, {})
    sc = spark.sparkContext
    acc = problem_accumulator(sc)
    sc.setJobDescription("read, decode and pair")
    phase("reading, decoding and pairing")
    frames_acc = None
    if progress is not None:
        frames_acc = progress.frames = sc.accumulator(0)
    tally = decode_and_pair(spark, inputs, acc, frames_path, calls_path, split_bytes=split_bytes, since_ns=since_ns, until_ns=until_ns,
                            frames_acc=frames_acc)  # fmt: skip
    t1 = clock()
    phase("latency percentiles")
    sc.setJobDescription("latency percentiles")
    selected = latency_values(spark, tally, calls_path, storage)
    summary = summarize(tally, selected, inputs, set(inputs.problems) | set(acc.value))
    timings = {"decode and pair": t1 - t0, "percentiles": clock() - t1}
    return Result(summary, frames_path, calls_path, timings)
