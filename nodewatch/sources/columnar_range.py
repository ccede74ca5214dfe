"""The renewal rows of a one-shot answer's read, a whole block at a time (``columnar.Supersession``).

Why: at 65,000 nodes a 15-minute segment holds ~5.8 million renewal rows, and ``Supersession.block``
decides each one in Python (its Lease's deltas, the renewal of the same Lease it supersedes): ~4 us
a row, most of a seek. Of each Lease, a one-shot answer keeps only the last renewal before the next
one it reads; every renewal in between is left out anyway. Here a run of blocks in which that is
provably what ``Supersession.block`` would decide row by row is read with C-level tools over whole
columns (``itertools.accumulate`` for the receive times and the resourceVersions, ``map`` for each
Lease's offset and renewTime, ``dict.update(zip(...))`` keeping the last row of each Lease), and
each Lease's last row becomes a renewal row of ``Supersession`` only where the run ends.

A block is read so (``block``) only when every row of it would be left out or kept exactly as the
row-by-row loop does: nothing of the next lines hidden; every Lease of the dictionary droppable, of
one cluster whose lease list is in, with a resourceVersion and one ``managedFields`` time (their
columns then have a value a row); each Lease at most once in the block, with a renewTime later than
any seen of it (so it supersedes the last one waiting) and a receive time after its last line's
(``Supersession._in_order`` has nothing to say); every row at or before the target, nothing read
so far or in the block after the end of the read, every row not before the recording's floor and
after the lease list; and no whole line of a Lease (which changes the
dictionary). Any other block ends the run (the Leases' last rows and the whole lines in between go
to ``Supersession``'s queue, in the order they were read) and is read row by row.
"""

from __future__ import annotations

import math
import re
from collections import deque
from itertools import accumulate, compress, islice, repeat
from operator import add, ge, gt, not_
from typing import Any, Callable, Iterator

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


def _consume(it: Iterator[object]) -> None:
    """Run ``it`` to its end in C (``map`` of a list's ``__setitem__``: a scatter with no Python loop)."""
    deque(it, maxlen=0)


class FastRange:
    """A run of blocks read a block at a time, for one ``Supersession`` (``s``)."""

    def __init__(self, s: Any, c: Any, cluster: Any, whole_row: Callable, time_of: Callable[[int, int], float]) -> None:
        """``whole_row``, ``time_of``: ``columnar``'s (a row kept as a whole line; a receive time's float)."""
        self.whole_row = whole_row
        self.time_of = time_of
        self.s = s
        self.c = c
        self.cluster = cluster
        never = -(1 << 62)
        newest = s._newest
        # by the Lease's index in the dictionary (lists: a dict of 65,000 integers is several times slower)
        self.off: list[Any] = [None if t is None else t.offset for t in c.by_index]
        """Each Lease's offset (None: not in the dictionary any more)."""
        self.renew = [never if t is None else newest.get(t.name, never) for t in c.by_index]
        """Each Lease's latest renewTime seen (us)."""
        self.carry = {p[_TPL].index: p for p in s._pending.values()}
        """Renewals waiting from before the run: the first row of their Lease in it leaves them out."""
        s._pending.clear()
        size = len(c.by_index)
        self.last: list[tuple[int, int, int, int, int] | None] = [None] * size
        """Each Lease's last row in the run (None: none): its number in the run, its receive time (us),
        its residual, its resourceVersion, its managedFields second minus renewTime's (its renewTime
        is ``renew``)."""
        last = s._last
        self.after = [never if t is None or t.name not in last else math.ceil(last[t.name] * 1_000_000) + MARGIN_US
                      for t in c.by_index]
        """The least receive time (us) of each Lease's next row that is surely not before its last line
        (``Supersession._in_order`` would find nothing to say)."""
        self.whole: list[tuple[int, bytes]] = []
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

    def block(self, cols: tuple, blobs: list) -> bool:
        """Read one block (its columns, its whole lines decoded) into the run; False (nothing changed)
        when it is not one the run may read."""
        s, c = self.s, self.c
        _time_of, _whole_row = self.time_of, self.whole_row
        n, kinds, rx, res, idx, off, rvs, mfs, _ = cols
        n_lease = len(idx)
        if s.hidden or len(rvs) != n_lease or len(mfs) != n_lease or len(set(idx)) != n_lease:
            return False
        for b in blobs:  # a whole line of a Lease changes the dictionary: row by row
            payload = b[0] if type(b) is list else b
            if type(payload) is not dict or payload.get("resource") == "leases" or "t" in payload:
                return False
        by_index = c.by_index
        renew_of = self.renew
        try:
            offs = list(map(add, map(self.off.__getitem__, idx), off))
            before = list(map(renew_of.__getitem__, idx))
        except (IndexError, TypeError):  # a row of a Lease not in the dictionary: the row loop says so
            return False
        ts_all = list(accumulate(rx, initial=c.last_us))
        if n_lease == n:
            ts = ts_all[1:]
            res_l = res
        else:
            lease_rows = list(map(not_, kinds))
            ts = list(compress(ts_all[1:], lease_rows))
            res_l = list(compress(res, lease_rows))
        renews = list(map(add, ts, offs))
        if n_lease and not all(map(gt, renews, before)):
            return False
        if n:
            lo = min(ts_all[1:])
            hi_us = max(ts_all[1:])
            # a row's time is its microseconds give or take ``res`` units of the last place: compared
            # with a margin that covers them
            e = 1 + math.ceil(max(max(res), -min(res)) * math.ulp(hi_us / 1_000_000) * 1_000_000)
            if (e > MARGIN_US or (n_lease and not all(map(ge, ts, map(self.after.__getitem__, idx))))
                    or (hi_us + e) / 1_000_000 > min(s.target, s.read_until) or s._hi > s.read_until
                    or (lo - e) / 1_000_000 < s._floor or s._synced[self.cluster] > (lo - e) / 1_000_000):
                return False
        # the block is the run's: whole lines decoded in their order, the Leases' last rows kept
        g = self.row
        it = iter(blobs)
        for m in _WHOLE.finditer(kinds):
            k = m.start()
            t_us = ts_all[k + 1]
            data, tt, line = _whole_row(kinds[k], next(it), c, _time_of(t_us, res[k]), t_us)
            s._line(data, tt, line)
            self.whole.append((g + k, data))
            self.buffered += len(data)
        if n_lease:
            carry = self.carry
            dropped = 0
            if carry:
                for i in idx:
                    p = carry.pop(i, None)
                    if p is not None and not p[_FINAL]:  # (one kept for its age is not left out any more)
                        p[_FINAL] = p[_DROP] = True
                        dropped += 1
                        s._dropped_names.add(by_index[i].name)
            last_of = self.last
            dropped += n_lease - list(map(last_of.__getitem__, idx)).count(None)  # a row of the run before
            s.dropped += dropped
            rv_abs = list(accumulate(rvs, initial=c.rv.get(self.cluster, 0)))
            c.rv[self.cluster] = rv_abs[-1]
            rows = range(g, g + n) if n_lease == n else compress(range(g, g + n), lease_rows)
            # each Lease is at most once in the block: scattered by index, a C-level call a value
            _consume(map(last_of.__setitem__, idx, zip(rows, ts, res_l, islice(rv_abs, 1, None), mfs)))
            _consume(map(self.after.__setitem__, idx, map(add, ts, repeat(2 * MARGIN_US))))
            _consume(map(self.off.__setitem__, idx, offs))
            _consume(map(renew_of.__setitem__, idx, renews))
            k = ts.index(max(ts))
            s._hi = max(s._hi, _time_of(ts[k], res_l[k]))
        if n:
            c.last_us = ts_all[-1]
        self.row = g + n
        self.blocks += 1
        return True

    def end(self) -> None:
        """The run ends: each Lease's last row waits as a ``Supersession`` renewal (a later row of it may
        leave it out), after the whole lines read before it and before those after."""
        s, c = self.s, self.c
        _time_of = self.time_of
        by_index = c.by_index
        for tpl, o in zip(by_index, self.off):
            if tpl is not None:
                tpl.offset = o
        rows = []
        newest, last = s._newest, s._last
        for i, kept in enumerate(self.last):
            if kept is None:
                continue
            pos, t_us, res, rv, mf = kept
            tpl = by_index[i]
            renew = self.renew[i]
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
