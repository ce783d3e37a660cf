"""Problems met while reading captures, and the one exit-status rule.

A problem is ``(kind, capture, text)``: the codecs' :class:`CaptureProblem` kinds for
stream trouble (``gap``, ``partial-frame``, ``not-rocketmq``, ...) and the file-level
kinds of :mod:`.inputs` and the readers (``missing``, ``unreadable``, ``not-capture``,
``truncated-file``, ``bad-file``, ``bad-record``, ``raw``). A capture is *incomplete*
when a problem of an :data:`INCOMPLETE` kind names it: the same rule as ``trocket capture
show`` and ``stats`` (:data:`trocket.codecs.capture_files.INCOMPLETE_KINDS`), and
``analyze`` exits 1 when any capture is incomplete.

Problems travel in one Spark accumulator, bounded (:data:`MAX_PROBLEMS`; the ones that
make a capture incomplete are kept first, so the exit status never depends on the
bound), and a set: a retried task does not count one twice.
"""

from __future__ import annotations

from typing import NamedTuple

from trocket.codecs.capture_files import INCOMPLETE_KINDS

__all__ = ["Problem", "INCOMPLETE", "MAX_PROBLEMS", "incomplete", "problem_accumulator", "keep"]

#: at most this many problems are kept (a capture of garbage must not fill the driver)
MAX_PROBLEMS = 1000
INCOMPLETE = INCOMPLETE_KINDS | {"missing", "unreadable", "not-capture", "bad-record", "unaccounted"}


class Problem(NamedTuple):
    kind: str
    capture: str
    text: str


def incomplete(p: Problem) -> bool:
    return p.kind in INCOMPLETE


def keep(problems) -> frozenset:
    """At most :data:`MAX_PROBLEMS` of ``problems`` (about; one more per capture at
    worst): one that makes it incomplete for every capture that has one, then the rest
    in order, those that make a capture incomplete first."""
    problems = frozenset(problems)
    if len(problems) <= MAX_PROBLEMS:
        return problems
    ordered = sorted(problems, key=lambda p: (not incomplete(p), p))
    first: dict[str, Problem] = {}
    for p in ordered:
        if incomplete(p):
            first.setdefault(p.capture, p)
    return frozenset(first.values()) | frozenset(ordered[: max(0, MAX_PROBLEMS - len(first))])


def problem_accumulator(sc):
    """A Spark accumulator of problems (a bounded set)."""
    from pyspark.accumulators import AccumulatorParam

    class _SetParam(AccumulatorParam):
        def zero(self, value):
            return frozenset()

        def addInPlace(self, a, b):
            return keep(set(a) | set(b))

    return sc.accumulator(frozenset(), _SetParam())
