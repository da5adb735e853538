"""Unit tests of crawllib.content.hashing: exact hash, SimHash, Hamming distance, LSH bands."""

import hashlib
import random

import mmh3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawllib.content.hashing import content_hash, hamming64, lsh_bands, simhash64

_INT64 = st.integers(-(2**63), 2**63 - 1)
_VOCABULARY = [f"word{i}" for i in range(5000)]


def _random_words(rng, count):
    return [rng.choice(_VOCABULARY) for _ in range(count)]


def _one_word_changed(rng, words):
    changed = list(words)
    changed[rng.randrange(len(words))] = "replacement"
    return changed


# --- content_hash ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("é", hashlib.sha256(b"\xc3\xa9").hexdigest()),
    ],
)
def test_content_hash_is_hex_sha256_of_utf8(content, expected):
    assert content_hash(content) == expected


def test_content_hash_tells_one_byte_apart():
    assert content_hash("page one") != content_hash("page onf")


# --- simhash64 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "!!! ... ???", "\n\t"])
def test_simhash_of_text_without_words_is_zero(text):
    assert simhash64(text) == 0


@pytest.mark.parametrize("text", ["alpha beta gamma", "alpha beta", "alpha"])
def test_simhash_of_a_single_shingle_is_its_signed_mmh3(text):
    assert simhash64(text) == mmh3.hash64(text, seed=0, signed=True)[0]


def test_simhash_ignores_case_punctuation_and_spacing():
    assert simhash64("Hello, World!  Foo\nbar.") == simhash64("hello world foo bar")


def test_simhash_counts_majority_per_bit():
    # Three shingles: each bit of the result is the majority vote of the three hashes.
    hashes = [mmh3.hash64(s, seed=0, signed=False)[0] for s in ("a b c", "b c d", "c d e")]
    majority = sum(1 << bit for bit in range(64) if sum(h >> bit & 1 for h in hashes) >= 2)
    expected = majority - (1 << 64) if majority >> 63 else majority
    assert simhash64("a b c d e") == expected


def test_simhash_tie_leaves_the_bit_clear():
    # Two shingles: a bit is set only when both hashes set it (one of two is not a majority).
    first, second = (mmh3.hash64(s, seed=0, signed=False)[0] for s in ("a b c", "b c d"))
    both = first & second
    assert simhash64("a b c d") == (both - (1 << 64) if both >> 63 else both)


@given(st.text())
def test_simhash_fits_spark_long(text):
    assert -(2**63) <= simhash64(text) < 2**63


def test_one_word_changed_in_300_is_near():
    """One word in 300 changes 3 of 298 shingles; bit votes close to a tie can flip.

    With 3-gram shingles of weight 1 the distance is binomially spread: most such edits stay
    within 3 bits and nearly all within 8. Longer texts are steadier (see the next test). So a
    small k finds most, not all, one-word edits of short pages.
    """
    rng = random.Random(20240501)
    distances = []
    for _ in range(200):
        words = _random_words(rng, 300)
        edited = _one_word_changed(rng, words)
        distances.append(hamming64(simhash64(" ".join(words)), simhash64(" ".join(edited))))
    within_3 = sum(d <= 3 for d in distances) / len(distances)
    assert within_3 >= 0.6
    assert sorted(distances)[len(distances) // 2] <= 3  # the median
    assert max(distances) <= 10


def test_one_word_changed_in_2000_is_within_3():
    rng = random.Random(7)
    distances = []
    for _ in range(50):
        words = _random_words(rng, 2000)
        edited = _one_word_changed(rng, words)
        distances.append(hamming64(simhash64(" ".join(words)), simhash64(" ".join(edited))))
    assert sum(d <= 3 for d in distances) / len(distances) >= 0.9
    assert max(distances) <= 6


def test_unrelated_texts_are_far():
    rng = random.Random(11)
    for _ in range(100):
        first = " ".join(_random_words(rng, 300))
        second = " ".join(_random_words(rng, 300))
        assert hamming64(simhash64(first), simhash64(second)) > 10


# --- hamming64 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        (0, 0, 0),
        (0, 1, 1),
        (0b1011, 0b0110, 3),
        (-1, 0, 64),
        (-1, 1, 63),
        (2**63 - 1, -(2**63), 64),
        (-1, 2**64 - 1, 0),  # signed and unsigned spellings of one value
        (-(2**63), 2**63, 0),
    ],
)
def test_hamming64(a, b, distance):
    assert hamming64(a, b) == distance


@given(_INT64, _INT64)
def test_hamming64_is_symmetric_and_bounded(a, b):
    assert hamming64(a, b) == hamming64(b, a)
    assert 0 <= hamming64(a, b) <= 64
    assert hamming64(a, a) == 0


# --- lsh_bands ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("distance", "widths"),
    [
        (0, [64]),
        (1, [32, 32]),
        (3, [16, 16, 16, 16]),
        (4, [13, 13, 13, 13, 12]),
        (63, [1] * 64),
    ],
)
def test_lsh_bands_split_all_64_bits(distance, widths):
    value = 0x0123456789ABCDEF
    bands = lsh_bands(value, distance)
    assert [index for index, _ in bands] == list(range(distance + 1))
    rebuilt, shift = 0, 0
    for (_, band), width in zip(bands, widths, strict=True):
        assert 0 <= band < 2**width
        rebuilt |= band << shift
        shift += width
    assert rebuilt == value


def test_lsh_single_band_is_the_signed_hash():
    assert lsh_bands(-5, 0) == [(0, -5)]
    assert lsh_bands(2**64 - 5, 0) == [(0, -5)]


@pytest.mark.parametrize("distance", [-1, 64])
def test_lsh_bands_reject_impossible_distances(distance):
    with pytest.raises(ValueError):
        lsh_bands(0, distance)


def test_pigeonhole_is_tight_one_flip_per_band_shares_nothing():
    # k + 1 flipped bits, one in each band: no band is shared, hence distance k is the limit.
    a = 0
    b = sum(1 << (16 * band) for band in range(4))
    assert hamming64(a, b) == 4
    assert not set(lsh_bands(a, 3)) & set(lsh_bands(b, 3))


@given(
    _INT64,
    st.integers(0, 20).flatmap(
        lambda k: st.tuples(st.just(k), st.sets(st.integers(0, 63), max_size=k))
    ),
)
def test_hashes_within_distance_k_share_a_band(a, k_and_flips):
    k, flips = k_and_flips
    b = (a ^ sum(1 << bit for bit in flips)) & (2**64 - 1)
    b = b - 2**64 if b >> 63 else b
    assert hamming64(a, b) <= k
    assert set(lsh_bands(a, k)) & set(lsh_bands(b, k))


@given(_INT64, st.integers(0, 63))
def test_band_values_fit_spark_long(simhash, distance):
    for _, band in lsh_bands(simhash, distance):
        assert -(2**63) <= band < 2**63
