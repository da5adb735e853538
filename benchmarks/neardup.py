"""Near-duplicate precision and recall on a labelled sample: the crawl's SimHash against
MinHash over word 5-grams, as FineWeb deduplicates.

The sample (no network): human-written English prose that ships with Python (the reference
manual's topics, ``pydoc_data.topics``, and the standard library's longer module docstrings),
cut into documents of 1.5-5 KB at paragraph breaks. Each document is paired with copies made
the ways a web page is copied, labelled by how they were made:

- near duplicates (must be found): a changed dateline and footer (``boilerplate``), 1 % or 3 %
  of the words replaced, a comment appended (5 % of its length), a paragraph dropped (at most
  10 %), two paragraphs swapped;
- not duplicates (must not be found): another document (``distinct``), another document under
  the same opening third (``shared_intro``: a template's boilerplate), the first half of the
  document with another's second half (``half_shared``), 30 % of the words replaced
  (``rewrite``).

Judged per pair: SimHash (crawllib.content.hashing.simhash64, word 3-gram features) within
Hamming distance k, for k around ``parse.near_dup_distance``; MinHash of word 5-grams with
datatrove's default LSH (14 bands of 8 hashes: a pair is a candidate when a band agrees, about
Jaccard 0.75 and up); and the exact word 5-gram Jaccard at 0.75, for reference. Prints
precision, recall and F1 per method, and the share of each kind of pair found.

    python -m benchmarks.neardup [--docs 400] [--seed 1]
"""

from __future__ import annotations

import argparse
import inspect
import pkgutil
import random
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import mmh3
import numpy as np

from crawllib.config import load_config
from crawllib.content.hashing import hamming64, simhash64

MIN_CHARS, MAX_CHARS = 1500, 5000
SHINGLE = 5  # words per MinHash shingle (FineWeb)
BANDS, ROWS = 14, 8  # datatrove's MinhashConfig defaults
_PRIME = (1 << 61) - 1
_WORD = re.compile(r"\w+")

NEAR = ("boilerplate", "words_1pct", "words_3pct", "comment", "paragraph_dropped", "swapped")
FAR = ("distinct", "shared_intro", "half_shared", "rewrite")


@dataclass(frozen=True)
class Pair:
    kind: str
    a: str
    b: str

    @property
    def near(self) -> bool:
        return self.kind in NEAR


def documents(limit: int, seed: int) -> list[list[str]]:
    """Up to ``limit`` documents, each a list of paragraphs, from the prose Python ships."""
    import pydoc_data.topics

    sources = list(pydoc_data.topics.topics.values())
    for info in pkgutil.iter_modules([p for p in sys.path if p.endswith("lib/python3.11")]):
        if info.name.startswith("_") or info.name in {"antigravity", "this"}:
            continue
        try:
            module = __import__(info.name)
        except Exception:  # noqa: BLE001 - a module that does not import here is no source
            continue
        doc = inspect.getdoc(module) or ""
        if len(doc) >= MIN_CHARS:
            sources.append(doc)
    docs: list[list[str]] = []
    for source in sources:
        paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", source)]
        paragraphs = [p for p in paragraphs if len(_WORD.findall(p)) >= 8]
        chunk: list[str] = []
        for paragraph in paragraphs:
            chunk.append(paragraph)
            if sum(map(len, chunk)) >= MAX_CHARS * 0.6:
                docs.append(chunk)
                chunk = []
        if sum(map(len, chunk)) >= MIN_CHARS and len(chunk) >= 3:
            docs.append(chunk)
    docs = [d for d in docs if len(d) >= 3 and MIN_CHARS <= sum(map(len, d)) <= MAX_CHARS * 2]
    random.Random(seed).shuffle(docs)
    return docs[:limit]


def pairs(docs: list[list[str]], seed: int) -> list[Pair]:
    """Each document with a copy of each kind (module docstring)."""
    rng = random.Random(seed)
    vocabulary = sorted({w for d in docs for p in d for w in p.split()})

    def text(paragraphs: list[str]) -> str:
        return "\n".join(paragraphs)

    def replaced(paragraphs: list[str], share: float) -> list[str]:
        out = []
        for paragraph in paragraphs:
            words = paragraph.split()
            for i in range(len(words)):
                if rng.random() < share:
                    words[i] = rng.choice(vocabulary)
            out.append(" ".join(words))
        return out

    def other(i: int) -> list[str]:
        return docs[(i + 1 + rng.randrange(len(docs) - 1)) % len(docs)]

    made: list[Pair] = []
    for i, doc in enumerate(docs):
        a = text(doc)
        words = sum(len(p.split()) for p in doc)
        dateline = f"Updated {rng.randint(1, 28)} May 2026 by {rng.choice(vocabulary)}"
        footer = "Share this page. Read more. All rights reserved."
        comment = " ".join(rng.choice(vocabulary) for _ in range(max(5, words // 20)))
        droppable = [j for j, p in enumerate(doc) if len(p.split()) <= words * 0.10]
        dropped = doc[:]
        if droppable:
            del dropped[rng.choice(droppable)]
        swap = rng.randrange(len(doc) - 1)
        swapped = doc[:swap] + [doc[swap + 1], doc[swap]] + doc[swap + 2 :]
        near = {
            "boilerplate": [dateline, *doc, footer],
            "words_1pct": replaced(doc, 0.01),
            "words_3pct": replaced(doc, 0.03),
            "comment": [*doc, comment],
            "paragraph_dropped": dropped,
            "swapped": swapped,
        }
        b, c = other(i), other(i)
        third, half = max(1, len(c) // 3), len(doc) // 2
        far = {
            "distinct": (a, text(b)),
            "shared_intro": (text(c[:third] + doc[third:]), text(c[:third] + b[third:])),
            "half_shared": (a, text(doc[:half] + b[len(b) // 2 :])),
            "rewrite": (a, text(replaced(doc, 0.30))),
        }
        made += [Pair(kind, a, text(copy)) for kind, copy in near.items()]
        made += [Pair(kind, x, y) for kind, (x, y) in far.items()]
    return made


def shingles(text: str) -> np.ndarray:
    """The distinct word 5-grams of a text, hashed to 32 bits (as datasketch does)."""
    words = _WORD.findall(text.lower())
    grams = {" ".join(words[i : i + SHINGLE]) for i in range(max(1, len(words) - SHINGLE + 1))}
    return np.array(sorted({mmh3.hash(g, signed=False) for g in grams}), dtype=np.uint64)


class MinHash:
    """BANDS x ROWS MinHash values per text: (a * x + b) mod 2^61-1 over its shingles, in
    64-bit arithmetic (datasketch's permutations)."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, _PRIME, BANDS * ROWS, dtype=np.uint64)[:, None]
        self.b = rng.integers(0, _PRIME, BANDS * ROWS, dtype=np.uint64)[:, None]

    def signature(self, hashed: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            values = (self.a * hashed[None, :] + self.b) % np.uint64(_PRIME)
        return values.min(axis=1)

    @staticmethod
    def candidates(x: np.ndarray, y: np.ndarray) -> bool:
        return bool((x.reshape(BANDS, ROWS) == y.reshape(BANDS, ROWS)).all(axis=1).any())


def jaccard(x: np.ndarray, y: np.ndarray) -> float:
    union = np.union1d(x, y).size
    return np.intersect1d(x, y).size / union if union else 1.0


def judges(seed: int) -> dict[str, Callable[[Pair], bool]]:
    k = load_config().parse.near_dup_distance
    minhash = MinHash(seed)
    cache: dict[str, tuple[int, np.ndarray, np.ndarray]] = {}

    def of(text: str) -> tuple[int, np.ndarray, np.ndarray]:
        if text not in cache:
            hashed = shingles(text)
            cache[text] = (simhash64(text), hashed, minhash.signature(hashed))
        return cache[text]

    def simhash_within(distance: int) -> Callable[[Pair], bool]:
        return lambda p: hamming64(of(p.a)[0], of(p.b)[0]) <= distance

    distances = sorted({3, k, 6, 8})
    out = {
        f"simhash k={d}" + (" (default)" if d == k else ""): simhash_within(d) for d in distances
    }
    out[f"minhash 5-gram LSH {BANDS}x{ROWS}"] = lambda p: MinHash.candidates(of(p.a)[2], of(p.b)[2])
    out["jaccard 5-gram >= 0.75 (exact)"] = lambda p: jaccard(of(p.a)[1], of(p.b)[1]) >= 0.75
    return out


def measure(docs: int, seed: int) -> Iterator[tuple[str, dict[str, float]]]:
    """(method, figures): precision, recall, f1 and the share found of each kind of pair."""
    sample = pairs(documents(docs, seed), seed)
    for name, judge in judges(seed).items():
        found: dict[str, list[bool]] = defaultdict(list)
        for pair in sample:
            found[pair.kind].append(judge(pair))
        tp = sum(sum(found[k]) for k in NEAR)
        fp = sum(sum(found[k]) for k in FAR)
        fn = sum(len(found[k]) - sum(found[k]) for k in NEAR)
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        shares = {k: sum(v) / len(v) for k, v in found.items()}
        yield name, {"precision": precision, "recall": recall, "f1": f1, **shares}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    base = documents(args.docs, args.seed)
    print(
        f"{len(base)} documents ({sum(sum(map(len, d)) for d in base) // len(base)} chars on "
        f"average), {len(base) * len(NEAR)} near pairs, {len(base) * len(FAR)} other pairs"
    )
    print("method | precision | recall | F1 | " + " | ".join(NEAR + FAR))
    for name, figures in measure(args.docs, args.seed):
        cells = [f"{figures[k]:.3f}" for k in ("precision", "recall", "f1", *NEAR, *FAR)]
        print(f"{name} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
