"""A document's main text -> its quality signals, as the reference filters compute them.
Pure Python: no I/O.

The signals are those of datatrove's heuristic filters (the ones FineWeb runs), named
``<rule>_<signal>`` after the filter they come from, each computed as that filter computes it
(`quality_signals` documents the fields; docs/tables.md gives each threshold):

- ``gopher_*`` (GopherQualityFilter, GopherRepetitionFilter: Rae et al. 2021, table A1) on the
  text as it is. Words are datatrove's English words (`crawllib.content.words`); a *symbol
  word* is one made only of punctuation (`PUNCTUATION`).
- ``c4_*`` (C4QualityFilter at its defaults): lines are kept when their words are at most
  1000 characters long, they end in terminal punctuation (not an ellipsis) once Wikipedia
  citations are removed, and they have 3 words or more; a kept line that says "lorem ipsum"
  or (if it does not mention javascript) holds "{" drops the document; lines that mention
  javascript or a cookie or terms policy are dropped; the document needs 5 sentences in the
  lines kept.
- ``fineweb_c4_*``: the same rules as FineWeb's pipeline runs them, without the
  terminal-punctuation rule (``filter_no_terminal_punct=False``).
- ``fineweb_*`` (FineWebQualityFilter) on the text that C4 step hands on: its kept lines.

Every signal reads the text with datatrove's default language, English (FineWeb filters its
English documents so): the stop words are English words, whatever the text's language.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

from crawllib.content.ngrams import Words, duplicate_ngram_chars, top_ngram_chars
from crawllib.content.words import split_words
from crawllib.core.records import Quality

# Characters a symbol word is made of (datatrove.utils.text.PUNCTUATION_SET): ASCII and
# CJK punctuation, controls, and the sentence terminals below.
_PUNCTUATION_CHARS = (
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
    + "".join(chr(c) for c in (*range(0, 9), *range(11, 13), *range(13, 32), *range(127, 160)))
)
# Sentence terminals of every script (datatrove.utils.text.TERMINAL_PUNCTUATION): what a
# FineWeb line must end with.
TERMINAL_PUNCTUATION = frozenset(
    "!.?\u0589\u061d\u061e\u061f\u06d4\u0700\u0701\u0702\u07f9\u0837\u0839\u083d"
    "\u083e\u0964\u0965\u104a\u104b\u1362\u1367\u1368\u166e\u1735\u1736\u17d4\u17d5"
    "\u17d6\u17d9\u17da\u1803\u1809\u1944\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b"
    "\u1b5e\u1b5f\u1b7d\u1b7e\u1c3b\u1c3c\u1c7e\u1c7f\u203c\u203d\u2047\u2048\u2049"
    "\u2e2e\u2e3c\u2e53\u2e54\u3002\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877\ua8ce"
    "\ua8cf\ua92f\ua9c8\ua9c9\uaa5d\uaa5e\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57"
    "\uff01\uff0e\uff1f\uff61\U00010a56\U00010a57\U00010f55\U00010f56\U00010f57"
    "\U00010f58\U00010f59\U00010f86\U00010f87\U00010f88\U00010f89\U00011047\U00011048"
    "\U000110be\U000110bf\U000110c0\U000110c1\U00011141\U00011142\U00011143\U000111c5"
    "\U000111c6\U000111cd\U000111de\U000111df\U00011238\U00011239\U0001123b\U0001123c"
    "\U000112a9\U0001144b\U0001144c\U000115c2\U000115c3\U000115c9\U000115ca\U000115cb"
    "\U000115cc\U000115cd\U000115ce\U000115cf\U000115d0\U000115d1\U000115d2\U000115d3"
    "\U000115d4\U000115d5\U000115d6\U000115d7\U00011641\U00011642\U0001173c\U0001173d"
    "\U0001173e\U00011944\U00011946\U00011a42\U00011a43\U00011a9b\U00011a9c\U00011c41"
    "\U00011c42\U00011ef7\U00011ef8\U00011f43\U00011f44\U00016a6e\U00016a6f\U00016af5"
    "\U00016b37\U00016b38\U00016b44\U00016e98\U0001bc9f\U0001da88"
)
PUNCTUATION = frozenset(_PUNCTUATION_CHARS) | TERMINAL_PUNCTUATION
_TERMINALS = tuple(TERMINAL_PUNCTUATION)

GOPHER_STOP_WORDS = frozenset(("the", "be", "to", "of", "and", "that", "have", "with"))
TOP_NGRAMS = (2, 3, 4)
DUPLICATE_NGRAMS = (5, 6, 7, 8, 9, 10)

C4_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
C4_END_PUNCTUATION = (".", "?", "!", '"', "'")
C4_POLICY = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)
C4_MAX_WORD_LENGTH = 1000
C4_MIN_WORDS_PER_LINE = 3
FINEWEB_SHORT_LINE_LENGTH = 30

_PARAGRAPHS = re.compile(r"\n{2,}")
_LINES = re.compile(r"\n+")


def quality_signals(text: str | None) -> Quality | None:
    """The quality signals of a main text (a texts row's ``text``); None for no text or ""."""
    if not text:
        return None
    # A text's words are its lines' words, one after the other (lines end at whitespace,
    # where words split); C4 reads a line's words again, stripped (which changes no word).
    line_words: dict[str, list[str]] = {}
    words: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped not in line_words:
            line_words[stripped] = split_words(stripped)
        words += line_words[stripped]
    out: dict[str, object] = {}
    out.update(_gopher_quality(text, words))
    out.update(_gopher_repetition(text, words))
    c4 = _c4(text, line_words, terminal_punctuation=True)
    fineweb_c4 = _c4(text, line_words, terminal_punctuation=False)
    out.update(
        c4_lines=c4.lines,
        c4_terminal_punctuation_lines=c4.terminal,
        c4_javascript_lines=c4.javascript,
        c4_policy_lines=c4.policy,
        c4_lorem_ipsum=c4.lorem_ipsum,
        c4_curly_bracket=c4.curly_bracket,
        c4_sentences=c4.sentences,
        fineweb_c4_lorem_ipsum=fineweb_c4.lorem_ipsum,
        fineweb_c4_curly_bracket=fineweb_c4.curly_bracket,
        fineweb_c4_sentences=fineweb_c4.sentences,
    )
    out.update(_fineweb(fineweb_c4.kept_text, fineweb_c4.kept_words))
    return Quality(**out)  # type: ignore[typeddict-item]


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _gopher_quality(text: str, words: Sequence[str]) -> dict[str, object]:
    lengths = [len(w) for w in words if not _is_symbol(w)]
    lines = text.splitlines()
    stripped = [(line.lstrip(), line.rstrip()) for line in lines]
    return {
        "gopher_words": len(lengths),
        "gopher_mean_word_length": _ratio(sum(lengths), len(lengths)),
        "gopher_hash_ratio": _ratio(text.count("#"), len(words)),
        "gopher_ellipsis_ratio": _ratio(text.count("...") + text.count("…"), len(words)),
        "gopher_bullet_lines": _ratio(
            sum(left.startswith(("•", "-")) for left, _ in stripped), len(lines)
        ),
        "gopher_ellipsis_lines": _ratio(
            sum(right.endswith(("...", "…")) for _, right in stripped), len(lines)
        ),
        "gopher_alpha_words": _ratio(sum(map(_has_letter, words)), len(words)),
        "gopher_stop_words": len(GOPHER_STOP_WORDS.intersection(words)),
    }


@functools.lru_cache(maxsize=65536)
def _is_symbol(word: str) -> bool:
    return PUNCTUATION.issuperset(word)


@functools.lru_cache(maxsize=65536)
def _has_letter(word: str) -> bool:
    return any(c.isalpha() for c in word)


def _duplicates(items: Sequence[str]) -> tuple[int, int]:
    """(elements, characters) of the items that repeat an earlier item."""
    seen: set[str] = set()
    count = chars = 0
    for item in items:
        if item in seen:
            count += 1
            chars += len(item)
        else:
            seen.add(item)
    return count, chars


def _gopher_repetition(text: str, words: Sequence[str]) -> dict[str, object]:
    size = len(text)
    paragraphs = _PARAGRAPHS.split(text.strip())
    para_dups, para_chars = _duplicates(paragraphs)
    lines = _LINES.split(text)
    line_dups, line_chars = _duplicates(lines)
    out: dict[str, object] = {
        "gopher_dup_para_frac": para_dups / len(paragraphs),
        "gopher_dup_para_char_frac": para_chars / size,
        "gopher_dup_line_frac": line_dups / len(lines),
        "gopher_dup_line_char_frac": line_chars / size,
    }
    counted = Words(words)
    for n in TOP_NGRAMS:
        out[f"gopher_top_{n}gram_char_frac"] = top_ngram_chars(counted, n) / size
    for n in DUPLICATE_NGRAMS:
        out[f"gopher_dup_{n}gram_char_frac"] = duplicate_ngram_chars(counted, n) / size
    return out


class _C4Lines(NamedTuple):
    lines: int
    terminal: int
    javascript: int
    policy: int
    lorem_ipsum: bool
    curly_bracket: bool
    sentences: int
    kept_text: str  # the kept lines, as the filter leaves the text
    kept_words: int  # its words: its lines' (a newline is whitespace, where words split)


def _c4(text: str, line_words: dict[str, list[str]], *, terminal_punctuation: bool) -> _C4Lines:
    """C4's line rules over ``text`` (with or without the terminal-punctuation rule);
    ``line_words`` caches the words of a line."""
    lines = text.splitlines()
    terminal = javascript = policy = sentences = kept_words = 0
    lorem = curly = False
    kept = []
    for raw in lines:
        line = raw.strip()
        words = line.split()
        # a word past the limit needs a line past it
        if len(line) > C4_MAX_WORD_LENGTH and max(map(len, words)) > C4_MAX_WORD_LENGTH:
            continue
        line = C4_CITATION.sub("", line)
        ends = line.endswith(C4_END_PUNCTUATION) and not line.endswith("...")
        terminal += ends
        if terminal_punctuation and not ends:
            continue
        if len(words) < C4_MIN_WORDS_PER_LINE:
            continue
        lowered = line.lower()
        if "lorem ipsum" in lowered:
            lorem = True
            continue
        if "javascript" in lowered:
            javascript += 1
            continue
        if "{" in line:
            curly = True
            continue
        if any(p in lowered for p in C4_POLICY):
            policy += 1
            continue
        if line not in line_words:
            line_words[line] = split_words(line)
        sentences += count_sentences(line_words[line])
        kept_words += len(line_words[line])
        kept.append(line)
    return _C4Lines(
        len(lines),
        terminal,
        javascript,
        policy,
        lorem,
        curly,
        sentences,
        "\n".join(kept).strip(),
        kept_words,
    )


# What ends a sentence for spaCy's sentencizer (its default punct_chars, as datatrove's English
# sentence splitter uses it).
SENTENCE_ENDS = frozenset(
    "!.?\u0589\u061f\u06d4\u0700\u0701\u0702\u07f9\u0964\u0965\u104a\u104b\u1362"
    "\u1367\u1368\u166e\u1735\u1736\u1803\u1809\u1944\u1945\u1aa8\u1aa9\u1aaa\u1aab"
    "\u1b5a\u1b5b\u1b5e\u1b5f\u1c3b\u1c3c\u1c7e\u1c7f\u203c\u203d\u2047\u2048\u2049"
    "\u2e2e\u2e3c\u3002\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877\ua8ce\ua8cf\ua92f"
    "\ua9c8\ua9c9\uaa5d\uaa5e\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57\uff01\uff0e"
    "\uff1f\uff61\U00010a56\U00010a57\U00011047\U00011048\U000110be\U000110bf"
    "\U000110c0\U000110c1\U00011141\U00011142\U00011143\U000111c5\U000111c6\U000111cd"
    "\U000111de\U000111df\U00011238\U00011239\U0001123b\U0001123c\U000112a9\U0001144b"
    "\U0001144c\U000115c2\U000115c3\U000115c9\U000115ca\U000115cb\U000115cc\U000115cd"
    "\U000115ce\U000115cf\U000115d0\U000115d1\U000115d2\U000115d3\U000115d4\U000115d5"
    "\U000115d6\U000115d7\U00011641\U00011642\U0001173c\U0001173d\U0001173e\U00011a42"
    "\U00011a43\U00011a9b\U00011a9c\U00011c41\U00011c42\U00016a6e\U00016a6f\U00016af5"
    "\U00016b37\U00016b38\U00016b44\U0001bc9f\U0001da88"
)


def count_sentences(words: Sequence[str]) -> int:
    """Sentences of a line's words as spaCy's sentencizer splits them: a sentence ends after
    a word that is a sentence end, at the next word that is not punctuation."""
    if SENTENCE_ENDS.isdisjoint(words):
        return 1
    # "2": a sentence end, "1": other punctuation, "0": a word; a new sentence starts at each
    # "0" after a "2" (punctuation between them or not)
    return 1 + len(_NEW_SENTENCE.findall("".join(map(_word_class, words))))


_NEW_SENTENCE = re.compile("2[12]*0")


@functools.lru_cache(maxsize=65536)
def _word_class(word: str) -> str:
    if word in SENTENCE_ENDS:
        return "2"
    return "1" if all(unicodedata.category(c).startswith("P") for c in word) else "0"


def _fineweb(text: str, words: int) -> dict[str, object]:
    lines = [line for line in text.split("\n") if line.strip() != ""]
    if not lines:
        return dict.fromkeys(
            (
                "fineweb_line_punct_ratio",
                "fineweb_short_line_ratio",
                "fineweb_char_dup_ratio",
                "fineweb_list_ratio",
            )
        )
    return {
        "fineweb_line_punct_ratio": sum(line.endswith(_TERMINALS) for line in lines) / len(lines),
        "fineweb_short_line_ratio": sum(len(line) <= FINEWEB_SHORT_LINE_LENGTH for line in lines)
        / len(lines),
        "fineweb_char_dup_ratio": _ratio(_duplicates(lines)[1], len(text.replace("\n", ""))),
        "fineweb_list_ratio": _ratio(text.count("\n"), words),
    }
