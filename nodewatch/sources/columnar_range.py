"""The renewal rows of a one-shot answer's read, a whole block at a time (``columnar.Supersession``).

Why: at 65,000 nodes a 15-minute segment holds ~5.8 million renewal rows, and ``Supersession.block``
decides each one in Python (its Lease's deltas, the renewal of the same Lease it supersedes): ~4 us
a row, most of a seek. Of each Lease, a one-shot answer keeps only the last renewal before the next
one it reads; every renewal in between is left out anyway. Here a run of blocks in which that is
provably what ``Supersession.block`` would decide row by row is read with numpy over whole columns
(the columns unpacked as arrays, the receive times and the resourceVersions as cumulative sums, each
Lease's offset and renewTime gathered by index, each Lease's last row scattered into per-Lease
arrays), and each Lease's last row becomes a renewal row of ``Supersession`` only where the run
ends. Until session 36 the same passes ran as C-level ``map``s over lists (~1.7 us a row: half of a
seek late in a 65,000-node segment).

A block is read so (``block``) only when every row of it would be left out or kept exactly as the
row-by-row loop does: nothing of the next lines hidden; every Lease of the dictionary droppable, of
one cluster whose lease list is in, with a resourceVersion and one ``managedFields`` time (their
columns then have a value a row); each Lease at most once in the block, with a renewTime later than
any seen of it (so it supersedes the last one waiting) and a receive time after its last line's
(``Supersession._in_order`` has nothing to say); every row at or before the target, nothing read
so far or in the block after the end of the read, every row not before the recording's floor and
after the lease list; no whole line of a Lease (which changes the dictionary); and every value
small enough that 64-bit arithmetic is exact (``SAFE``: the row-by-row loop's Python integers have
no bound, so a damaged column with huge values is read there). Any other block ends the run (the
Leases' last rows and the whole lines in between go to ``Supersession``'s queue, in the order they
were read) and is read row by row.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Callable

from .columnar_whole import Plain, Raw, decoded, plain

if TYPE_CHECKING:
    import numpy as np
# numpy is imported where a run uses it, not with this module: every reader of a recording imports
# ``columnar`` (to tell the formats apart), and numpy's import (0.1-0.2 s) would be paid by a replay of
# JSON Lines too.

_WHOLE = re.compile(b"[^\x00]")
"""A row that is not a Lease renewal (``columnar._ROW_LEASE`` is 0)."""
_TPL, _FINAL, _DROP = 1, 5, 6
"""Fields of a ``Supersession`` renewal (``columnar._TPL``...; a renewal is a list there)."""
SHORT_RUN = 16
MAX_WAIT = 256
"""A run of fewer blocks is short: the next is tried only after waiting (``Supersession.end_run``)."""
MARGIN_US = 8
"""A row's time is its microseconds give or take its residual's units of the last place: less than
this many microseconds (a block whose residuals are larger is read row by row)."""
MAX_BUFFERED = 256 * 1024 * 1024
"""Bytes of whole lines a run holds back (they wait for the Leases' last rows read before them)."""
WAITING_BYTES = 512
"""What a status report held back unbuilt counts for (``columnar_reports.Report``: its split text
shares the Node's)."""
SAFE = 1 << 61
"""Every value a run keeps is within +-SAFE, every delta it reads within +-DELTA: a sum of two kept
values, or a kept value and a block's deltas (a block has fewer than 2**28 rows), stays inside int64."""
DELTA = 1 << 32
NEVER = -SAFE
"""No renewTime seen (below any renewTime a run reads)."""


def unpack(data: Any, n: int) -> np.ndarray | None:
    """``columnar._pack``'s values as an int64 array (None: not ``n`` values long): the byte planes
    transposed back into little-endian 64-bit lanes, then un-zigzagged (``(z >> 1) ^ -(z & 1)``)."""
    import numpy as np

    if len(data) != 8 * n:
        return None
    z = np.ascontiguousarray(np.frombuffer(data, np.uint8).reshape(8, n).T).view("<u8").ravel()
    return ((z >> np.uint64(1)) ^ (np.uint64(0) - (z & np.uint64(1)))).view(np.int64)


def _bounded(a: np.ndarray, bound: int) -> bool:
    return not a.size or (int(a.max()) <= bound and int(a.min()) >= -bound)


class FastRange:
    """A run of blocks read a block at a time, for one ``Supersession`` (``s``)."""

    def __init__(self, s: Any, c: Any, cluster: Any, whole_row: Callable, time_of: Callable[[int, int], float]) -> None:
        """``whole_row``: ``s.whole`` (a whole row read, what the queue keeps of it); ``time_of``:
        ``columnar._time_of`` (a receive time's float)."""
        import numpy as np

        self.whole_row = whole_row
        self.time_of = time_of
        self.s = s
        self.c = c
        self.cluster = cluster
        newest = s._newest
        by_index = c.by_index
        # by the Lease's index in the dictionary
        self.live = np.fromiter((t is not None for t in by_index), bool, len(by_index))
        """Whether the Lease is still in the dictionary."""
        self.off = np.array([0 if t is None else t.offset for t in by_index], dtype=object)
        """Each Lease's offset."""
        self.renew = np.array([NEVER if t is None else newest.get(t.name, NEVER) for t in by_index], dtype=object)
        """Each Lease's latest renewTime seen (us)."""
        last = s._last
        self.after = np.array([NEVER if t is None or t.name not in last else
                               math.ceil(last[t.name] * 1_000_000) + MARGIN_US for t in by_index], dtype=object)
        """The least receive time (us) of each Lease's next row that is surely not before its last line
        (``Supersession._in_order`` would find nothing to say)."""
        self.ok = all(_bounded(a, SAFE) for a in (self.off, self.renew, self.after)) and abs(c.last_us) <= SAFE
        """False: a value too large for int64 arithmetic (the run reads nothing)."""
        if self.ok:
            self.off, self.renew, self.after = (a.astype(np.int64) for a in (self.off, self.renew, self.after))
        self.carry = {p[_TPL].index: p for p in s._pending.values()}
        """Renewals waiting from before the run: the first row of their Lease in it leaves them out."""
        s._pending.clear()
        size = len(by_index)
        self.pos = np.full(size, -1, np.int64)
        """Each Lease's last row in the run: its number in the run (-1: none), its receive time (us),
        its residual, its resourceVersion, its managedFields second minus renewTime's (its renewTime
        is ``renew``)."""
        self.t_us = np.zeros(size, np.int64)
        self.res = np.zeros(size, np.int64)
        self.rv = np.zeros(size, np.int64)
        self.mf = np.zeros(size, np.int64)
        self.stamp = np.zeros(size, np.int64)
        """Scratch: each Lease's row in the block, to find a Lease twice in one block."""
        self.whole: list[tuple[int, Any]] = []
        self.buffered = 0
        self.row = 0
        self.blocks = 0

    @staticmethod
    def fits(s: Any, c: Any) -> tuple[bool, Any]:
        """(whether a run may start, the one cluster of the dictionary's Leases): every Lease droppable,
        with a resourceVersion and one ``managedFields`` time, of one cluster whose lease list is in,
        no two of one name (``Supersession`` knows a Lease by its name)."""
        clusters = set()
        names = set()
        live = 0
        for t in c.by_index:
            if t is None:
                continue
            if not (t.droppable and t.has_rv and t.n_mf == 1):
                return False, None
            clusters.add(t.cluster)
            names.add(t.name)
            live += 1
        if len(clusters) != 1 or len(names) != live:
            return False, None
        (cluster,) = clusters
        return cluster in s._synced, cluster

    @staticmethod
    def may_read(s: Any, c: Any, parts: tuple) -> bool:
        """What a run asks of a block before reading its columns (a run is not even started for a block
        that fails it: starting one costs a pass over the dictionary): nothing of the next lines
        hidden, a resourceVersion and a ``managedFields`` time a renewal row, no whole line of a Lease
        (it changes the dictionary) or with a time of its own, and the block not after the read's end
        from its first row (the block before it ended at or before it)."""
        n, kinds, cols, n_lease, n_rv, n_mf, blobs = parts
        if s.hidden or n_rv != n_lease or n_mf != n_lease or c.last_us / 1_000_000 > min(s.target, s.read_until):
            return False
        for i, b in enumerate(blobs):
            if type(b) is Raw:  # looked at once, kept so for the row's read (``columnar._whole_row``)
                p = plain(b)
                b = blobs[i] = p if p is not None else decoded(b)
            if type(b) is Plain:  # a plain line, without a time of its own
                if b.envelope.resource == "leases":
                    return False
                continue
            payload = b[0] if type(b) is list else b
            if type(payload) is not dict or payload.get("resource") == "leases" or "t" in payload:
                return False
        return True

    def block(self, parts: tuple) -> bool:
        """Read one block (``columnar._split``'s parts) into the run; False (nothing changed) when it
        is not one the run may read."""
        import numpy as np

        s, c = self.s, self.c
        n, kinds, cols, n_lease, n_rv, n_mf, blobs = parts
        if not self.ok or not self.may_read(s, c, parts):
            return False
        rx, res, idx, off, rvs, mfs = (unpack(cols[1], n), unpack(cols[2], n), unpack(cols[3], n_lease),
                                       unpack(cols[4], n_lease), unpack(cols[5], n_rv), unpack(cols[6], n_mf))
        if rx is None or res is None or idx is None or off is None or rvs is None or mfs is None:
            return False  # (the row loop says what is wrong)
        if not all(_bounded(a, DELTA) for a in (rx, res, off, rvs, mfs)):
            return False
        size = self.pos.size
        if n_lease:
            if int(idx.min()) < 0 or int(idx.max()) >= size or not self.live[idx].all():
                return False  # a row of a Lease not in the dictionary: the row loop says so
            rows_in = np.arange(n_lease)
            self.stamp[idx] = rows_in
            if not (self.stamp[idx] == rows_in).all():  # a Lease twice in the block
                return False
        offs = self.off[idx] + off
        ts_all = np.cumsum(rx) + c.last_us
        if n_lease == n:
            lease_rows = None
            ts, res_l = ts_all, res
        else:
            lease_rows = np.frombuffer(kinds, np.uint8) == 0
            ts, res_l = ts_all[lease_rows], res[lease_rows]
        renews = ts + offs
        if n_lease and not (renews > self.renew[idx]).all():
            return False
        if n:
            lo = int(ts_all.min())
            hi_us = int(ts_all.max())
            # a row's time is its microseconds give or take ``res`` units of the last place: compared
            # with a margin that covers them
            e = 1 + math.ceil(int(np.abs(res).max()) * math.ulp(hi_us / 1_000_000) * 1_000_000)
            if (e > MARGIN_US or (n_lease and not (ts >= self.after[idx]).all())
                    or (hi_us + e) / 1_000_000 > min(s.target, s.read_until) or s._hi > s.read_until
                    or (lo - e) / 1_000_000 < s._floor or s._synced[self.cluster] > (lo - e) / 1_000_000):
                return False
        if n_lease:
            rv_abs = np.cumsum(rvs) + c.rv.get(self.cluster, 0)
            if not all(_bounded(a, SAFE) for a in (offs, renews, rv_abs, ts_all)):
                return False
        # the block is the run's: whole lines decoded in their order, the Leases' last rows kept
        g = self.row
        if len(blobs):
            _time_of, _whole_row = self.time_of, self.whole_row
            ts_l, res_all = ts_all.tolist(), res.tolist()
            it = iter(blobs)
            for m in _WHOLE.finditer(kinds):
                k = m.start()
                t_us = ts_l[k]
                item = _whole_row(kinds[k], next(it), c, _time_of(t_us, res_all[k]), t_us)
                self.whole.append((g + k, item))
                self.buffered += len(item) if type(item) is bytes else WAITING_BYTES
        if n_lease:
            carry = self.carry
            dropped = 0
            if carry:
                by_index = c.by_index
                for i in idx.tolist():
                    p = carry.pop(i, None)
                    if p is not None and not p[_FINAL]:  # (one kept for its age is not left out any more)
                        p[_FINAL] = p[_DROP] = True
                        dropped += 1
                        s._dropped_names.add(by_index[i].name)
            dropped += int(np.count_nonzero(self.pos[idx] >= 0))  # a row of the run before
            s.dropped += dropped
            c.rv[self.cluster] = int(rv_abs[-1])
            rows = g + (rows_in if lease_rows is None else np.flatnonzero(lease_rows))
            # each Lease is at most once in the block: scattered by index
            self.pos[idx] = rows
            self.t_us[idx] = ts
            self.res[idx] = res_l
            self.rv[idx] = rv_abs
            self.mf[idx] = mfs
            self.after[idx] = ts + 2 * MARGIN_US
            self.off[idx] = offs
            self.renew[idx] = renews
            k = int(np.argmax(ts))
            s._hi = max(s._hi, self.time_of(int(ts[k]), int(res_l[k])))
        if n:
            c.last_us = int(ts_all[-1])
        self.row = g + n
        self.blocks += 1
        return True

    def end(self) -> None:
        """The run ends: each Lease's last row waits as a ``Supersession`` renewal (a later row of it may
        leave it out), after the whole lines read before it and before those after."""
        import numpy as np

        s, c = self.s, self.c
        _time_of = self.time_of
        by_index = c.by_index
        if self.ok:
            for tpl, o in zip(by_index, self.off.tolist()):
                if tpl is not None:
                    tpl.offset = o
        rows = []
        newest, last = s._newest, s._last
        kept = np.flatnonzero(self.pos >= 0)
        for i, pos, t_us, res, rv, mf, renew in zip(kept.tolist(), self.pos[kept].tolist(), self.t_us[kept].tolist(),
                                                    self.res[kept].tolist(), self.rv[kept].tolist(),
                                                    self.mf[kept].tolist(), self.renew[kept].tolist()):
            tpl = by_index[i]
            t = _time_of(t_us, res)
            r = [t, tpl, renew, rv, [renew // 1_000_000 + mf], False, False]
            rows.append((pos, r))
            newest[tpl.name] = renew
            last[tpl.name] = t
            s._dropped_names.add(tpl.name)  # (its earlier rows were left out, or may be: unsure if it steps back)
            s._pending[tpl.key] = r
        for p in self.carry.values():
            if not p[_FINAL]:
                s._pending[p[_TPL].key] = p
        rows.sort(key=_first)
        whole = self.whole
        out = s.queue.append
        w = 0
        for pos, r in rows:
            while w < len(whole) and whole[w][0] < pos:
                out(whole[w][1])
                w += 1
            out(r)
        for _, data in whole[w:]:
            out(data)


def _first(x: tuple) -> int:
    return x[0]
