"""Content fingerprints: exact hash, 64-bit SimHash and LSH bands. Pure Python: no Spark, no I/O.

SimHash values are signed 64-bit ints so they fit Spark LongType; every function here masks to
64 bits, so signed and unsigned spellings of one fingerprint behave the same.
"""

from __future__ import annotations

import hashlib
import re

import mmh3
import numpy as np

_MASK64 = (1 << 64) - 1
_WORD = re.compile(r"\w+")
_SHINGLE_WORDS = 3


def content_hash(content: str | bytes) -> str:
    """Exact fingerprint: hex SHA-256 of the bytes (str is UTF-8 encoded). 64 hex chars.

    SHA-256 rather than a 128-bit mmh3 because equal hashes must mean equal content.
    """
    if isinstance(content, str):
        content = content.encode("utf-8", errors="surrogatepass")
    return hashlib.sha256(content).hexdigest()


def _to_signed64(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >> 63 else value


def simhash64(text: str) -> int:
    """64-bit SimHash of a text, as a signed int in [-2**63, 2**63) (0 for text with no words).

    Features are lowercased word 3-grams (words by the regex \\w+; a text of one or two words
    is one feature), each of weight 1, hashed with unsigned mmh3.hash64. Bit i is set when more
    than half of the features have bit i set, so texts sharing most shingles share most bits.
    """
    words = _WORD.findall(text.lower())
    if not words:
        return 0
    span = min(_SHINGLE_WORDS, len(words))
    hashes = [
        mmh3.hash64(" ".join(words[i : i + span]), seed=0, signed=False)[0]
        for i in range(len(words) - span + 1)
    ]
    half = len(hashes) / 2
    fingerprint = 0
    for bit, count in enumerate(_bit_counts(hashes)):
        if count > half:
            fingerprint |= 1 << bit
    return _to_signed64(fingerprint)


def _bit_counts(hashes: list[int]) -> list[int]:
    """How many of the hashes have each bit set, bit 0 first (numpy: a Python loop over 64
    bits per hash would dominate a page's extraction)."""
    as_bytes = np.array(hashes, dtype="<u8").view(np.uint8).reshape(-1, 8)
    return np.unpackbits(as_bytes, axis=1, bitorder="little").sum(axis=0).tolist()


def hamming64(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit ints, signed or unsigned (0..64)."""
    return ((a ^ b) & _MASK64).bit_count()


def lsh_bands(simhash: int, distance: int) -> list[tuple[int, int]]:
    """Split a 64-bit SimHash into `distance + 1` bands: [(band_index, band_value), ...].

    Pigeonhole: if two hashes differ in at most k bits, those k bits fall into at most k of
    the k + 1 bands, so at least one band is equal in both. Joining on (band_index, band_value)
    therefore finds every pair within Hamming distance k (then check `hamming64` <= k), without
    comparing all pairs. Bands are contiguous bit ranges from the low bits, widths differing by
    at most one; values are the band's bits as a non-negative int, except a single 64-bit band
    (distance 0), which is the signed hash itself, so every value fits Spark LongType.
    """
    if not 0 <= distance <= 63:
        raise ValueError(f"distance must be in 0..63, got {distance}")
    count = distance + 1
    width, extra = divmod(64, count)
    if count == 1:
        return [(0, _to_signed64(simhash))]
    value = simhash & _MASK64
    bands = []
    shift = 0
    for index in range(count):
        band_width = width + (1 if index < extra else 0)
        bands.append((index, value >> shift & ((1 << band_width) - 1)))
        shift += band_width
    return bands
