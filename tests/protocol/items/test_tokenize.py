"""The tokenisation rule ``words-v1``: words, apostrophes, joiners, emoji, CJK script changes,
separators, and only text accepted."""

import unicodedata

import pytest

from triehh_beam.protocol.items.tokenize import TOKENIZER_ID, tokenize


TOKEN_CASES = [
    ("Hello, world!", ["Hello", "world"]),
    ("don't stop", ["don't", "stop"]),
    ("don\u2019t", ["don't"]),  # the typographic apostrophe is written as U+0027
    ("'90s users' rock'n'roll", ["90s", "users", "rock'n'roll"]),
    ("well-known e-mail", ["well", "known", "e", "mail"]),  # hyphens split
    ("U.S.A. 3.14 user_name", ["U", "S", "A", "3", "14", "user", "name"]),
    ("café naïve", ["café", "naïve"]),
    ("cafe\u0301", ["café"]),  # NFC
    ("Ёжик в тумане", ["Ёжик", "в", "тумане"]),
    ("नमस्ते दुनिया", ["नमस्ते", "दुनिया"]),  # marks stay in their word
    ("x² ½", ["x²", "½"]),
    ("مرحبا بالعالم", ["مرحبا", "بالعالم"]),
    ("שָׁלוֹם עולם", ["שָׁלוֹם", "עולם"]),
    ("می\u200cخواهم", ["می\u200cخواهم"]),  # ZWNJ inside a Persian word
    ("東京タワーに行きました", ["東京", "タワー", "に", "行", "きました"]),
    ("我爱北京天安门", ["我爱北京天安门"]),  # a Han run is one token
    ("서울 특별시", ["서울", "특별시"]),
    ("iPhone15 2024年", ["iPhone15", "2024", "年"]),
    ("😂😂 ok👍🏽", ["😂", "😂", "ok", "👍🏽"]),
    ("👨\u200d👩\u200d👧 family", ["👨\u200d👩\u200d👧", "family"]),
    ("🏳\ufe0f\u200d🌈", ["🏳\ufe0f\u200d🌈"]),
    ("❤\ufe0f", ["❤\ufe0f"]),
    ("🇫🇷🇩🇪", ["🇫🇷", "🇩🇪"]),
    ("🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
     ["🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"]),
    ("1\ufe0f\u20e3 #\ufe0f\u20e3", ["1\ufe0f\u20e3"]),
    ("co\u00adoperate", ["cooperate"]),  # soft hyphen ignored
    ("a\u200bb", ["a", "b"]),  # zero-width space separates
    ("price: 5€ + tax", ["price", "5", "tax"]),
    ("\u0301orphan mark", ["orphan", "mark"]),
    ("the cat the", ["the", "cat", "the"]),
    ("", []),
    (" \t\n ", []),
]


@pytest.mark.parametrize("text,expected", TOKEN_CASES)
def test_tokenisation_rule(text, expected):
    tokens = tokenize(text)
    assert tokens == expected
    assert all(t and unicodedata.is_normalized("NFC", t) for t in tokens)


def test_tokenize_refuses_non_text():
    with pytest.raises(TypeError):
        tokenize(b"bytes")


def test_the_rule_has_a_name():
    assert TOKENIZER_ID == "words-v1"
