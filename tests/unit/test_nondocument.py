"""Pages that are not documents, by what they say (crawllib.content.nondocument): titles and
short texts that say the page is missing, the domain is parked, or the server shows its default
page are marked, in the languages with most web pages; articles that only talk about such
pages, and long texts, are not."""

from __future__ import annotations

import random

import pytest

from crawllib.config import load_config
from crawllib.content.extract import extract_page
from crawllib.content.nondocument import TEXT_CHARS, non_document
from crawllib.testweb.content import article_html

NOT_FOUND_TITLES = [
    "404 Not Found",
    "404",
    "HTTP 404",
    "Error 404 (Not Found)!!1",
    "404: This page could not be found",
    "Page not found – My Blog",
    "Page Not Found | Acme Corp",
    "Oops! That page can’t be found. – Site",
    "Seite nicht gefunden – Beispiel GmbH",
    "Page non trouvée - Le Journal",
    "Page introuvable",
    "Página no encontrada | Sitio",
    "Pagina non trovata",
    "Página não encontrada - Loja",
    "Pagina niet gevonden",
    "Nie znaleziono strony",
    "Страница не найдена",
    "Sayfa bulunamadı",
    "Sidan hittades inte",
    "Stránka nenalezena",
    "ページが見つかりません",
    "页面不存在 - 网站",
    "페이지를 찾을 수 없습니다",
    "الصفحة غير موجودة",
    "Không tìm thấy trang",
    "Halaman tidak ditemukan",
]
PARKED_TITLES = [
    "example.com is for sale",
    "The domain example.net may be for sale",
    "Domain for sale | Sedo",
    "Buy this domain",
    "Domain parked",
    "Domain zu verkaufen",
]
PLACEHOLDER_TITLES = [
    "Welcome to nginx!",
    "Apache2 Ubuntu Default Page: It works",
    "Test Page for the Apache HTTP Server",
    "IIS Windows Server",
    "It works!",
    "Under Construction",
    "Coming soon - Acme",
    "Account Suspended",
    "Sitio en construcción",
]
DOCUMENT_TITLES = [
    "How to fix a 404 page not found error",
    "The 404 Club",
    "Page 404 of the archive",
    "Not Found: the story of lost things",
    "Coming Soon: our new product line",
    "Why parked domains still sell",
    "Nginx vs Apache: which default page do you see?",
    "Harbor Lantern Report | www.example.com",
]


@pytest.mark.parametrize("title", NOT_FOUND_TITLES)
def test_titles_saying_the_page_is_missing_are_soft_404s(title):
    assert non_document(title, "") == "soft_404"


@pytest.mark.parametrize("title", PARKED_TITLES)
def test_titles_of_parked_domains(title):
    assert non_document(title, None) == "parked"


@pytest.mark.parametrize("title", PLACEHOLDER_TITLES)
def test_titles_of_default_and_coming_soon_pages(title):
    assert non_document(title, None) == "placeholder"


@pytest.mark.parametrize("title", DOCUMENT_TITLES)
def test_titles_that_only_mention_such_pages_are_documents(title):
    assert non_document(title, "A few words of an article.") is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Sorry, the page you are looking for could not be found. Try the home page.", "soft_404"),
        (
            "Oops! That page can't be found. It looks like nothing was found at this location.",
            "soft_404",
        ),
        ("We couldn't find that page. Search the site instead?", "soft_404"),
        ("The link you followed may be broken, or the page may have been removed.", "soft_404"),
        ("This domain may be for sale! Make an offer on this domain today.", "parked"),
        ("example.org - domain parked free, courtesy of a registrar. Buy this domain.", "parked"),
        ("Diese Domain steht zum Verkauf.", "parked"),
        (
            "If you see this page, the nginx web server is successfully installed and working.",
            "placeholder",
        ),
        ("Our website is under construction. Please check back later.", "placeholder"),
        ("This account has been suspended. Contact your hosting provider.", "placeholder"),
    ],
)
def test_short_texts_that_say_so(text, reason):
    assert non_document("Home | Example", text) == reason


def test_a_long_text_is_a_document_whatever_it_says():
    sentence = "The page you are looking for could not be found, the clerk told the reporter. "
    assert non_document("A story", sentence) == "soft_404"
    long = sentence + "The rest of the story goes on and on about the archive. " * 40
    assert len(long) > TEXT_CHARS
    assert non_document("A story", long) is None


def test_an_empty_page_says_nothing():
    assert non_document(None, None) is None
    assert non_document("", "") is None


def test_a_huge_title_costs_its_first_characters_only():
    assert non_document("Page not found | " + "x" * 10_000_000, None) == "soft_404"


CFG = load_config()


def test_extraction_marks_a_200_not_found_page_and_not_an_article():
    rng = random.Random(3)
    missing = (
        "<html><head><title>Page not found – The Harbor Blog</title></head><body>"
        "<nav><a href='/'>Home</a> <a href='/about'>About</a></nav><main><h1>Oops!</h1>"
        "<p>Sorry, the page you are looking for could not be found.</p></main></body></html>"
    )
    assert (
        extract_page(missing.encode(), "http://blog.example.com/x", None, CFG)["non_document"]
        == "soft_404"
    )
    article = article_html(rng, "blog.example.com", "Harbor Lantern Report", [("/a", "A")])
    assert (
        extract_page(article.encode(), "http://blog.example.com/a", None, CFG)["non_document"]
        is None
    )
    # noindex keeps no text, but the mark is made on what the page says
    hidden = missing.replace("<head>", '<head><meta name="robots" content="noindex">')
    page = extract_page(hidden.encode(), "http://blog.example.com/y", None, CFG)
    assert page["text"] is None and page["non_document"] == "soft_404"
