"""Small JSON texts compressed each on its own, with a zstd dictionary trained on the first ones.

Why: the columnar codec (``columnar._Codec``) keeps every object's last version (each Node, Pod,
Event) as its JSON compressed on its own, to patch the next version against; the flight recorder's
writer decompresses it, diffs, and compresses the new one at every Node status update (~217 a
second at 65,000 nodes), and a replay's index does the same when it reads them. Compressed alone, a
2.3 KB production-shaped Node took 7.6 us to compress and 3.7 us to decompress, and kept 847 bytes:
zstd starts each one with empty tables and nothing to refer back to. The objects of one cluster are
alike (the same keys, labels, condition texts, versions), so a dictionary trained on the first few
hundred of them gives each one what it has in common with the others: 2.3 us, 0.7 us and 74 bytes
the same Node (``bench/README.md``, session 47).

Only this process's memory holds these texts: nothing written to a file depends on the dictionary.
A text compressed before the dictionary existed stays readable (a decompressor with the dictionary
reads frames made without one); a dictionary that cannot be trained (samples too few or too alike
for zstd) leaves each text compressed alone, as before.
"""

from __future__ import annotations

import zstandard

TRAIN_AFTER = 512
"""Texts compressed alone before the dictionary is trained on them (a hub's first list, a segment's
keyframe: its first Nodes)."""
DICT_BYTES = 16 * 1024
LEVEL = 1


class TrainedCompressor:
    """``compress``/``decompress`` of small texts, with a dictionary from the first ``TRAIN_AFTER``
    texts given to ``compress``. Not thread-safe (its owner's lock covers it)."""

    def __init__(self, train_after: int = TRAIN_AFTER) -> None:
        self._zc = zstandard.ZstdCompressor(level=LEVEL)
        self._zd = zstandard.ZstdDecompressor()
        self._samples: list[bytes | bytearray | memoryview] | None = []
        self._train_after = train_after
        self.trained = False

    def compress(self, data: bytes) -> bytes:
        samples = self._samples
        if samples is not None:
            samples.append(data)
            if len(samples) >= self._train_after:
                self._train(samples)
        return self._zc.compress(data)

    def decompress(self, data: bytes) -> bytes:
        return self._zd.decompress(data)

    def _train(self, samples: list[bytes | bytearray | memoryview]) -> None:
        self._samples = None  # once, whatever comes of it
        try:
            d = zstandard.train_dictionary(DICT_BYTES, samples, level=LEVEL)
            d.precompute_compress(level=LEVEL)
        except zstandard.ZstdError:
            return  # (samples too few or too alike): each text compressed alone, as before
        self._zc = zstandard.ZstdCompressor(level=LEVEL, dict_data=d)
        self._zd = zstandard.ZstdDecompressor(dict_data=d)
        self.trained = True
