"""Objects' last versions compressed with a dictionary trained on the first ones (``trained_zstd``):
every text comes back exactly, before and after the dictionary, and with none when zstd cannot train
one; the columnar codec keeps its objects so."""

from __future__ import annotations

import orjson
import pytest
import zstandard

from nodewatch.sources import trained_zstd
from nodewatch.sources.columnar import _Codec
from nodewatch.sources.recording import sanitize
from nodewatch.sources.trained_zstd import TrainedCompressor
from tests.support.factories import T0, node


def _texts(n: int) -> list[bytes]:
    return [orjson.dumps(sanitize(node(f"ip-10-0-{i // 250}-{i % 250}.ec2.internal", zone=f"eu-west-1{'abc'[i % 3]}",
                                       heartbeat=T0 + i), "nodes")) for i in range(n)]


def test_every_text_comes_back_and_those_after_the_dictionary_are_smaller():
    texts = _texts(900)
    z = TrainedCompressor(train_after=300)
    packed = [z.compress(t) for t in texts]
    assert z.trained
    assert [z.decompress(p) for p in packed] == texts  # those compressed alone, before it, too
    alone = sum(len(zstandard.ZstdCompressor(level=1).compress(t)) for t in texts[300:])
    assert sum(map(len, packed[300:])) * 3 < alone


def test_without_a_dictionary_each_text_is_compressed_alone(monkeypatch):
    def fails(*args, **kwargs):
        raise zstandard.ZstdError("cannot train")

    monkeypatch.setattr(trained_zstd.zstandard, "train_dictionary", fails)
    texts = _texts(40)
    z = TrainedCompressor(train_after=10)
    packed = [z.compress(t) for t in texts]
    assert not z.trained
    assert [z.decompress(p) for p in packed] == texts


@pytest.mark.parametrize("n", [10, 700])
def test_the_codec_gives_back_each_objects_last_version(n):
    c = _Codec()
    objs = {}
    for rnd in range(2):
        for i in range(n):
            obj = sanitize(node(f"n{i}", heartbeat=T0 + rnd * 300 + i), "nodes")
            c.learn_line({"t": T0, "resource": "nodes", "type": "MODIFIED", "object": obj}, 0)
            objs[(None, "nodes", None, f"n{i}")] = obj
    assert c._z.trained is (2 * n >= trained_zstd.TRAIN_AFTER)
    for key, obj in objs.items():
        assert c.json_of(key) == orjson.dumps(obj)
        assert c.previous(key) == obj
