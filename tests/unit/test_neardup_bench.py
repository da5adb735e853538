"""benchmarks/neardup.py: its labelled sample is made as it says, and its judges judge."""

from __future__ import annotations

import numpy as np

from benchmarks import neardup


def test_the_sample_pairs_every_document_with_each_kind_of_copy():
    docs = neardup.documents(12, seed=3)
    assert len(docs) == 12
    assert all(neardup.MIN_CHARS <= sum(map(len, d)) and len(d) >= 3 for d in docs)
    sample = neardup.pairs(docs, seed=3)
    kinds = [p.kind for p in sample]
    assert kinds == list(neardup.NEAR + neardup.FAR) * 12
    assert all(p.a != p.b for p in sample)  # every copy differs from its document
    assert sum(p.near for p in sample) == len(neardup.NEAR) * 12


def test_minhash_estimates_jaccard_and_the_methods_split_near_from_far():
    x = neardup.shingles(" ".join(f"w{i}" for i in range(400)))
    y = neardup.shingles(" ".join(f"w{i}" for i in range(100, 500)))
    minhash = neardup.MinHash(seed=1)
    sx, sy = minhash.signature(x), minhash.signature(y)
    assert abs(float(np.mean(sx == sy)) - neardup.jaccard(x, y)) < 0.15  # 0.6 exactly
    figures = dict(neardup.measure(30, seed=2))
    lsh = figures[f"minhash 5-gram LSH {neardup.BANDS}x{neardup.ROWS}"]
    assert lsh["precision"] > 0.9 and lsh["boilerplate"] == 1.0 and lsh["distinct"] == 0.0
    assert all(f["distinct"] == 0.0 for f in figures.values())
