"""crawllib.content.quality against datatrove's own filters (the reference FineWeb runs).

Each signal is checked against the filter it comes from: the filter, with that one rule on and
every other off, is run with its threshold just past our value on either side, and must
pass on one side and fail (for that rule's reason) on the other. So a signal that drifts from
datatrove's definition by more than the tolerance fails here, whatever the thresholds. Then
the four filters at their defaults (C4 as FineWeb runs it too) must take the decisions our
signals give with the thresholds of docs/tables.md.
"""

from __future__ import annotations

import json
import pathlib
import random
import time
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from datatrove.data import Document
from datatrove.pipeline.filters import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from datatrove.pipeline.filters.gopher_repetition_filter import (
    find_all_duplicate,
    find_top_duplicate,
    get_n_grams,
)
from datatrove.utils.text import PUNCTUATION_SET, TERMINAL_PUNCTUATION, split_into_words
from spacy.pipeline import Sentencizer

from crawllib.content import ngrams, quality, words
from crawllib.content.quality import quality_signals
from crawllib.content.words import split_words
from crawllib.core.records import Quality
from crawllib.sql.views import VIEWS
from crawllib.store.arrow import arrow_schema
from crawllib.store.schemas import QUALITY, S, struct_of

DOCS = json.loads((pathlib.Path(__file__).parent / "quality_docs.json").read_text("utf-8"))
NAMES = [d["name"] for d in DOCS]
TOLERANCE = 1e-6  # relative, on either side of our value

GOPHER_QUALITY_OFF: dict[str, Any] = dict.fromkeys(
    (
        "min_doc_words",
        "max_doc_words",
        "min_avg_word_length",
        "max_avg_word_length",
        "max_symbol_word_ratio",
        "max_bullet_lines_ratio",
        "max_ellipsis_lines_ratio",
        "max_non_alpha_words_ratio",
        "min_stop_words",
    )
)
GOPHER_REPETITION_OFF: dict[str, Any] = {
    "dup_line_frac": None,
    "dup_para_frac": None,
    "dup_line_char_frac": None,
    "dup_para_char_frac": None,
    "top_n_grams": (),
    "dup_n_grams": (),
}
FINEWEB_OFF: dict[str, Any] = {
    "line_punct_thr": 0,
    "short_line_thr": 1,
    "char_duplicates_ratio": 1,
    "new_line_ratio": 1e9,
}


def outcome(flt: Any, text: str) -> str:
    """ "pass", or the reason the filter gives for dropping the text."""
    result = flt.filter(Document(text=text, id="doc"))
    if result is True:
        return "pass"
    assert isinstance(result, tuple), result
    return str(result[1])


def below(value: float) -> float:
    return value * (1 - TOLERANCE) - 1e-12


def above(value: float) -> float:
    return value * (1 + TOLERANCE) + 1e-12


def signals(name: str) -> tuple[str, Quality]:
    doc = next(d for d in DOCS if d["name"] == name)
    result = quality_signals(doc["text"])
    assert result is not None
    return doc["text"], result


def test_the_sample_is_varied() -> None:
    assert 15 <= len(DOCS) <= 30
    assert len(set(NAMES)) == len(NAMES)
    assert {d["language"] for d in DOCS} >= {"en", "de", "fr", "ja"}


def test_the_character_classes_are_datatroves_and_spacys() -> None:
    assert quality.PUNCTUATION == PUNCTUATION_SET
    assert quality.TERMINAL_PUNCTUATION == TERMINAL_PUNCTUATION
    assert set(Sentencizer.default_punct_chars) == quality.SENTENCE_ENDS


@pytest.mark.parametrize("name", NAMES)
def test_the_words_are_datatroves_words(name: str) -> None:
    text = next(d["text"] for d in DOCS if d["name"] == name)
    assert split_words(text) == split_into_words(text)


@pytest.mark.parametrize(
    "text",
    [
        "Don't stop, it's the U.S. way (e.g. at 3.5 km/h)... See https://a.com/x-y, or b@c.org!",
        "“Well-known” items: 5% off $20 — 3-4 days; foo(): ok :) 8) gonna cannot I'm they're",
        "Prof. Smith's 2nd-year class at 10am: read pp. 3–5, §2.1 & “A.B.C.” ##tags ***",
    ],
)
def test_the_words_of_hard_cases_are_datatroves_words(text: str) -> None:
    assert split_words(text) == split_into_words(text)


def probe(
    make: Callable[[float], Any], text: str, value: float, reason: str, *, floor: bool
) -> None:
    """The filter made by ``make(threshold)`` drops ``text`` for ``reason`` with the threshold
    on one side of ``value`` and not on the other (floor: the rule wants at least the
    threshold; else at most). A zero threshold turns a datatrove rule off: not probed."""
    failing, passing = (above(value), below(value)) if floor else (below(value), above(value))
    if failing > 0:
        assert outcome(make(failing), text) == reason, (reason, value, failing)
    if passing > 0:
        assert outcome(make(passing), text) != reason, (reason, value, passing)


@pytest.mark.parametrize("name", NAMES)
def test_gopher_quality_signals_agree_with_datatrove(name: str) -> None:
    text, q = signals(name)

    def gq(**on: Any) -> GopherQualityFilter:
        return GopherQualityFilter(**{**GOPHER_QUALITY_OFF, **on})

    words = q["gopher_words"]
    assert outcome(gq(min_doc_words=words + 1), text) == "gopher_short_doc"
    if words:
        assert outcome(gq(min_doc_words=words), text) == "pass"
        assert outcome(gq(max_doc_words=words), text) == "pass"
        assert outcome(gq(max_doc_words=words - 1 or 0.5), text) == "gopher_long_doc"
        mean = q["gopher_mean_word_length"]
        assert mean is not None
        probe(
            lambda t: gq(min_avg_word_length=t),
            text,
            mean,
            "gopher_below_avg_threshold",
            floor=True,
        )
    hashes, ellipses = q["gopher_hash_ratio"], q["gopher_ellipsis_ratio"]
    assert hashes is not None and ellipses is not None
    probe(
        lambda t: gq(max_symbol_word_ratio=t), text, hashes, "gopher_too_many_hashes", floor=False
    )
    if ellipses > hashes:
        probe(
            lambda t: gq(max_symbol_word_ratio=t),
            text,
            ellipses,
            "gopher_too_many_ellipsis",
            floor=False,
        )
    for key, arg, reason in (
        ("gopher_bullet_lines", "max_bullet_lines_ratio", "gopher_too_many_bullets"),
        ("gopher_ellipsis_lines", "max_ellipsis_lines_ratio", "gopher_too_many_end_ellipsis"),
    ):
        value = q[key]  # type: ignore[literal-required]
        probe(lambda t, arg=arg: gq(**{arg: t}), text, value, reason, floor=False)
    alpha = q["gopher_alpha_words"]
    assert alpha is not None
    probe(
        lambda t: gq(max_non_alpha_words_ratio=t),
        text,
        alpha,
        "gopher_below_alpha_threshold",
        floor=True,
    )
    stop = q["gopher_stop_words"]
    assert outcome(gq(min_stop_words=stop + 1), text) == "gopher_enough_stop_words"
    if stop:
        assert outcome(gq(min_stop_words=stop), text) == "pass"


@pytest.mark.parametrize("name", NAMES)
def test_gopher_repetition_signals_agree_with_datatrove(name: str) -> None:
    text, q = signals(name)

    def gr(**on: Any) -> GopherRepetitionFilter:
        return GopherRepetitionFilter(**{**GOPHER_REPETITION_OFF, **on})

    for key, arg in (
        ("gopher_dup_para_frac", "dup_para_frac"),
        ("gopher_dup_para_char_frac", "dup_para_char_frac"),
        ("gopher_dup_line_frac", "dup_line_frac"),
        ("gopher_dup_line_char_frac", "dup_line_char_frac"),
    ):
        value = q[key]  # type: ignore[literal-required]
        probe(lambda t, arg=arg: gr(**{arg: t}), text, value, arg, floor=False)
    for n in quality.TOP_NGRAMS:
        value = q[f"gopher_top_{n}gram_char_frac"]  # type: ignore[literal-required]
        probe(lambda t, n=n: gr(top_n_grams=((n, t),)), text, value, f"top_{n}_gram", floor=False)
    for n in quality.DUPLICATE_NGRAMS:
        value = q[f"gopher_dup_{n}gram_char_frac"]  # type: ignore[literal-required]
        reason = f"duplicated_{n}_n_grams"
        probe(lambda t, n=n: gr(dup_n_grams=((n, t),)), text, value, reason, floor=False)


@pytest.mark.parametrize("name", NAMES)
def test_c4_signals_agree_with_datatrove(name: str) -> None:
    text, q = signals(name)
    for prefix, terminal in (("c4_", True), ("fineweb_c4_", False)):
        lorem = q[f"{prefix}lorem_ipsum"]  # type: ignore[literal-required]
        curly = q[f"{prefix}curly_bracket"]  # type: ignore[literal-required]
        sentences = q[f"{prefix}sentences"]  # type: ignore[literal-required]
        only_lorem = C4QualityFilter(
            filter_no_terminal_punct=terminal, filter_curly_bracket=False, min_num_sentences=-1
        )
        assert (outcome(only_lorem, text) == "lorem_ipsum") == lorem
        only_curly = C4QualityFilter(
            filter_no_terminal_punct=terminal, filter_lorem_ipsum=False, min_num_sentences=-1
        )
        assert (outcome(only_curly, text) == "curly_bracket") == curly
        if not (lorem or curly):
            at = C4QualityFilter(filter_no_terminal_punct=terminal, min_num_sentences=sentences)
            assert outcome(at, text) == "pass"
            past = C4QualityFilter(
                filter_no_terminal_punct=terminal, min_num_sentences=sentences + 1
            )
            assert outcome(past, text) == "too_few_sentences"
    counted = C4QualityFilter(filter_lorem_ipsum=False, filter_curly_bracket=False)
    outcome(counted, text)
    stats = {k: v.total for k, v in counted.stats.stats.items()}
    assert stats.get("line-total", 0) == q["c4_lines"]
    assert stats.get("line-filter-javascript", 0) == q["c4_javascript_lines"]
    assert stats.get("line-filter-policy", 0) == q["c4_policy_lines"]
    long_word_lines = stats.get("line-filter-too_long_word", 0)
    unterminated = stats.get("line-filter-no_terminal_punc", 0)
    assert unterminated == q["c4_lines"] - long_word_lines - q["c4_terminal_punctuation_lines"]


@pytest.mark.parametrize("name", NAMES)
def test_fineweb_signals_agree_with_datatrove(name: str) -> None:
    text, q = signals(name)
    # FineWeb's filter reads the text its C4 step keeps: lorem and curly lines would drop the
    # document there, and are dropped from the text here.
    document = Document(text=text, id="doc")
    C4QualityFilter(
        filter_no_terminal_punct=False,
        filter_lorem_ipsum=False,
        filter_curly_bracket=False,
        min_num_sentences=-1,
    ).filter(document)
    kept = "\n".join(
        line
        for line in document.text.split("\n")
        if "lorem ipsum" not in line.lower() and "{" not in line
    ).strip()
    if not kept.strip():
        assert q["fineweb_line_punct_ratio"] is None
        assert outcome(FineWebQualityFilter(), kept or " ") == "empty"
        return

    def fw(**on: Any) -> FineWebQualityFilter:
        return FineWebQualityFilter(**{**FINEWEB_OFF, **on})

    punct = q["fineweb_line_punct_ratio"]
    assert punct is not None
    probe(lambda t: fw(line_punct_thr=t), kept, punct, "line_punct_ratio", floor=True)
    for key, arg, reason in (
        ("fineweb_short_line_ratio", "short_line_thr", "short_line_ratio"),
        ("fineweb_char_dup_ratio", "char_duplicates_ratio", "char_dup_ratio"),
        ("fineweb_list_ratio", "new_line_ratio", "list_ratio"),
    ):
        value = q[key]  # type: ignore[literal-required]
        assert value is not None
        probe(lambda t, arg=arg: fw(**{arg: t}), kept, value, reason, floor=False)


def passes_gopher_quality(q: Quality) -> bool:
    mean, alpha = q["gopher_mean_word_length"], q["gopher_alpha_words"]
    return (
        50 <= q["gopher_words"] <= 100_000
        and mean is not None
        and 3 <= mean <= 10
        and (q["gopher_hash_ratio"] or 0) <= 0.1
        and (q["gopher_ellipsis_ratio"] or 0) <= 0.1
        and (q["gopher_bullet_lines"] or 0) <= 0.9
        and (q["gopher_ellipsis_lines"] or 0) <= 0.3
        and alpha is not None
        and alpha >= 0.8
        and q["gopher_stop_words"] >= 2
    )


def passes_gopher_repetition(q: Quality) -> bool:
    limits = {
        "gopher_dup_para_frac": 0.3,
        "gopher_dup_para_char_frac": 0.2,
        "gopher_dup_line_frac": 0.3,
        "gopher_dup_line_char_frac": 0.2,
        "gopher_top_2gram_char_frac": 0.2,
        "gopher_top_3gram_char_frac": 0.18,
        "gopher_top_4gram_char_frac": 0.16,
        "gopher_dup_5gram_char_frac": 0.15,
        "gopher_dup_6gram_char_frac": 0.14,
        "gopher_dup_7gram_char_frac": 0.13,
        "gopher_dup_8gram_char_frac": 0.12,
        "gopher_dup_9gram_char_frac": 0.11,
        "gopher_dup_10gram_char_frac": 0.10,
    }
    return all(q[k] <= v for k, v in limits.items())  # type: ignore[literal-required]


def passes_c4(q: Quality, prefix: str) -> bool:
    return not (
        q[f"{prefix}lorem_ipsum"]  # type: ignore[literal-required]
        or q[f"{prefix}curly_bracket"]  # type: ignore[literal-required]
        or q[f"{prefix}sentences"] < 5  # type: ignore[literal-required]
    )


def passes_fineweb(q: Quality) -> bool:
    punct, short = q["fineweb_line_punct_ratio"], q["fineweb_short_line_ratio"]
    dup, listed = q["fineweb_char_dup_ratio"], q["fineweb_list_ratio"]
    return (
        punct is not None
        and punct >= 0.12
        and short is not None
        and short <= 0.67
        and dup is not None
        and dup <= 0.01
        and listed is not None
        and listed <= 0.3
    )


def test_the_decisions_at_default_thresholds_are_datatroves() -> None:
    passed = {"gopher_quality": 0, "gopher_repetition": 0, "c4": 0, "fineweb": 0}
    fineweb_names: set[str] = set()
    for doc in DOCS:
        text, q = signals(doc["name"])
        gq = outcome(GopherQualityFilter(), text) == "pass"
        gr = outcome(GopherRepetitionFilter(), text) == "pass"
        c4 = outcome(C4QualityFilter(), text) == "pass"
        assert (gq, gr, c4) == (
            passes_gopher_quality(q),
            passes_gopher_repetition(q),
            passes_c4(q, "c4_"),
        ), doc["name"]
        # FineWeb's pipeline: Gopher repetition, Gopher quality, C4 without its
        # terminal-punctuation rule (which rewrites the text), then FineWeb's filter.
        document = Document(text=text, id="doc")
        fineweb = gr and gq
        for step in (C4QualityFilter(filter_no_terminal_punct=False), FineWebQualityFilter()):
            fineweb = fineweb and step.filter(document) is True
        ours = (
            passes_gopher_repetition(q)
            and passes_gopher_quality(q)
            and passes_c4(q, "fineweb_c4_")
            and passes_fineweb(q)
        )
        assert fineweb == ours, doc["name"]
        if fineweb:
            fineweb_names.add(doc["name"])
        passed["gopher_quality"] += gq
        passed["gopher_repetition"] += gr
        passed["c4"] += c4
        passed["fineweb"] += fineweb
    # the sample has documents on both sides of every filter
    assert all(0 < n < len(DOCS) for n in passed.values()), passed
    # the view fineweb_passing keeps the texts rows of those documents, and no other
    rows = [{"url": d["name"], "quality": quality_signals(d["text"])} for d in DOCS]
    rows.append({"url": "no text", "quality": None})
    con = duckdb.connect()
    con.register("texts", pa.Table.from_pylist(rows, schema=texts_schema()))
    kept = {r[0] for r in con.sql(f"SELECT url FROM ({VIEWS['fineweb_passing']})").fetchall()}
    assert kept == fineweb_names


def texts_schema() -> pa.Schema:
    """A texts table's url and quality columns, as Arrow types."""
    return arrow_schema(struct_of(("url", S), ("quality", QUALITY)))


def test_no_text_has_no_signals() -> None:
    assert quality_signals(None) is None
    assert quality_signals("") is None
    only_symbols = quality_signals("... ###")
    assert only_symbols is not None
    assert only_symbols["gopher_words"] == 0
    assert only_symbols["gopher_mean_word_length"] is None
    assert only_symbols["fineweb_line_punct_ratio"] is None


@pytest.mark.parametrize("seed", range(40))
def test_ngram_repetition_is_datatroves_on_repetitive_word_sequences(seed: int) -> None:
    """Sequences of a few short words, some spelling others' concatenations ("ab" "c" and
    "a" "bc"): many repeats, ties and n-grams equal only once joined without spaces."""
    rng = random.Random(seed)
    vocabulary = ["a", "b", "ab", "c", "bc", "abc", "the", "of"]
    words = [rng.choice(vocabulary) for _ in range(rng.randrange(0, 120))]
    counted = ngrams.Words(words)
    for n in quality.TOP_NGRAMS:
        grams = get_n_grams(words, n)
        expected = find_top_duplicate(grams) if grams else 0
        assert ngrams.top_ngram_chars(counted, n) == expected, n
    for n in quality.DUPLICATE_NGRAMS:
        assert ngrams.duplicate_ngram_chars(counted, n) == find_all_duplicate(words, n), n


@pytest.mark.parametrize("unit", ['"', "(", ")", "..", "a-", "1a)"])
def test_one_long_chunk_costs_time_linear_in_its_length(unit: str) -> None:
    """A chunk without whitespace is peeled a prefix or suffix at a time: between two bounds,
    never by copying what is left (a 5.6 KB run of quotes took 0.39 s that way)."""

    def cpu(size: int) -> float:
        chunk = (unit * (size // len(unit) + 1))[:size]
        best = float("inf")
        for _ in range(3):
            words._split_chunk.cache_clear()
            started = time.process_time()
            split_words(chunk)
            best = min(best, time.process_time() - started)
        return best

    small, large = cpu(10_000), cpu(80_000)
    # linear: about 8 times; quadratic: about 64
    assert large <= 20 * max(small, 1e-3), (small, large)
