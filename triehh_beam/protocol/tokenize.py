"""Words from free text: the tokenisation rule an ``ItemEncoder(tokenize=True)`` applies.

When a record's item is a piece of text (a message, a search query) rather than one word, the
items to discover are its *tokens*. ``tokenize(text)`` is a pure function of the text and of
Python's Unicode database, so a device and the pipeline that use the same rule produce the same
items. The rule has a name, ``TOKENIZER_ID`` (``"words-v1"``), recorded with the encoding: a
later, different rule gets a new name, so a trie is never extended with tokens of another rule.

The rule, ``words-v1``. The text is NFC-normalised, then read character by character:

* **Words** are runs of letters and numbers (Unicode categories ``L*`` and ``N*``), with the
  combining marks (``M*``) that follow them: ``café``, ``naïve``, ``Ölçü``, ``привет``,
  ``नमस्ते`` (virama and vowel signs are marks), ``x²``, ``2024``, ``iPhone15``.
* **Apostrophes** (U+0027 ``'`` and U+2019 ``’``) and the zero-width (non-)joiners (U+200C,
  U+200D, needed inside Persian and Indic words) stay in a word when a letter or number follows
  them at once: ``don't``, ``rock'n'roll``, ``می‌خواهم``. U+2019 is written as U+0027, so
  ``don’t`` (smart quote) and ``don't`` are the same token. A leading or trailing apostrophe is
  dropped: ``'90s`` -> ``90s``, ``users'`` -> ``users``.
* **Everything else separates words and is dropped**: white space, punctuation (so hyphens
  split, ``well-known`` -> ``well``, ``known``; ``U.S.A.`` -> ``U``, ``S``, ``A``; ``3.14`` ->
  ``3``, ``14``; ``user_name`` -> ``user``, ``name``), math, currency and modifier symbols
  (``+``, ``€``, ``^``), control characters, private-use characters and U+200B (zero-width
  space, a word boundary in Thai or Khmer text). Other invisible format characters (soft
  hyphen, bidi marks, word joiner, BOM: category ``Cf``) are ignored: they neither split a
  word nor appear in it.
* **Emoji and other pictographic symbols** (category ``So``) are tokens of their own, one per
  emoji: the variation selectors, skin-tone modifiers (U+1F3FB..U+1F3FF), combining keycap and
  tag characters that follow a symbol belong to it, and a zero-width joiner between two
  symbols joins them, so ``❤️``, ``👍🏽``, ``👨‍👩‍👧``, ``🏳️‍🌈`` and ``🏴󠁧󠁢󠁳󠁣󠁴󠁿`` are each one token; two regional
  indicators make one flag token (``🇫🇷🇩🇪`` -> ``🇫🇷``, ``🇩🇪``); ``😂😂`` is two tokens. A digit keycap
  (``1️⃣``) is a word (the digit with its marks); ``#️⃣`` and ``*️⃣`` give nothing. Unassigned code
  points in the emoji blocks (U+1F000..U+1FAFF, U+2600..U+27BF) count as symbols, so emoji newer
  than Python's Unicode database still tokenise.
* **CJK**: Han, Hiragana, Katakana and Hangul are letters, but a word never mixes two of these
  scripts (or one of them with any other script): a change of script ends the word.
  ``東京タワーに行きました`` -> ``東京``, ``タワー``, ``に``, ``行``, ``きました``. A run of Han characters is
  one token: the rule has no dictionary, so Chinese text without spaces or punctuation yields
  clause-long tokens, which are dropped (or truncated) by the encoder's ``max_length`` like any
  long item. Segment such text with a dictionary segmenter before it reaches the records when
  words are what you want. The prolonged sound mark ``ー`` and the iteration marks (``々``, ``ゝ``,
  ``ヽ``) continue the word they follow.
* Case is kept (``ItemEncoder(case_fold=True)`` folds it after tokenisation), right-to-left
  text (Arabic, Hebrew) is tokenised in logical (stored) order like any other, and nothing is
  counted twice: the tokens of ``"the cat the"`` are ``the``, ``cat``, ``the``.

Characters are classified with ``unicodedata`` (``unicodedata.unidata_version`` of the running
Python): characters added to Unicode later than that version are unassigned to it and separate
words (except in the emoji blocks above).

This module is pure Python (no Beam import).
"""

from __future__ import annotations

import functools
import unicodedata
from typing import List, Optional, Tuple

__all__ = ["TOKENIZER_ID", "tokenize"]

TOKENIZER_ID = "words-v1"

# Character classes.
_WORD = 0  # letter or number
_MARK = 1  # combining mark: extends the token before it
_SYMBOL = 2  # So: a pictographic symbol, starts a symbol token
_FLAG = 3  # regional indicator: two make a flag
_SKIN = 4  # emoji skin-tone modifier: extends a symbol token
_TAG = 5  # tag character: extends a symbol token (subdivision flags)
_APOSTROPHE = 6  # joins two parts of a word
_JOINER = 7  # ZWJ/ZWNJ: joins two parts of a word, or two symbols (ZWJ)
_IGNORED = 8  # invisible format character: skipped
_SEPARATOR = 9  # everything else: ends the token

# Scripts a word may not mix (anything else is _OTHER); _CONTINUES takes the previous one.
_OTHER, _HAN, _HIRAGANA, _KATAKANA, _HANGUL, _CONTINUES = range(6)

_SCRIPT_RANGES = (
    ((0x3400, 0x4DBF), _HAN),
    ((0x4E00, 0x9FFF), _HAN),
    ((0xF900, 0xFAFF), _HAN),
    ((0x20000, 0x323AF), _HAN),
    ((0x3005, 0x3005), _CONTINUES),  # 々 ideographic iteration mark
    ((0x3007, 0x3007), _HAN),  # 〇
    ((0x3021, 0x3029), _HAN),  # Hangzhou numerals
    ((0x3038, 0x303B), _HAN),
    ((0x3041, 0x309C), _HIRAGANA),
    ((0x309D, 0x309E), _CONTINUES),  # ゝゞ hiragana iteration marks
    ((0x309F, 0x309F), _HIRAGANA),
    ((0x30A0, 0x30FB), _KATAKANA),
    ((0x30FC, 0x30FE), _CONTINUES),  # ー prolonged sound mark, ヽヾ iteration marks
    ((0x30FF, 0x30FF), _KATAKANA),
    ((0x31F0, 0x31FF), _KATAKANA),
    ((0xFF66, 0xFF6F), _KATAKANA),  # halfwidth katakana (NFC keeps them)
    ((0xFF70, 0xFF70), _CONTINUES),  # halfwidth prolonged sound mark
    ((0xFF71, 0xFF9D), _KATAKANA),
    ((0x1100, 0x11FF), _HANGUL),
    ((0x3130, 0x318F), _HANGUL),
    ((0xA960, 0xA97F), _HANGUL),
    ((0xAC00, 0xD7AF), _HANGUL),
    ((0xD7B0, 0xD7FF), _HANGUL),
    ((0xFFA0, 0xFFDC), _HANGUL),
)

_EMOJI_BLOCKS = ((0x1F000, 0x1FAFF), (0x2600, 0x27BF))


def _script(code: int) -> int:
    for (low, high), script in _SCRIPT_RANGES:
        if low <= code <= high:
            return script
    return _OTHER


@functools.lru_cache(maxsize=8192)
def _classify(char: str) -> Tuple[int, int]:
    """(character class, script) of one character."""
    code = ord(char)
    if char in "'\u2019":
        return _APOSTROPHE, _OTHER
    if char in "\u200c\u200d":
        return _JOINER, _OTHER
    if 0x1F3FB <= code <= 0x1F3FF:
        return _SKIN, _OTHER
    if 0x1F1E6 <= code <= 0x1F1FF:
        return _FLAG, _OTHER
    if 0xE0020 <= code <= 0xE007F:
        return _TAG, _OTHER
    if char == "\u200b":
        return _SEPARATOR, _OTHER
    category = unicodedata.category(char)
    if category[0] in "LN":
        return _WORD, _script(code)
    if category[0] == "M":
        return _MARK, _OTHER
    if category == "So" or (
        category == "Cn" and any(low <= code <= high for low, high in _EMOJI_BLOCKS)
    ):
        return _SYMBOL, _OTHER
    if category == "Cf":
        return _IGNORED, _OTHER
    return _SEPARATOR, _OTHER


def tokenize(text: str) -> List[str]:
    """The tokens of ``text`` under the ``words-v1`` rule (see the module docstring).

    Args:
      text: any string.

    Returns:
      The tokens in order of appearance, repeats included; an empty list for text without
      words or symbols. Every token is non-empty and NFC-normalised.

    Raises:
      TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize expects str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text)
    tokens: List[str] = []
    current: List[str] = []
    kind: Optional[int] = None  # _WORD, _SYMBOL or _FLAG while a token is open
    script = _OTHER  # the open word's script
    pending: Optional[str] = None  # a joiner after the open token, kept if the token goes on

    def close() -> None:
        nonlocal kind, pending
        if current:
            tokens.append("".join(current))
            current.clear()
        kind, pending = None, None

    for char in text:
        cls, char_script = _classify(char)
        if cls == _IGNORED:
            continue
        if cls == _WORD:
            if kind == _WORD and char_script in (script, _CONTINUES):
                if pending is not None:
                    current.append(pending)
                    pending = None
                current.append(char)
                continue
            close()  # also where the script changes: 東京|タワー
            kind, script = _WORD, (_OTHER if char_script == _CONTINUES else char_script)
            current.append(char)
        elif cls == _MARK:
            if kind is not None and pending is None:
                current.append(char)
            else:
                close()  # a mark with nothing to attach to is dropped
        elif cls == _SYMBOL:
            if kind == _SYMBOL and pending == "\u200d":
                current.extend((pending, char))
                pending = None
                continue
            close()
            kind = _SYMBOL
            current.append(char)
        elif cls == _FLAG:
            if kind == _FLAG and len(current) == 1 and pending is None:
                current.append(char)
                close()
                continue
            close()
            kind = _FLAG
            current.append(char)
        elif cls in (_SKIN, _TAG):
            if kind == _SYMBOL and pending is None:
                current.append(char)
            else:
                close()
        elif cls == _APOSTROPHE:
            if kind == _WORD and pending is None:
                pending = "'"
            else:
                close()
        elif cls == _JOINER:
            if kind in (_WORD, _SYMBOL) and pending is None:
                pending = char
            else:
                close()
        else:
            close()
    close()
    return tokens
