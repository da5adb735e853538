"""Word n-gram repetition of a text, as Gopher's repetition rule measures it. Pure Python and
NumPy: no I/O.

`top_ngram_chars` and `duplicate_ngram_chars` give what datatrove's GopherRepetitionFilter
computes (``find_top_duplicate`` over word n-grams joined by spaces, ``find_all_duplicate``
over n-grams joined without one), exactly, in about a tenth of the time of building every
n-gram as a string: n-grams are told apart by integers (a word sequence's ids; a
polynomial hash of an n-gram's characters), and strings are built only for the n-grams whose
hash repeats.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

import numpy as np

# Two prime moduli below 2**31 and their bases: the products below stay under 2**63.
_MODULI = (2_147_483_647, 2_147_483_629)
_BASES = (911_382_323, 972_663_749)


class Words:
    """A text's words, and what the n-gram measures share: each word's id (equal words, equal
    ids), and where each word starts and ends in the words joined without a space."""

    def __init__(self, words: Sequence[str]) -> None:
        self.words = list(words)
        vocabulary: dict[str, int] = {}
        self.ids = np.fromiter(
            map(vocabulary.setdefault, self.words, itertools.count()),
            dtype=np.int64,
            count=len(self.words),
        )
        lengths = np.fromiter(map(len, self.words), dtype=np.int64, count=len(self.words))
        self.lengths = lengths
        self.ends = np.cumsum(lengths)
        self.starts = self.ends - lengths
        self.joined = "".join(self.words)
        self._hashes: list[tuple[np.ndarray, np.ndarray]] | None = None

    def __len__(self) -> int:
        return len(self.words)

    def substring_keys(self, n: int) -> np.ndarray:
        """For each n-gram (words joined without a space), an integer that equal n-grams
        share (and different ones almost never do)."""
        if self._hashes is None:
            self._hashes = [
                _prefix_hashes(self.joined, m, b) for m, b in zip(_MODULI, _BASES, strict=True)
            ]
        first, last = self.starts[: len(self) - n + 1], self.ends[n - 1 :]
        keys = np.zeros(len(first), dtype=np.int64)
        for (prefix, inverse), modulus in zip(self._hashes, _MODULI, strict=True):
            part = (prefix[last] - prefix[first]) % modulus * inverse[first] % modulus
            keys = (keys << 31) | part
        return keys


def _prefix_hashes(text: str, modulus: int, base: int) -> tuple[np.ndarray, np.ndarray]:
    """(H, P) with H[k] = sum of code(text[i]) * base**i (i < k) and P[k] = base**-k, modulo
    ``modulus``: the hash of text[a:b] is (H[b] - H[a]) * P[a]."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    powers = _powers(base, len(codes) + 1, modulus)
    inverse = _powers(pow(base, modulus - 2, modulus), len(codes) + 1, modulus)
    prefix = np.zeros(len(codes) + 1, dtype=np.int64)
    # each term is below 2**31 (code * power, reduced): their sum fits 63 bits for any text
    # under 2**32 characters
    np.cumsum(codes * powers[:-1] % modulus, out=prefix[1:])
    return prefix % modulus, inverse


# (base, modulus) -> its powers computed so far: every text reuses them
_POWERS: dict[tuple[int, int], np.ndarray] = {}


def _powers(base: int, count: int, modulus: int) -> np.ndarray:
    """base**k modulo ``modulus``, k = 0 .. count-1 (by doubling: a few NumPy steps, once for
    the longest text so far)."""
    known = _POWERS.get((base, modulus))
    if known is not None and len(known) >= count:
        return known[:count]
    size = max(count, 2 * len(known) if known is not None else 4096)
    out = np.ones(size, dtype=np.int64)
    filled, step = 1, base % modulus
    while filled < size:
        upto = min(2 * filled, size)
        out[filled:upto] = out[: upto - filled] * step % modulus
        filled, step = upto, step * step % modulus
    _POWERS[(base, modulus)] = out
    return out[:count]


def top_ngram_chars(words: Words, n: int) -> int:
    """Characters of the most frequent n-gram (its words joined by spaces) times its count;
    ties go to the n-gram seen first; 0 without n-grams."""
    count = len(words) - n + 1
    if count <= 0:
        return 0
    if len(words) ** n >= 2**62:  # the ids would not pack into one integer: as strings
        grams = [" ".join(words.words[i : i + n]) for i in range(count)]
        ((gram, times),) = Counter(grams).most_common(1)
        return len(gram) * times
    keys = words.ids[:count].copy()
    for k in range(1, n):
        keys = keys * len(words) + words.ids[k : k + count]
    listed = keys.tolist()
    # Counter keeps first-seen order, and most_common the first of equal counts (datatrove's
    # own tie rule)
    ((key, times),) = Counter(listed).most_common(1)
    at = listed.index(key)
    return (int(words.ends[at + n - 1] - words.starts[at]) + n - 1) * times


def duplicate_ngram_chars(words: Words, n: int) -> int:
    """Characters of the n-grams (words joined without a space) that repeat an earlier one,
    the scan moving on past a repeat by n words; 0 without n-grams."""
    if len(words) < n:
        return 0
    keys = words.substring_keys(n)
    if len(set(keys.tolist())) == len(keys):  # no n-gram repeats: the common case
        return 0
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    # Only an n-gram whose key repeats can repeat; between them the scan moves one word at a
    # time past n-grams seen once.
    seen: set[str] = set()
    chars = at = 0
    joined, starts, ends = words.joined, words.starts, words.ends
    for i in np.flatnonzero(counts[inverse] > 1).tolist():
        if i < at:
            continue
        gram = joined[starts[i] : ends[i + n - 1]]
        if gram in seen:
            chars += len(gram)
            at = i + n
        else:
            seen.add(gram)
            at = i + 1
    return chars
