"""Pieces of connections -> streams: which (capture, connection id) pieces are one
connection captured in several files.

- pcap: decided where the bytes are (:func:`trocket.spark.pcap.reassemble_connection`):
  a file's piece carries on the previous file's connection only when its TCP bytes
  continue; its marker names the piece it carries on (``prev``).
- native: a record has no sequence numbers, but a recorder's connection id is unique
  within the recording process: pieces with one address pair and one connection id in
  captures that follow each other in time (the later file starts no earlier than the
  earlier one ends, :data:`STITCH_TOLERANCE_NS` allowed: a tap's rotated files) are one
  stream. Captures that overlap in time (two recordings of one period, or one file given
  twice) are never stitched: their pieces stay streams of their own.

A stream is named by its first piece: (capture, connection id).
"""

from __future__ import annotations

__all__ = ["Streams", "STITCH_TOLERANCE_NS"]

#: a native capture may start this much before the previous one ends and still carry
#: its connections on (records are stamped when read or written, not in file order)
STITCH_TOLERANCE_NS = 1_000_000_000


class Streams:
    """The pieces of one address pair, gathered from the markers, then resolved."""

    __slots__ = ("spans", "frames", "links", "_root")

    def __init__(self, spans: dict[str, tuple[int, int]] | None = None) -> None:
        self.spans = spans or {}  # native capture -> (first, last record time)
        self.frames: dict[tuple, list] = {}  # (capture, cid) -> [format, first ts, last ts, frames]
        self.links: dict[tuple, tuple | None] = {}  # pcap (capture, cid) -> the piece it carries on
        self._root: dict[tuple, tuple] | None = None

    def add(self, marker: tuple) -> None:
        if marker[0] == "frames":
            _, capture, cid, fmt, first, last, n = marker
            got = self.frames.get((capture, cid))
            if got is None:
                self.frames[(capture, cid)] = [fmt, first, last, n]
            else:
                got[1] = min(got[1], first)
                got[2] = max(got[2], last)
                got[3] += n
        else:  # ("piece", label, capture, cid, prev, first, last)
            self.links[(marker[2], marker[3])] = marker[4]
        self._root = None

    def stream_of(self, capture: str, cid: int) -> tuple:
        if self._root is None:
            self._root = self._resolve()
        return self._root.get((capture, cid), (capture, cid))

    def streams(self) -> dict[tuple, list[tuple]]:
        """stream -> its pieces (those with frames or a marker)."""
        out: dict[tuple, list[tuple]] = {}
        for piece in {*self.frames, *self.links}:
            out.setdefault(self.stream_of(*piece), []).append(piece)
        return out

    def _resolve(self) -> dict[tuple, tuple]:
        root: dict[tuple, tuple] = {}

        def find(p: tuple) -> tuple:
            seen = []
            while True:
                prev = self.links.get(p)
                if prev is None or prev == p or prev in seen:
                    break
                seen.append(p)
                p = prev
            return p

        for piece in self.links:
            root[piece] = find(piece)
        # native pieces: by connection id, in time order, chained across captures that follow each other
        chains: dict[int, list[list[tuple]]] = {}
        native = sorted(((v[1], k) for k, v in self.frames.items() if v[0] == "native"), key=lambda t: (t[0], t[1]))
        for first, piece in native:
            capture, cid = piece
            span = self.spans.get(capture)
            best = None
            for chain in chains.get(cid, []):
                last_capture = chain[-1][0]
                last_span = self.spans.get(last_capture)
                if last_capture == capture or span is None or last_span is None:
                    continue
                if span[0] >= last_span[1] - STITCH_TOLERANCE_NS and first >= self.frames[chain[-1]][2] - STITCH_TOLERANCE_NS:
                    if best is None or last_span[1] > self.spans[best[-1][0]][1]:
                        best = chain
            if best is None:
                chains.setdefault(cid, []).append([piece])
                root[piece] = piece
            else:
                root[piece] = best[0]
                best.append(piece)
        return root
