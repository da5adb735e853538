"""crawllib.content.language: the language of a text, from the text, offline."""

from __future__ import annotations

import socket

import pytest

from crawllib.content import language
from crawllib.content.language import MIN_CHARS, SAMPLE_CHARS, detect_language

ENGLISH = (
    "The city council met on Tuesday evening to discuss the new budget for the public "
    "library. Several residents asked why the opening hours had been cut last winter, and "
    "the mayor promised that the reading rooms would stay open until eight o'clock."
)
GERMAN = (
    "Der Stadtrat hat am Dienstagabend über den neuen Haushalt der öffentlichen Bibliothek "
    "beraten. Mehrere Bürger fragten, warum die Öffnungszeiten im letzten Winter gekürzt "
    "wurden, und die Bürgermeisterin versprach, dass die Lesesäle bis acht Uhr geöffnet bleiben."
)
FRENCH = (
    "Le conseil municipal s'est réuni mardi soir pour discuter du nouveau budget de la "
    "bibliothèque publique. Plusieurs habitants ont demandé pourquoi les horaires d'ouverture "
    "avaient été réduits l'hiver dernier, et le maire a promis que les salles resteraient "
    "ouvertes jusqu'à vingt heures."
)


@pytest.mark.parametrize(("text", "expected"), [(ENGLISH, "en"), (GERMAN, "de"), (FRENCH, "fr")])
def test_a_paragraph_gives_its_language(text, expected):
    assert detect_language(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "   \n\t  ",
        "Home | Login",  # too short to tell
        "12345 67890 2026-12-03 14:05:00 3.1415926535",  # no language at all
    ],
)
def test_no_text_or_too_little_gives_none(text):
    assert detect_language(text) is None


def test_only_the_first_sample_chars_are_read():
    # German first, then more English than German: the answer is the beginning's.
    text = GERMAN * (SAMPLE_CHARS // len(GERMAN) + 1) + ENGLISH * 50
    assert detect_language(text) == "de"
    assert detect_language(ENGLISH * 50) == "en"


def test_a_text_shorter_than_min_chars_gets_none_however_clear():
    short = "  Öffnungszeiten der \n"  # the model says "de", 0.92 sure, but so it does of
    assert len(short.strip()) < MIN_CHARS  # "Bibliothèque publique": "la", 0.59
    assert detect_language(short) is None
    assert detect_language(short.strip() + " Bibliothek") == "de"


def test_the_model_is_bundled_no_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    language._identifier.cache_clear()
    try:
        assert detect_language(FRENCH) == "fr"
    finally:
        language._identifier.cache_clear()
