"""Words from free text: ``tokenize``, the rule ``words-v1`` (``TOKENIZER_ID``) that an
``ItemEncoder(tokenize=True)`` applies, a pure function of the text and Python's Unicode database
so that a device and the pipeline produce the same items; docs/protocol.md §1, "The words-v1
tokenisation rule", states it for ports. A later, different rule gets a new name, so a trie is
never extended with tokens of another rule."""

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
    """The tokens of ``text`` under the ``words-v1`` rule (docs/protocol.md §1).

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
