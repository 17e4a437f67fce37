package org.triehh.device;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.text.Normalizer;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * The Unicode rules the encoding needs, as the Python reference applies them: NFC (the
 * platform's {@link Normalizer}), full case folding ({@code str.casefold}) and the general-category
 * classes of the {@code words-v1} rule, both from tables generated from Python's Unicode
 * database (resources {@code casefold.txt}, {@code char_classes.txt}, written by
 * tests/vectors/generate.py) so that they do not depend on the platform's Unicode version;
 * Python's whitespace ({@code str.strip}); strict UTF-8.
 */
final class Unicode {
  /** Character classes of char_classes.txt. */
  static final char WORD = 'W', MARK = 'M', SYMBOL = 'S', FORMAT = 'F', UNASSIGNED = 'N', OTHER = 'O';

  private static final Map<Integer, int[]> CASEFOLD = new HashMap<>();
  private static final int[] CLASS_STARTS;
  private static final char[] CLASS_OF_RUN;
  private static final int[] SPACES = {0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0,
      0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
      0x2028, 0x2029, 0x202f, 0x205f, 0x3000};

  static {
    for (String line : lines("casefold.txt")) {
      String[] parts = line.split("\t");
      int[] folded = Arrays.stream(parts[1].split(" ")).mapToInt(h -> Integer.parseInt(h, 16)).toArray();
      CASEFOLD.put(Integer.parseInt(parts[0], 16), folded);
    }
    String[] runs = lines("char_classes.txt");
    CLASS_STARTS = new int[runs.length];
    CLASS_OF_RUN = new char[runs.length];
    for (int i = 0; i < runs.length; i++) {
      String[] parts = runs[i].split("\t");
      CLASS_STARTS[i] = Integer.parseInt(parts[0], 16);
      CLASS_OF_RUN[i] = parts[1].charAt(0);
    }
  }

  private Unicode() {}

  private static String[] lines(String resource) {
    try (InputStream in = Unicode.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalStateException("missing resource " + resource);
      }
      BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.US_ASCII));
      return reader.lines().filter(l -> !l.isEmpty() && !l.startsWith("#")).toArray(String[]::new);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static String nfc(String text) {
    return Normalizer.normalize(text, Normalizer.Form.NFC);
  }

  /** Python's {@code str.casefold}: each code point replaced by its full case folding. */
  static String casefold(String text) {
    StringBuilder out = new StringBuilder(text.length());
    text.codePoints().forEach(c -> {
      int[] folded = CASEFOLD.get(c);
      if (folded == null) {
        out.appendCodePoint(c);
      } else {
        for (int f : folded) {
          out.appendCodePoint(f);
        }
      }
    });
    return out.toString();
  }

  /** The words-v1 class of a code point (char_classes.txt). */
  static char charClass(int codePoint) {
    int i = Arrays.binarySearch(CLASS_STARTS, codePoint);
    return CLASS_OF_RUN[i >= 0 ? i : -i - 2];
  }

  static boolean isAscii(String text) {
    for (int i = 0; i < text.length(); i++) {
      if (text.charAt(i) >= 0x80) {
        return false;
      }
    }
    return true;
  }

  /** Python's {@code str.lower} on ASCII text. */
  static String asciiLower(String text) {
    char[] chars = text.toCharArray();
    for (int i = 0; i < chars.length; i++) {
      if (chars[i] >= 'A' && chars[i] <= 'Z') {
        chars[i] = (char) (chars[i] + 32);
      }
    }
    return new String(chars);
  }

  /** Holds an unpaired surrogate (not valid UTF-8). */
  static boolean hasLoneSurrogate(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
          i++;
        } else {
          return true;
        }
      } else if (Character.isLowSurrogate(c)) {
        return true;
      }
    }
    return false;
  }

  static boolean isSpace(int codePoint) {
    return Arrays.binarySearch(SPACES, codePoint) >= 0;
  }

  /** Python's {@code str.strip()}: Python's whitespace removed at both ends. */
  static String strip(String text) {
    int[] cps = text.codePoints().toArray();
    int start = 0;
    int end = cps.length;
    while (start < end && isSpace(cps[start])) {
      start++;
    }
    while (end > start && isSpace(cps[end - 1])) {
      end--;
    }
    return new String(cps, start, end - start);
  }

  /** Strict UTF-8 decoding (no surrogates, no overlong forms), or null if the bytes are not UTF-8. */
  static String decodeUtf8(byte[] raw) {
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(raw))
          .toString();
    } catch (CharacterCodingException e) {
      return null;
    }
  }
}
