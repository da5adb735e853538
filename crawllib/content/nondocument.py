"""Pages that are not documents, by what they say: a 200 page telling the reader the page is
missing (a soft 404 by content), a parked or for-sale domain, a server's default or an
"under construction" page. `non_document` gives the reason (``texts.non_document``), or None.

The other soft-404 test, a page whose text is its host's answer to a URL nothing links to (the
probe, ``texts.duplicate_kind = 'soft_404'``), needs the host's error page; this one needs only
the page, so it also finds the 200 "not found" page of a host that answers real 404s elsewhere.

Rules, chosen to mark what says so and to leave articles about such pages alone:
- the title: one of its parts (split at `` | ``, `` - ``, `` – ``, `` — ``, `` :: ``, `` · ``,
  `` » ``) *is* a not-found, parked or default-page phrase once error words, ``404`` and
  punctuation are set aside ("404 Not Found", "Page not found – Blog", "Seite nicht gefunden",
  "Welcome to nginx!"); a title that only mentions one ("How to fix a 404 page not found
  error") is no mark;
- the main text, only when short (`TEXT_CHARS` at most; a not-found page is a sentence or two
  in a page of navigation): a sentence saying the page cannot be found, the domain is for sale,
  or the site is a default or coming-soon page.
Phrases cover the languages with most web pages (English, German, French, Spanish,
Italian, Portuguese, Dutch, Polish, Russian, Ukrainian, Turkish, the Nordic languages, Czech,
Greek, Japanese, Chinese, Korean, Arabic, Hebrew, Hindi, Vietnamese, Indonesian, Thai).
Work is bounded: the title's first `TITLE_CHARS`, no pattern that backtracks without bound.
"""

from __future__ import annotations

import re
import unicodedata

from crawllib.core.vocab import NonDocument

TITLE_CHARS = 300
TEXT_CHARS = 1500  # a longer main text is a document whatever it says


def _phrases(lines: str) -> frozenset[str]:
    """Phrases separated by ``|`` or new lines."""
    return frozenset(p.strip() for p in lines.replace("\n", "|").split("|")) - {""}


# Titles (a part of one) that say the page is missing, after `_bare`.
_NOT_FOUND_TITLES = _phrases(
    """
    not found|page not found|file not found|document not found|url not found|content not found
    post not found|article not found|nothing found|page missing|missing page|page unavailable
    page cannot be found|page can't be found|page could not be found|page does not exist
    page doesn't exist|page no longer exists|this page does not exist|this page doesn't exist
    this page could not be found|that page can't be found|that page could not be found
    the page you requested could not be found|the page you are looking for cannot be found
    sorry, page not found|sorry, that page doesn't exist|we can't find that page
    we couldn't find that page|page not found error|http 404|404 error
    seite nicht gefunden|seite wurde nicht gefunden|nicht gefunden|seite existiert nicht
    page introuvable|page non trouvée|page non trouvee|page inexistante|cette page n'existe pas
    página no encontrada|pagina no encontrada|no se encontró la página|página no existe
    pagina non trovata|pagina non esistente|pagina inesistente
    página não encontrada|pagina nao encontrada|página não existe
    pagina niet gevonden|niet gevonden|deze pagina bestaat niet
    nie znaleziono strony|strona nie została znaleziona|strona nie istnieje|nie znaleziono
    страница не найдена|страница не существует|не найдено
    сторінку не знайдено|сторінка не знайдена
    sayfa bulunamadı|sayfa bulunamadi
    sidan hittades inte|sidan kunde inte hittas|siden blev ikke fundet|siden findes ikke
    siden finnes ikke|side ikke funnet|sivua ei löytynyt|sivua ei loytynyt
    stránka nenalezena|stránka nebyla nalezena|stránka neexistuje
    η σελίδα δεν βρέθηκε
    ページが見つかりません|ページが見つかりませんでした|お探しのページは見つかりませんでした
    页面不存在|找不到页面|页面未找到|页面找不到了|頁面不存在|找不到網頁|找不到頁面
    페이지를 찾을 수 없습니다|페이지를 찾을 수 없음
    الصفحة غير موجودة|لم يتم العثور على الصفحة
    הדף לא נמצא|העמוד לא נמצא
    पृष्ठ नहीं मिला|पेज नहीं मिला
    không tìm thấy trang|trang không tồn tại
    halaman tidak ditemukan
    ไม่พบหน้า|ไม่พบหน้าที่คุณต้องการ
    """
)
_PARKED_TITLES = _phrases(
    """
    domain for sale|this domain is for sale|this domain may be for sale|domain is for sale
    buy this domain|domain parked|parked domain|this domain is parked|domain parking
    domain expired|this domain has expired|domain name for sale|domain zu verkaufen
    domain steht zum verkauf|domaine à vendre|nom de domaine à vendre|dominio en venta
    dominio in vendita|domein te koop|домен продается|домен продаётся
    """
)
_PLACEHOLDER_TITLES = _phrases(
    """
    welcome to nginx|test page for the nginx http server|apache2 ubuntu default page
    apache2 debian default page|apache2 default page|apache2 ubuntu default page: it works
    apache2 debian default page: it works|test page for the apache http server
    apache http server test page|it works|iis windows server|iis windows|iis
    internet information services|default web site page|default web page|default page
    domain default page|web server's default page|welcome to centos|welcome to openresty
    under construction|site under construction|website under construction|page under construction
    coming soon|website coming soon|site coming soon|launching soon
    future home of something quite cool|account suspended|this account has been suspended
    en construcción|sitio en construcción|en construction|site en construction
    im aufbau|in bearbeitung|baustelle|in costruzione|sito in costruzione|em construção
    """
)
# "example.com is for sale", "The domain example.net may be for sale"
_FOR_SALE_TITLE = re.compile(
    r"^(?:the )?(?:domain(?: name)? )?[\w-]+(?:\.[\w-]+)+ (?:is|may be|might be) for sale\b"
)
_TITLES = (
    (NonDocument.SOFT_404, _NOT_FOUND_TITLES),
    (NonDocument.PARKED, _PARKED_TITLES),
    (NonDocument.PLACEHOLDER, _PLACEHOLDER_TITLES),
)

# Title parts: split at separators with spaces around (so "e-mail" or "10:30" stay whole).
_PARTS = re.compile(r"\s+(?:[|\-–—·•»«/]|::|:)\s+|\s*[|–—·•»«]\s*")
# Set aside before a title part is compared: error words, 404, brackets, punctuation and digits
# at either end.
_ERROR_WORDS = re.compile(
    r"\b(?:error|erreur|fehler|errore|erro|fout|błąd|ошибка|помилка|hata|chyba|virhe|fejl|"
    r"feil|fel|σφάλμα|oops|whoops|oh no|sorry|uh oh)\b|\bhttp (?=404\b)|\b404\b|エラー|错误|錯誤|오류"
)
_EDGES = re.compile(r"^[\W\d_]+|[\W\d_]+$")
_BRACKETS = re.compile(r"[()\[\]{}]")

_TEXT_RULES = (
    (
        NonDocument.SOFT_404,
        re.compile(
            r"\b(?:page|file|url|document|content|article|post|resource)s? (?:you (?:are |were |"
            r"have been )?(?:looking|searching) for |you requested |you (?:are |were )?trying to "
            r"(?:reach|access|view) )?(?:could not|couldn't|cannot|can't|can ?not|was not|wasn't|"
            r"is not|isn't) (?:be )?(?:found|located)"
            r"|\b(?:404|page) not found\b|\bthis page (?:does not|doesn't|no longer) exists?\b"
            r"|\bthe (?:page|url|link) (?:you (?:followed|clicked|requested|visited)|requested) "
            r"(?:may be broken|(?:does not|doesn't|no longer) exists?|(?:has been|was) "
            r"(?:removed|deleted|moved))"
            r"|\bwe (?:can't|cannot|couldn't|could not) find (?:the|that|this) page\b"
            r"|\bnothing was found at this location\b"
        ),
    ),
    (
        NonDocument.PARKED,
        re.compile(
            r"\b(?:this )?domain(?: name)?(?: [\w.-]{1,80})? (?:is|may be|might be|could be) for "
            r"sale\b|\bbuy this domain\b|\b(?:this )?domain (?:is |has been )?parked\b"
            r"|\bparked (?:free|domain|by)\b|\bdomain parking\b|\binquire about this domain\b"
            r"|\bmake an offer on this domain\b|\bthis domain(?: name)? has expired\b"
            r"|\bthis domain (?:name )?is available for (?:purchase|registration)\b"
            r"|\bdiese domain (?:steht zum verkauf|kaufen)\b|\bce (?:nom de )?domaine est à vendre\b"
            r"|\beste dominio (?:está|esta) (?:a la venta|en venta)\b"
            r"|\bquesto dominio è in vendita\b|\bdeze domein(?:naam)? is te koop\b"
            r"|домен продаётся|домен продается|このドメインは販売中|该域名正在出售|此域名出售"
        ),
    ),
    (
        NonDocument.PLACEHOLDER,
        re.compile(
            r"\bif you see this page, the nginx web server is successfully installed\b"
            r"|\bthis is the default welcome page\b|\bthis is the default web page for this server\b"
            r"|\bthe web server software is running but no content has been added\b"
            r"|\bfuture home of something quite cool\b|\bthis account has been suspended\b"
            r"|\b(?:this |our )?(?:web)?site is (?:currently )?under construction\b"
            r"|\b(?:web)?site (?:is )?coming soon\b|\bwe(?: are|'re) launching soon\b"
        ),
    ),
)


def non_document(title: str | None, text: str | None) -> str | None:
    """Why a page with this title and main text is not a document (a `NonDocument` value:
    soft_404, parked, placeholder), or None: it is one (or says nothing of the kind)."""
    if title:
        parts = _PARTS.split(_normal(title[:TITLE_CHARS]))
        for reason, phrases in _TITLES:
            if any(_bare(part) in phrases for part in parts):
                return reason
        if any(_only_404(part) for part in parts):
            return NonDocument.SOFT_404
        if any(_FOR_SALE_TITLE.match(part) for part in parts):
            return NonDocument.PARKED
    if text and len(text) <= TEXT_CHARS:
        normal = _normal(text)
        for reason, rule in _TEXT_RULES:
            if rule.search(normal):
                return reason
    return None


def _normal(value: str) -> str:
    """Case-folded NFKC with one kind of apostrophe and single spaces."""
    value = unicodedata.normalize("NFKC", value).casefold().replace("’", "'").replace("`", "'")
    return " ".join(value.split())


def _bare(part: str) -> str:
    """A title part without error words, 404 and the punctuation around what is left."""
    return " ".join(_EDGES.sub("", _ERROR_WORDS.sub(" ", _BRACKETS.sub(" ", part))).split())


def _only_404(part: str) -> bool:
    """A title part that is 404 and error words only ("404", "Error 404!", "HTTP 404")."""
    return bool(re.search(r"\b404\b", part)) and not _EDGES.sub("", _ERROR_WORDS.sub(" ", part))
