"""The language of an extracted text, detected from the text itself. Pure Python: no Spark.

py3langid (langid.py's naive Bayes model over byte n-grams, kept up by trafilatura's author)
ships its model in the package: no download, no network, the same answer everywhere for the
same text. The model is loaded once per process, on first use (a Spark Python worker keeps it
across tasks).

Choices:
- Only the first ``SAMPLE_CHARS`` characters are read: the cost grows with the text's length,
  and a page's language shows in its first paragraphs.
- A text shorter than ``MIN_CHARS`` (spaces stripped) gets no language: a menu or a caption is
  too short to tell, and a wrong answer is worse than none. So does a text the model finds no
  language in (``zxx``: numbers, code) or one it is less than ``MIN_CONFIDENCE`` sure of.
"""

from __future__ import annotations

import functools

from py3langid.langid import MODEL_FILE, LanguageIdentifier

SAMPLE_CHARS = 1000
MIN_CHARS = 20
MIN_CONFIDENCE = 0.5
_NO_LANGUAGE = frozenset({"zxx", "und"})


@functools.cache
def _identifier() -> LanguageIdentifier:
    # norm_probs: the confidence is a probability, so MIN_CONFIDENCE means the same for any
    # length of text.
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def detect_language(text: str | None) -> str | None:
    """The language of ``text``: an ISO 639 code, lowercase ("en", "de"; ISO 639-3 where the
    language has no two-letter code), or None (no text, too short, no language, unsure)."""
    if text is None:
        return None
    sample = text[:SAMPLE_CHARS].strip()
    if len(sample) < MIN_CHARS:
        return None
    language, confidence = _identifier().classify(sample)
    if language in _NO_LANGUAGE or confidence < MIN_CONFIDENCE:
        return None
    return str(language)
