"""Text -> words, as datatrove's English word tokenizer splits it. Pure Python: no I/O.

datatrove (the reference of `crawllib.content.quality`) splits English text into words with
spaCy's blank English tokenizer, then drops whitespace tokens. spaCy costs about 10 ms per
5 KB page, twice the rest of a page's extraction, so this module follows the same rules in
plain Python instead: split on whitespace, then per chunk peel off prefixes (opening
punctuation, quotes, currency signs, symbols) and suffixes (closing punctuation, quotes, "'s",
units after a number, a period after a lower-case letter, a digit or punctuation, or after
two capitals), stopping at a known exception ("don't" -> "do", "n't"; "e.g."; "U.S."; ":)");
a URL stays one word; what is left is split at infixes (hyphens and "/", ":", "<", ">", "="
between letters, "," between letters, "." between a lower- and an upper-case letter,
arithmetic between digits, ellipses, symbols).

The rules are spaCy's for English text; rarer corners (spaCy's long tail of exceptions,
exceptions that span an infix such as "Mr.Smith") may split differently, which moves a word
count by a word. tests/unit/test_quality.py compares the words with datatrove's on its sample.
"""

from __future__ import annotations

import functools
import itertools
import unicodedata

import regex

# Characters peeled off the front (and, bar a few, the end) of a chunk: punctuation, quotes,
# brackets of the scripts spaCy lists.
_PUNCT = "…,:;!?¿؟¡()[]{}<>_#*&。？！，、；：～·।،۔؛٪"
_QUOTES = "'\"”“`‘´’‚„»«「」『』（）〔〕【】《》〈〉〈〉⟦⟧"
_CURRENCY = "$£€¥฿₽﷼₴₠₡₢₣₤₥₦₧₨₩₪₫₭₮₯₰₱₲₳₵₶₷₸₹₺₻₼₾₿"
_PREFIX_CHARS = frozenset("§%=—–" + _PUNCT + _QUOTES + _CURRENCY)
_SUFFIX_CHARS = frozenset(_PUNCT + _QUOTES + "—–")
_PREFIX_WORDS = ("US$", "C$", "A$")
_SUFFIX_WORDS = ("'s", "'S", "’s", "’S")
# Units split off a number they follow ("3km" -> "3", "km").
_UNITS = frozenset(
    "km km² km³ m m² m³ dm dm² dm³ cm cm² cm³ mm mm² mm³ ha µm nm yd in ft kg g mg µg t "
    "lb oz m/s km/h kmh mph hPa Pa mbar mb MB kb KB gb GB tb TB T G M K % "
    "км км² км³ м м² м³ дм дм² дм³ см см² см³ мм мм² мм³ нм кг г мг м/с км/ч кПа Па мбар "
    "Кб КБ кб Мб МБ мб Гб ГБ гб Тб ТБ тб".split()
)
_ASCII_DIGITS = frozenset("0123456789")
_LONGEST_UNIT = max(map(len, _UNITS))
_PERIOD_AFTER = frozenset("%²-+" + _PUNCT + _QUOTES + "(?:")

_INFIX = regex.compile(
    r"\.\.+|…|\p{So}"
    r"|(?<=[0-9])[+\-*^](?=[0-9-])"
    rf"|(?<=[\p{{Ll}}\p{{Lo}}{_QUOTES}])\.(?=[\p{{Lu}}\p{{Lo}}{_QUOTES}])"
    r"|(?<=\p{L}),(?=\p{L})"
    r"|(?<=[\p{L}0-9])(?:-|–|—|--|---|——|~)(?=\p{L})"
    r"|(?<=[\p{L}0-9])[:<>=/](?=\p{L})"
)
_URL = regex.compile(
    r"(?:[A-Za-z][A-Za-z0-9+.-]*://)?(?:[^\s/:@]+(?::[^\s/@]*)?@)?"
    r"(?:localhost|(?:[\p{L}0-9](?:[\p{L}0-9_-]*[\p{L}0-9])?\.)+[a-z\u00a1-\uffff]{2,63})"
    r"(?::\d{2,5})?(?:[/?#]\S*)?"
)


def _exceptions() -> dict[str, tuple[str, ...]]:
    """Chunks spaCy's English tokenizer splits by a rule of their own (or keeps whole)."""
    out: dict[str, tuple[str, ...]] = {}

    def add(word: str, parts: tuple[str, ...]) -> None:
        out[word] = parts
        title = word[:1].upper() + word[1:]
        out.setdefault(title, (parts[0][:1].upper() + parts[0][1:], *parts[1:]))

    for verb in (
        "ai are ca could dare did does do had has have is might must need sha should was "
        "were wo would may ought".split()
    ):
        for tail in ("n't", "n’t", "nt"):
            add(verb + tail, (verb, tail))
    pronouns = {
        "i": ("'m", "'d", "'ll", "'ve"),
        "you": ("'re", "'d", "'ll", "'ve"),
        "he": ("'d", "'ll"),
        "she": ("'d", "'ll"),
        "it": ("'d", "'ll"),
        "we": ("'re", "'d", "'ll", "'ve"),
        "they": ("'re", "'d", "'ll", "'ve"),
    }
    for word in "that there these this those what when where who why how".split():
        pronouns[word] = ("'d", "'ll", "'re", "'ve")
    # written without the apostrophe, spaCy splits these too (but not "ill", "well", "shed")
    bare = {"im", "ive", "id", "youre", "youd", "youll", "youve", "hed", "itd", "itll"}
    bare |= {"weve", "theyre", "theyd", "theyll", "theyve", "thats", "whats", "whos"}
    bare |= {"wheres", "hows", "theres"}
    for word, tails in pronouns.items():
        for tail in tails:
            add(word + tail, (word, tail))
            add(word + tail.replace("'", "’"), (word, tail.replace("'", "’")))
            if word + tail[1:] in bare:
                add(word + tail[1:], (word, tail[1:]))
    for word in ("hes", "shes", "whos", "thats", "whats", "wheres", "hows", "theres"):
        add(word, (word[:-1], "s"))
    for word, parts in {
        "cannot": ("can", "not"),
        "gonna": ("gon", "na"),
        "gotta": ("got", "ta"),
        "ima": ("i", "ma"),
    }.items():
        add(word, parts)
    out["I"] = ("I",)
    for word in (
        "a.m. p.m. e.g. i.e. E.g. E.G. I.e. I.E. vs. v.s. co. Co. Corp. Inc. Ltd. Jr. Bros. "
        "Mr. Mrs. Ms. Dr. Prof. Rev. Rep. Sen. Gen. Gov. Adm. Messrs. St. Mt. Ph.D. D.C. "
        "Jan. Feb. Mar. Apr. Jun. Jul. Aug. Sep. Sept. Oct. Nov. Dec. "
        "Ala. Ariz. Ark. Calif. Colo. Conn. Del. Fla. Ga. Ill. Ind. Kan. Kans. Ky. La. Mass. "
        "Md. Mich. Minn. Miss. Mo. Mont. Neb. Nebr. Nev. Okla. Ore. Pa. Tenn. Va. Wash. Wis. "
        "N.C. N.D. N.H. N.J. N.M. N.Y. S.C. Ak. Ia. Id. "
        "C++ and/or '' \\\") "
        # emoticons
        ":) :)) :-) :( :(( :-( ;) ;-) :D :P :p :O :o :X :x :| :] :} :> :* :/ :0 :3 :1 ): )-: "
        "(: (-: (; (= =) =( =/ =] =[ =| =D =3 ]= [: [= [-: 8) 8-) 8D 8-D <3 </3 <33 xD XD "
        ":-D :-P :-p :-O :-o :-X :-x :-| :-] :-} :-> :-* :-/ :-0 :-3 ;-D ;D >:( >:o ^_^ -_- "
        "O_O O_o o_O 0_0 0_o @_@ V_V ;_;".split()
    ):
        out[word] = (word,)
    for letter in "abcdefghijklmnopqrstuvwxyzäöü":
        out[letter + "."] = (letter + ".",)
    for hour in range(1, 13):
        for half in ("am", "pm", "a.m.", "p.m."):
            out[f"{hour}{half}"] = (str(hour), half)
    return out


_EXCEPTIONS = _exceptions()
_LONGEST_EXCEPTION = max(map(len, _EXCEPTIONS))


def _prefix_length(s: str, a: int, b: int) -> int:
    """The prefix rule matching the start of ``s[a:b]`` (not empty): its length, or 0."""
    if s.startswith("..", a, b):
        end = a
        while end < b and s[end] == ".":
            end += 1
        return end - a
    for word in _PREFIX_WORDS:
        if s.startswith(word, a, b):
            return len(word)
    first = s[a]
    if first in _PREFIX_CHARS or unicodedata.category(first) == "So":
        return 1
    if first == "+" and (a + 1 >= b or s[a + 1] not in _ASCII_DIGITS):
        return 1
    return 0


def _is_lower(char: str) -> bool:
    return char.islower() or (char.isalpha() and not char.isupper())


def _is_upper(char: str) -> bool:
    return char.isupper() or (char.isalpha() and not char.islower())


def _suffix_length(s: str, a: int, b: int) -> int:
    """The longest suffix rule matching the end of ``s[a:b]`` (not empty): spaCy takes the
    leftmost match, and every rule ends at the end. Looks at a few characters only (but for a
    run of dots, which the caller then takes off)."""
    best = 0
    if s.endswith("..", a, b):
        start = b
        while start > a and s[start - 1] == ".":
            start -= 1
        best = b - start
    last = s[b - 1]
    before = s[b - 2] if b - 2 >= a else ""
    if last in _SUFFIX_CHARS or unicodedata.category(last) == "So":
        best = max(best, 2 if s.endswith("……", a, b) else 1)
    if any(s.endswith(word, a, b) for word in _SUFFIX_WORDS):
        best = max(best, 2)
    if last == "+" and before in _ASCII_DIGITS and before:
        best = max(best, 1)
    if last == ".":
        if before and (before in _ASCII_DIGITS or _is_lower(before) or before in _PERIOD_AFTER):
            best = max(best, 1)
        elif b - 3 >= a and _is_upper(s[b - 2]) and _is_upper(s[b - 3]):
            best = max(best, 1)
        elif b - 3 >= a and s[b - 3 : b - 1] in ("°F", "°f", "°C", "°c", "°K", "°k"):
            best = max(best, 1)
    # a unit right after the last digit (units are short: only the last few characters)
    digit = b - 1
    while digit >= max(a, b - _LONGEST_UNIT - 1) and s[digit] not in _ASCII_DIGITS:
        digit -= 1
    if digit >= a and s[digit] in _ASCII_DIGITS and s[digit + 1 : b] in _UNITS:
        best = max(best, b - digit - 1)
    if last in _CURRENCY and before and before in _ASCII_DIGITS:
        best = max(best, 1)
    return best


def _exception(s: str, a: int, b: int) -> tuple[str, ...] | None:
    return _EXCEPTIONS.get(s[a:b]) if b - a <= _LONGEST_EXCEPTION else None


@functools.lru_cache(maxsize=65536)
def _split_chunk(chunk: str) -> tuple[str, ...]:
    """A whitespace-free chunk's words. The chunk is read between two bounds that move
    inwards: the work is linear in its length, whatever it holds."""
    prefixes: list[str] = []
    suffixes: list[str] = []
    a, b = 0, len(chunk)
    last = -1
    while a < b and b - a != last and _exception(chunk, a, b) is None:
        last = b - a
        pre = _prefix_length(chunk, a, b)
        if pre and a + pre < b and _exception(chunk, a + pre, b) is not None:
            prefixes.append(chunk[a : a + pre])
            a += pre
            break
        suf = _suffix_length(chunk, a + pre, b) if a + pre < b else 0
        if suf and _exception(chunk, a, b - suf) is not None:
            suffixes.append(chunk[b - suf : b])
            b -= suf
            break
        if pre and suf and pre + suf <= b - a:
            prefixes.append(chunk[a : a + pre])
            suffixes.append(chunk[b - suf : b])
            a, b = a + pre, b - suf
        elif pre:
            prefixes.append(chunk[a : a + pre])
            a += pre
        elif suf:
            suffixes.append(chunk[b - suf : b])
            b -= suf
    core = chunk[a:b]
    middle: list[str] = []
    if core in _EXCEPTIONS:
        middle = list(_EXCEPTIONS[core])
    elif core and _URL.fullmatch(core):
        middle = [core]
    elif core:
        start = 0
        for match in _INFIX.finditer(core):
            if match.start() == 0:
                continue
            if match.start() != start:
                middle.append(core[start : match.start()])
            if match.end() != match.start():
                middle.append(match.group())
            start = match.end()
        if start < len(core):
            middle.append(core[start:])
    return _merge_exceptions((*prefixes, *middle, *reversed(suffixes)))


def _merge_exceptions(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """Runs of tokens that together spell an exception become its tokens (spaCy matches
    exceptions that hold punctuation again after splitting: ")" ":" -> "):")."""
    if len(tokens) < 2:
        return tokens
    out: list[str] = []
    i = 0
    while i < len(tokens):
        for j in range(min(len(tokens), i + 5), i + 1, -1):
            joined = "".join(tokens[i:j])
            if joined in _EXCEPTIONS:
                out.extend(_EXCEPTIONS[joined])
                i = j
                break
        else:
            out.append(tokens[i])
            i += 1
    return tuple(out)


def split_words(text: str) -> list[str]:
    """The words of ``text`` (punctuation tokens included, whitespace not), in order."""
    return list(itertools.chain.from_iterable(map(_split_chunk, text.split())))
