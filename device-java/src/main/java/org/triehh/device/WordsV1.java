package org.triehh.device;

import java.util.ArrayList;
import java.util.List;

/**
 * The {@code words-v1} tokenisation rule (docs/protocol.md §1, "The words-v1 tokenisation rule";
 * the Python {@code triehh_beam.protocol.items.tokenize}): words (letters and numbers of one script,
 * joined by apostrophes or zero-width joiners, with their combining marks), pictographic symbols
 * (with skin tones, tags and zero-width-joined sequences) and flags (two regional indicators), in
 * order of appearance, repeats included, each NFC-normalised.
 */
final class WordsV1 {
  private static final int WORD = 0, MARK = 1, SYMBOL = 2, FLAG = 3, SKIN = 4, TAG = 5, APOSTROPHE = 6,
      JOINER = 7, IGNORED = 8, SEPARATOR = 9;
  private static final int OTHER = 0, HAN = 1, HIRAGANA = 2, KATAKANA = 3, HANGUL = 4, CONTINUES = 5;
  private static final int NONE = -1;

  private static final int[][] SCRIPT_RANGES = {
      {0x3400, 0x4DBF, HAN}, {0x4E00, 0x9FFF, HAN}, {0xF900, 0xFAFF, HAN}, {0x20000, 0x323AF, HAN},
      {0x3005, 0x3005, CONTINUES}, {0x3007, 0x3007, HAN}, {0x3021, 0x3029, HAN}, {0x3038, 0x303B, HAN},
      {0x3041, 0x309C, HIRAGANA}, {0x309D, 0x309E, CONTINUES}, {0x309F, 0x309F, HIRAGANA},
      {0x30A0, 0x30FB, KATAKANA}, {0x30FC, 0x30FE, CONTINUES}, {0x30FF, 0x30FF, KATAKANA},
      {0x31F0, 0x31FF, KATAKANA}, {0xFF66, 0xFF6F, KATAKANA}, {0xFF70, 0xFF70, CONTINUES},
      {0xFF71, 0xFF9D, KATAKANA}, {0x1100, 0x11FF, HANGUL}, {0x3130, 0x318F, HANGUL},
      {0xA960, 0xA97F, HANGUL}, {0xAC00, 0xD7AF, HANGUL}, {0xD7B0, 0xD7FF, HANGUL}, {0xFFA0, 0xFFDC, HANGUL},
  };

  private WordsV1() {}

  private static int script(int code) {
    for (int[] range : SCRIPT_RANGES) {
      if (range[0] <= code && code <= range[1]) {
        return range[2];
      }
    }
    return OTHER;
  }

  private static boolean inEmojiBlock(int code) {
    return (0x1F000 <= code && code <= 0x1FAFF) || (0x2600 <= code && code <= 0x27BF);
  }

  private static int classify(int code) {
    if (code == '\'' || code == 0x2019) {
      return APOSTROPHE;
    }
    if (code == 0x200C || code == 0x200D) {
      return JOINER;
    }
    if (0x1F3FB <= code && code <= 0x1F3FF) {
      return SKIN;
    }
    if (0x1F1E6 <= code && code <= 0x1F1FF) {
      return FLAG;
    }
    if (0xE0020 <= code && code <= 0xE007F) {
      return TAG;
    }
    if (code == 0x200B) {
      return SEPARATOR;
    }
    return switch (Unicode.charClass(code)) {
      case Unicode.WORD -> WORD;
      case Unicode.MARK -> MARK;
      case Unicode.SYMBOL -> SYMBOL;
      case Unicode.UNASSIGNED -> inEmojiBlock(code) ? SYMBOL : SEPARATOR;
      case Unicode.FORMAT -> IGNORED;
      default -> SEPARATOR;
    };
  }

  /** The tokens of {@code text}: non-empty, NFC, in order, repeats included. */
  static List<String> tokenize(String text) {
    return new Tokenizer().run(Unicode.nfc(text));
  }

  private static final class Tokenizer {
    final List<String> tokens = new ArrayList<>();
    final StringBuilder current = new StringBuilder();
    int kind = NONE;
    int script = OTHER;
    int pending = NONE; // a joiner (code point) after the open token, kept if the token goes on

    void close() {
      if (current.length() > 0) {
        tokens.add(current.toString());
        current.setLength(0);
      }
      kind = NONE;
      pending = NONE;
    }

    List<String> run(String text) {
      text.codePoints().forEach(this::step);
      close();
      return tokens;
    }

    void step(int c) {
      int cls = classify(c);
      switch (cls) {
        case IGNORED -> { }
        case WORD -> {
          int charScript = script(c);
          if (kind == WORD && (charScript == script || charScript == CONTINUES)) {
            if (pending != NONE) {
              current.appendCodePoint(pending);
              pending = NONE;
            }
            current.appendCodePoint(c);
            return;
          }
          close();
          kind = WORD;
          script = charScript == CONTINUES ? OTHER : charScript;
          current.appendCodePoint(c);
        }
        case MARK -> {
          if (kind != NONE && pending == NONE) {
            current.appendCodePoint(c);
          } else {
            close();
          }
        }
        case SYMBOL -> {
          if (kind == SYMBOL && pending == 0x200D) {
            current.appendCodePoint(pending).appendCodePoint(c);
            pending = NONE;
            return;
          }
          close();
          kind = SYMBOL;
          current.appendCodePoint(c);
        }
        case FLAG -> {
          if (kind == FLAG && current.codePointCount(0, current.length()) == 1 && pending == NONE) {
            current.appendCodePoint(c);
            close();
            return;
          }
          close();
          kind = FLAG;
          current.appendCodePoint(c);
        }
        case SKIN, TAG -> {
          if (kind == SYMBOL && pending == NONE) {
            current.appendCodePoint(c);
          } else {
            close();
          }
        }
        case APOSTROPHE -> {
          if (kind == WORD && pending == NONE) {
            pending = '\'';
          } else {
            close();
          }
        }
        case JOINER -> {
          if ((kind == WORD || kind == SYMBOL) && pending == NONE) {
            pending = c;
          } else {
            close();
          }
        }
        default -> close();
      }
    }
  }
}
