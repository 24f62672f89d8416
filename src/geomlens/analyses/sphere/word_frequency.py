"""How common each token is in its own language, from a maintained word-frequency list.

Molina (2023) reads the final norm's gamma/beta as shifting the top-scoring tokens toward
*common words*. How common a word is is a property of its language, not of the few
thousand documents a run captures (where most of a 50k vocabulary never occurs and ties),
so it comes from ``wordfreq``: the Zipf frequency of each token's text (log10 of its
occurrences per billion words) in the language of the token's script: Latin text and
digits in English, Bengali in Bengali, Devanagari in Hindi, Cyrillic in Russian, and so on
(``SCRIPT_LANGUAGES``). A token scores 0 where its language's list does not know it
(punctuation, a piece of a word never seen alone) or where wordfreq has no usable list for
its script; only a token that no wordfreq language knows cannot be scored at all
(``unknown``).
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

SCRIPT_LANGUAGES = {
    "LATIN": "en",
    "CYRILLIC": "ru",
    "GREEK": "el",
    "ARABIC": "ar",
    "HEBREW": "he",
    "DEVANAGARI": "hi",
    "BENGALI": "bn",
    "TAMIL": "ta",
    "CJK": "zh",
    "HIRAGANA": "ja",
    "KATAKANA": "ja",
    "HANGUL": "ko",
}
"""Unicode script (the first word of a letter's Unicode name) -> the wordfreq language that
scores text in it: the script's most-used language among wordfreq's. Digits are scored in
English. Chinese, Japanese and Korean need tokenizers wordfreq installs apart (jieba,
MeCab); without them those scripts have no usable list (``languages``)."""


def script_of(token: str) -> str | None:
    """The script of a token's first letter ("LATIN", "BENGALI", ...); "LATIN" for digits
    without letters; None for a token of neither (punctuation, spaces, symbols)."""
    text = token.strip()
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            return name.split(" ")[0] if name else None
    return "LATIN" if any(ch.isdigit() for ch in text) else None


SCRIPT_OF_LANGUAGE = {
    **dict.fromkeys(
        [
            "ca",
            "cs",
            "da",
            "de",
            "en",
            "es",
            "fi",
            "fil",
            "fr",
            "hu",
            "id",
            "is",
            "it",
            "lt",
            "lv",
            "ms",
            "nb",
            "nl",
            "pl",
            "pt",
            "ro",
            "sh",
            "sk",
            "sl",
            "sv",
            "tr",
            "vi",
        ],
        "LATIN",
    ),
    **dict.fromkeys(["bg", "mk", "ru", "uk"], "CYRILLIC"),
    **dict.fromkeys(["ar", "fa", "ur"], "ARABIC"),
    "el": "GREEK",
    "he": "HEBREW",
    "hi": "DEVANAGARI",
    "bn": "BENGALI",
    "ta": "TAMIL",
    "zh": "CJK",
    "ja": "CJK",
    "ko": "HANGUL",
}
"""The script each wordfreq language is written in: a token is looked up in the languages
of its own script only (a list of another script does not hold it)."""

NEEDS = {"zh": "jieba", "ja": "MeCab", "ko": "MeCab"}
"""Languages whose lists wordfreq reads only with a tokenizer installed apart."""


@functools.cache
def languages() -> tuple[str, ...]:
    """The wordfreq languages that score text here (those whose tokenizer is installed)."""
    from importlib.util import find_spec

    from wordfreq import available_languages

    return tuple(
        lang
        for lang in sorted(available_languages())
        if lang not in NEEDS or find_spec(NEEDS[lang]) is not None
    )


def language_of(token: str) -> str | None:
    """The wordfreq language a token is scored in (None: its script has no usable list)."""
    lang = SCRIPT_LANGUAGES.get(script_of(token) or "")
    return lang if lang is not None and lang in languages() else None


def token_zipf(tokens: Sequence[str]) -> npt.NDArray[np.float64]:
    """[vocab] Zipf frequency of each token's text (surrounding spaces removed) in its own
    script's language; 0 for a token its language does not know or whose script has none."""
    from wordfreq import zipf_frequency

    out = np.zeros(len(tokens), dtype=np.float64)
    for i, t in enumerate(tokens):
        lang = language_of(t) if t.strip() else None
        if lang is not None:
            out[i] = zipf_frequency(t.strip(), lang)
    return out


english_zipf = token_zipf
"""The former name of ``token_zipf`` (it scored every token in English)."""


def unknown(tokens: Sequence[str]) -> list[str]:
    """The tokens no wordfreq language knows: zero in their own script's language and in
    every other usable language written in that script, or of a script wordfreq has no
    usable list for (punctuation and symbols: no script). Meant for a few tokens (a
    top-k list): an unknown Latin token reads every Latin-script list once."""
    from wordfreq import zipf_frequency

    out = []
    for t in tokens:
        text, script, own = t.strip(), script_of(t), language_of(t)
        others = [
            lang
            for lang in languages()
            if lang != own and script is not None and SCRIPT_OF_LANGUAGE.get(lang) == script
        ]
        if text and any(zipf_frequency(text, lang) > 0 for lang in ([own] if own else []) + others):
            continue
        out.append(t)
    return out


WORDS = 50_000
"""How many of a language's most frequent words count as its words (``is_word``)."""


@functools.cache
def word_list(lang: str) -> frozenset[str]:
    """The ``WORDS`` most frequent words wordfreq lists for ``lang`` (lower case)."""
    from wordfreq import top_n_list

    return frozenset(top_n_list(lang, WORDS))


def is_word(text: str) -> bool:
    """Whether ``text`` (lower-cased) is among the ``WORDS`` most frequent words of the
    language its script is scored in; False where its script has no usable list."""
    lang = language_of(text)
    return lang is not None and text.strip().lower() in word_list(lang)
