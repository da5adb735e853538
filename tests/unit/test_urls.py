"""Unit tests of crawllib.core.urls: normalisation rules, keys, hosts, domains, SURT keys, extensions."""

import socket

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from crawllib.core import urls
from crawllib.core.urls import (
    InvalidURL,
    host_of,
    normalize_url,
    registered_domain,
    surt,
    url_extension,
    url_key,
)

# --- normalize_url: one row per rule -------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # scheme and host case, trailing dot, surrounding whitespace
        ("HTTP://Example.COM/Path", "http://example.com/Path"),
        ("HtTpS://WWW.example.com./", "https://www.example.com/"),
        ("  \n http://example.com/x \t", "http://example.com/x"),
        # default ports dropped, others kept
        ("http://example.com:80/", "http://example.com/"),
        ("https://example.com:443/", "https://example.com/"),
        ("http://example.com:443/", "http://example.com:443/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("http://example.com:/a", "http://example.com/a"),
        # fragment and userinfo dropped
        ("http://example.com/a#section-2", "http://example.com/a"),
        ("http://user:pw@example.com/a", "http://example.com/a"),
        ("http://user@example.com:8080/", "http://example.com:8080/"),
        # empty path becomes "/", empty query removed
        ("http://example.com", "http://example.com/"),
        ("http://example.com?", "http://example.com/"),
        ("http://example.com/a?#f", "http://example.com/a"),
        ("http://example.com/a?&&", "http://example.com/a"),
        # dot segments, including escaped dots
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/../../a", "http://example.com/a"),
        ("http://example.com/a/b/..", "http://example.com/a/"),
        ("http://example.com/a/.", "http://example.com/a/"),
        ("http://example.com/a/%2E%2e/b", "http://example.com/b"),
        ("http://example.com//a//b", "http://example.com//a//b"),
        # percent-encoding: unreserved decoded, hex uppercased, unsafe encoded
        ("http://example.com/%7euser/%41%62", "http://example.com/~user/Ab"),
        ("http://example.com/a%2fb%3a", "http://example.com/a%2Fb%3A"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/%zz%4", "http://example.com/%25zz%254"),
        ("http://example.com/ä", "http://example.com/%C3%A4"),
        ("http://example.com/%e4", "http://example.com/%E4"),
        ('http://example.com/"<>`{}|^\\', "http://example.com/%22%3C%3E%60%7B%7D%7C%5E%5C"),
        ("http://example.com/a:b@c!$&'()*+,;=", "http://example.com/a:b@c!$&'()*+,;="),
        ("http://example.com/?q=a%3db%26c&x=%7e+y", "http://example.com/?q=a%3Db%26c&x=~+y"),
        ("http://example.com/?q=ü", "http://example.com/?q=%C3%BC"),
        ("http://example.com/?q=a?b/c", "http://example.com/?q=a?b/c"),
        # query sorted by key then value; bare keys kept
        ("http://example.com/?b=2&a=9&a=1", "http://example.com/?a=1&a=9&b=2"),
        ("http://example.com/?z&a=", "http://example.com/?a=&z"),
        ("http://example.com/?a=&a", "http://example.com/?a&a="),
        # tracking and session parameters dropped, case-insensitively
        ("http://example.com/?utm_source=x&utm_Medium=y&id=1", "http://example.com/?id=1"),
        ("http://example.com/?gclid=1&fbclid=2&msclkid=3&yclid=4", "http://example.com/"),
        ("http://example.com/?mc_cid=1&mc_eid=2&_ga=3&p=2", "http://example.com/?p=2"),
        ("http://example.com/?JSESSIONID=1&PHPSESSID=2&sid=3", "http://example.com/"),
        ("http://example.com/?sessionid=1&session_id=2&ASPSESSIONIDQA=3", "http://example.com/"),
        ("http://example.com/?utm%5Fsource=x&k=1", "http://example.com/?k=1"),
        ("http://example.com/?sidebar=1&utm=2", "http://example.com/?sidebar=1&utm=2"),
        # session path parameters dropped
        ("http://example.com/a;jsessionid=0AB12?x=1", "http://example.com/a?x=1"),
        ("http://example.com/a;JSESSIONID=0AB12/b", "http://example.com/a/b"),
        ("http://example.com/a;j%73essionid=1", "http://example.com/a"),
        ("http://example.com/a;v=1", "http://example.com/a;v=1"),
        # IDNA hosts
        ("http://bücher.de/", "http://xn--bcher-kva.de/"),
        ("http://BÜCHER.de/", "http://xn--bcher-kva.de/"),
        ("http://faß.de/", "http://xn--fa-hia.de/"),
        ("http://ＥＸＡＭＰＬＥ.com/", "http://example.com/"),
        ("http://ex%61mple.com/", "http://example.com/"),
        ("http://xn--bcher-kva.de/", "http://xn--bcher-kva.de/"),
        ("http://under_score.example.com/", "http://under_score.example.com/"),
        # IP literals
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/"),
        ("http://[::1]/", "http://[::1]/"),
        ("http://[0:0:0:0:0:0:0:1]:80/", "http://[::1]/"),
        ("https://[2001:DB8::A]:8443/x", "https://[2001:db8::a]:8443/x"),
    ],
)
def test_normalize_url_rules(url, expected):
    assert normalize_url(url) == expected


@pytest.mark.parametrize(
    ("url", "base", "expected"),
    [
        ("//other.org/x", "https://a.com/b/c", "https://other.org/x"),
        ("../x", "http://a.com/b/c/d", "http://a.com/b/x"),
        ("./x", "http://a.com/b/c", "http://a.com/b/x"),
        ("x/../y", "http://a.com/b/", "http://a.com/b/y"),
        ("/root", "http://a.com/b/c", "http://a.com/root"),
        ("?q=1", "http://a.com/b?z=2#f", "http://a.com/b?q=1"),
        ("#frag", "http://a.com/b?z=2", "http://a.com/b?z=2"),
        ("", "http://A.com/b", "http://a.com/b"),
        ("http://other.org/", "http://a.com/b", "http://other.org/"),
        ("page.html", "http://a.com", "http://a.com/page.html"),
    ],
)
def test_normalize_url_resolves_against_base(url, base, expected):
    assert normalize_url(url, base) == expected


@pytest.mark.parametrize(
    ("url", "base", "reason"),
    [
        ("mailto:someone@example.com", None, "unsupported scheme 'mailto'"),
        ("javascript:void(0)", "http://a.com/", "unsupported scheme 'javascript'"),
        ("JavaScript:alert(1)", None, "unsupported scheme 'javascript'"),
        ("ftp://example.com/file", None, "unsupported scheme 'ftp'"),
        ("data:text/html,hi", None, "unsupported scheme 'data'"),
        ("tel:+123", "http://a.com/", "unsupported scheme 'tel'"),
        ("file:///etc/passwd", None, "unsupported scheme 'file'"),
        ("example.com/x", None, "no scheme"),
        ("/just/a/path", None, "no scheme"),
        ("", None, "no scheme"),
        ("http://", None, "no host"),
        ("http:///x", None, "no host"),
        ("http://user@/x", None, "no host"),
        ("http://example.com:99999/", None, "invalid port"),
        ("http://example.com:0/", None, "invalid port"),
        ("http://example.com:8o/", None, "invalid port"),
        ("http://example.com:-1/", None, "invalid port"),
        ("http://example.com:²/", None, "invalid port"),
        ("http://exa mple.com/", None, "invalid host"),
        ("http://a..b/", None, "invalid host"),
        ("http://a*b.com/", None, "invalid host"),
        ("http://" + "a" * 64 + ".com/", None, "invalid host"),
        ("http://[::1/", None, "invalid host"),
        ("http://[abc]/", None, "invalid host"),
        ("http://[::1]x/", None, "invalid host"),
        ("http://[fe80::1%25eth0]/", None, "invalid host"),
        ("http://999.0.0.1/", None, "invalid host"),
        ("http://0x7f.1/", None, "invalid host"),
        ("http://2130706433/", None, "invalid host"),
        ("http://127.000.000.001/", None, "invalid host"),
        ("http://ex%00ample.com/", None, "invalid host"),
    ],
)
def test_normalize_url_rejects(url, base, reason):
    with pytest.raises(InvalidURL) as excinfo:
        normalize_url(url, base)
    assert str(excinfo.value) == reason


def test_invalid_url_is_a_value_error_and_non_strings_are_invalid():
    assert issubclass(InvalidURL, ValueError)
    with pytest.raises(InvalidURL, match="not a string"):
        normalize_url(None)  # type: ignore[arg-type]


def test_lone_surrogates_are_invalid_not_a_crash():
    for url in ("http://a.com/\ud800", "http://\udfff.com/"):
        with pytest.raises(InvalidURL):
            normalize_url(url)


# --- normalize_url: properties ---------------------------------------------------------------

_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_HOST = st.one_of(
    st.builds(
        lambda labels, tld: ".".join([*labels, tld]),
        st.lists(_LABEL, min_size=1, max_size=3),
        st.sampled_from(["com", "org", "net", "co.uk", "de", "test"]),
    ),
    st.sampled_from(["bücher.de", "münchen.example", "例え.jp", "127.0.0.1", "[::1]"]),
)
_PART_TEXT = st.text(
    alphabet=st.sampled_from(list("abcXYZ019-._~!$&'()*+,;=:@%/?# äé€")) | st.characters(),
    max_size=12,
)


@st.composite
def realistic_urls(draw):
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "Https"]))
    host = draw(_HOST)
    host = "".join(c.upper() if draw(st.booleans()) else c for c in host)
    port = draw(st.none() | st.sampled_from([80, 443, 8080]) | st.integers(1, 65535))
    path = "/".join(draw(st.lists(_PART_TEXT | st.sampled_from([".", ".."]), max_size=5)))
    query = "&".join(
        f"{k}={v}" for k, v in draw(st.lists(st.tuples(_PART_TEXT, _PART_TEXT), max_size=4))
    )
    fragment = draw(_PART_TEXT)
    netloc = host if port is None else f"{host}:{port}"
    return f"{scheme}://{netloc}/{path}?{query}#{fragment}"


def _normalize_or_none(url, base=None):
    try:
        return normalize_url(url, base)
    except InvalidURL:
        return None


@given(realistic_urls())
def test_normalize_is_idempotent_on_realistic_urls(url):
    once = _normalize_or_none(url)
    assume(once is not None)
    assert normalize_url(once) == once
    assert once.isascii()


@given(
    st.one_of(st.text(), st.builds("http://{}".format, st.text())),
    st.none() | st.sampled_from(["http://a.com/b/c?d#e", "https://[::1]:8/x", "mailto:x", ""]),
)
def test_normalize_never_raises_but_invalid_url_and_is_idempotent(text, base):
    once = _normalize_or_none(text, base)  # any other exception fails the test
    if once is not None:
        assert normalize_url(once) == once


_KEY = st.from_regex(r"k[a-z0-9]{0,5}", fullmatch=True)
_SEGMENT = st.from_regex(r"[a-zA-Z0-9_-]{1,8}", fullmatch=True)


@st.composite
def cosmetic_variants(draw):
    """(plain URL, the same URL spelled differently in every cosmetic way)."""
    scheme = draw(st.sampled_from(["http", "https"]))
    host = ".".join(draw(st.lists(_LABEL, min_size=1, max_size=3))) + ".com"
    segments = draw(st.lists(_SEGMENT, min_size=1, max_size=4))
    params = draw(st.lists(st.tuples(_KEY, _SEGMENT), max_size=4))
    plain_query = "&".join(f"{k}={v}" for k, v in params)
    plain = f"{scheme}://{host}/{'/'.join(segments)}" + (f"?{plain_query}" if params else "")

    messy_host = "".join(c.upper() if draw(st.booleans()) else c for c in host)
    port = {"http": 80, "https": 443}[scheme]
    messy_segments = list(segments)
    messy_segments[-1] += ";jsessionid=" + draw(_SEGMENT)
    messy_segments.insert(draw(st.integers(0, len(segments) - 1)), "./trap/..")
    tracking = [("utm_source", "news"), ("gclid", "x1"), ("PHPSESSID", "abc")]
    shuffled = draw(st.permutations(params + tracking))
    messy = (
        f"{scheme.upper()}://user:pw@{messy_host}:{port}/{'/'.join(messy_segments)}"
        f"?{'&'.join(f'{k}={v}' for k, v in shuffled)}#{draw(_SEGMENT)}"
    )
    return plain, messy


@given(cosmetic_variants())
def test_cosmetic_variants_share_a_url_key(pair):
    plain, messy = pair
    assert normalize_url(messy) == normalize_url(plain)
    assert url_key(normalize_url(messy)) == url_key(normalize_url(plain))


@given(st.lists(_SEGMENT, min_size=2, max_size=2, unique=True))
def test_distinct_paths_have_distinct_keys(paths):
    first, second = (normalize_url(f"http://example.com/{p}") for p in paths)
    assert first != second
    assert url_key(first) != url_key(second)


# --- url_key -----------------------------------------------------------------------------------


def test_url_key_is_pinned_signed_64_bit_mmh3():
    # Pinned: changing the hash re-keys every table of an existing crawl.
    assert url_key("http://a.com/") == -8891710575342672530
    assert url_key("http://a.com/") == url_key("http://a.com/")


@given(realistic_urls())
def test_url_key_fits_spark_long(url):
    normalized = _normalize_or_none(url)
    assume(normalized is not None)
    assert -(2**63) <= url_key(normalized) < 2**63


# --- host_of, registered_domain, url_extension --------------------------------------------------


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://Example.COM:8080/x", "example.com"),
        ("https://a.b.example.co.uk/", "a.b.example.co.uk"),
        ("http://[::1]:8000/", "::1"),
        ("http://127.0.0.1/", "127.0.0.1"),
        ("http://user:pw@host.test/", "host.test"),
        ("not a url", ""),
        ("http://[::1/", ""),
    ],
)
def test_host_of(url, host):
    assert host_of(url) == host


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("a.b.site3.net", "site3.net"),
        ("a.shared.org", "shared.org"),
        ("shared.org", "shared.org"),
        ("foo.co.uk", "foo.co.uk"),
        ("www.foo.co.uk", "foo.co.uk"),
        ("WWW.Example.COM.", "example.com"),
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("[2001:db8::1]", "[2001:db8::1]"),
        ("localhost", "localhost"),
        ("site1.test", "site1.test"),
    ],
)
def test_registered_domain(host, domain):
    assert registered_domain(host) == domain


def test_registered_domain_needs_no_network_and_no_cache_dir(monkeypatch, tmp_path):
    def no_network(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setenv("TLDEXTRACT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    urls._extractor.cache_clear()
    try:
        assert registered_domain("a.b.example.co.uk") == "example.co.uk"
    finally:
        urls._extractor.cache_clear()
    assert list(tmp_path.iterdir()) == []


# --- surt: the urlkey of Common Crawl's index -----------------------------------------------
# Expected keys are what the `surt` package (0.3.1, `surt.surt(url)`: the Internet Archive's
# canonicalizer, which Common Crawl's CDX index uses) gives for the same URL.


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://www.example.com/path?q=1", "com,example)/path?q=1"),
        ("http://example.com/", "com,example)/"),
        ("http://example.com", "com,example)/"),
        # www, www2 dropped; only a leading one
        ("http://WWW3.Example.com/Index.HTML", "com,example)/index.html"),
        ("http://sub.www.example.com/a", "com,example,www,sub)/a"),
        ("http://www2.example.co.uk/index.html", "uk,co,example)/index.html"),
        # ports: the scheme's default dropped, others kept before ")"
        ("https://Example.COM:8443/A/B/?b=2&a=1", "com,example:8443)/a/b?a=1&b=2"),
        ("http://www.example.com:80/", "com,example)/"),
        ("https://example.com:443/x", "com,example)/x"),
        ("http://example.com:443/x", "com,example:443)/x"),
        # trailing slash dropped unless the path is "/"; empty segments dropped
        ("http://example.com/dir/", "com,example)/dir"),
        ("http://example.com//a//b/", "com,example)/a/b"),
        # query: sorted, lowercase, an empty one dropped; fragment dropped
        ("http://example.com/?B=1&a=2", "com,example)/?a=2&b=1"),
        ("http://example.com/s?q=Foo+Bar&lang=en", "com,example)/s?lang=en&q=foo+bar"),
        ("http://example.com/?", "com,example)/"),
        ("http://example.com/a#frag", "com,example)/a"),
        # escapes decoded, non-ASCII escaped again, lowercase
        ("http://example.com/%7Euser/", "com,example)/~user"),
        ("http://example.com/a%20b", "com,example)/a%20b"),
        ("http://example.com/caf%C3%A9/?q=%C3%A9t%C3%A9", "com,example)/caf%c3%a9?q=%c3%a9t%c3%a9"),
        # IDN: punycode labels, reversed
        ("http://xn--bcher-kva.de/Stra%C3%9Fe", "de,xn--bcher-kva)/stra%c3%9fe"),
        ("http://www.bücher.de/", "de,xn--bcher-kva)/"),
        ("http://www.example.com./x", "com,example)/x"),
        # addresses: IPv4 reversed too (the package's default), IPv6 as it is
        ("http://127.0.0.1:8080/x", "1,0,0,127:8080)/x"),
        ("http://[2001:db8::1]/a", "2001:db8::1)/a"),
        # real-world pages
        ("https://en.wikipedia.org/wiki/Main_Page", "org,wikipedia,en)/wiki/main_page"),
        (
            "https://www.bbc.co.uk/news/world-europe-12345678",
            "uk,co,bbc)/news/world-europe-12345678",
        ),
    ],
)
def test_surt(url, key):
    assert surt(url) == key


@pytest.mark.parametrize("url", ["not a url", "http://[::1/", "file:///etc/passwd", ""])
def test_surt_of_a_url_without_host_is_none(url):
    assert surt(url) is None


@given(
    st.sampled_from(["http://Www.A.com", "https://a.b.c.co.uk:8443", "http://10.0.0.1"]),
    st.text(alphabet="aZ09-._~%/?&=;:@!$'()*+, #\u00e9", max_size=20),
)
def test_surt_of_a_normalised_url_is_lowercase_ascii_without_scheme(origin, tail):
    try:
        url = normalize_url(f"{origin}/{tail}")
    except InvalidURL:
        assume(False)
    key = surt(url)
    assert key is not None and key.isascii() and key == key.lower()
    assert "://" not in key and ")/" in key and "#" not in key


@pytest.mark.parametrize(
    ("url", "extension"),
    [
        ("http://a.com/photo.JPG", "jpg"),
        ("http://a.com/x/archive.tar.gz?download=1", "gz"),
        ("http://a.com/doc.pdf#page=2", "pdf"),
        ("http://a.com/page.html;v=2", "html"),
        ("http://a.com/file.P%44F", "pdf"),
        ("http://a.com/dir.d/", ""),
        ("http://a.com/", ""),
        ("http://a.com/README", ""),
        ("http://a.com/.hidden", ""),
        ("http://a.com/trailing.", ""),
        ("http://a.com/x?file=y.jpg", ""),
    ],
)
def test_url_extension(url, extension):
    assert url_extension(url) == extension


def test_seeds_fetch_would_block_are_refused_with_the_reason():
    from crawllib.config import load_config, replace
    from crawllib.stages.seeding import check_url

    cfg = load_config()
    cases = {
        "http://127.0.0.1/": "loopback_address",
        "http://10.1.2.3/x": "private_address",
        "http://169.254.169.254/latest/meta-data/": "metadata_address",
        "http://metadata.google.internal/": "metadata_address",
        "http://localhost:8080/": "loopback_address",
        "http://-bad-.example.com/": "invalid host name",
    }
    for url, reason in cases.items():
        assert check_url(url, cfg)[0] is None and reason in check_url(url, cfg)[1], url
    assert check_url("http://site1.com/", cfg) == ("http://site1.com/", None)
    # what fetch lets through, seeding does too: private addresses allowed, trusted names
    open_cfg = replace(cfg, network__allow_private=True)
    assert check_url("http://10.1.2.3/x", open_cfg) == ("http://10.1.2.3/x", None)
    trusted = replace(cfg, network__resolve={"127.0.0.1": "127.0.0.1"})
    assert check_url("http://127.0.0.1/", trusted) == ("http://127.0.0.1/", None)


def test_the_normalisers_cache_never_holds_a_long_url():
    """Issue 49: 100 pages of one 1.8 MB link each took an extraction worker from 59 to
    846 MB, every URL being cached; a URL past urls.CACHED_URL_CHARS is normalised each time."""
    from crawllib.core import urls

    urls._normalize_absolute.cache_clear()
    long = "http://a.site1.net/" + "x" * 1_800_000
    for i in range(5):
        assert normalize_url(f"{long}{i}") == f"{long}{i}"
    short = "http://a.site1.net/short"
    assert normalize_url(short) == normalize_url(short) == short
    info = urls._normalize_absolute.cache_info()
    assert info.currsize == 1 and info.hits == 1
