package org.triehh.device;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.regex.Pattern;
import triehh_beam.TrieOuterClass.Encoding;

/**
 * How items become unit sequences (docs/protocol.md, "Items as sequences of units"; the Python
 * {@code ItemEncoder}): text (NFC, optionally case-folded, optionally the {@code words-v1}
 * tokens of the text), bytes, or integers as offset binary of {@code intBits} digits, cut into
 * units of {@code unitSize} characters, bytes or bits, then the empty terminator unit.
 */
final class ItemEncoder {
  enum Kind { TEXT, BYTES, INT }

  static final String TOKENIZER_ID = "words-v1";
  private static final Pattern DECIMAL = Pattern.compile("[+-]?[0-9]+");
  private static final byte[] EOS = new byte[0];

  final Kind kind;
  final int unitSize;
  final int maxLength;
  final boolean caseFold;
  final int intBits;
  final boolean tokenize;

  private ItemEncoder(Kind kind, int unitSize, int maxLength, boolean caseFold, int intBits, boolean tokenize) {
    this.kind = kind;
    this.unitSize = unitSize;
    this.maxLength = maxLength;
    this.caseFold = caseFold;
    this.intBits = intBits;
    this.tokenize = tokenize;
  }

  /**
   * The encoder an {@code Encoding} message describes.
   *
   * @throws IllegalArgumentException an unknown kind or tokenizer, or parameters out of range
   *     (as the Python {@code ItemEncoder} refuses them)
   */
  static ItemEncoder fromProto(Encoding message) {
    Kind kind = switch (message.getKindValue()) {
      case Encoding.Kind.TEXT_VALUE -> Kind.TEXT;
      case Encoding.Kind.BYTES_VALUE -> Kind.BYTES;
      case Encoding.Kind.INT_VALUE -> Kind.INT;
      default -> throw new IllegalArgumentException("unknown or unspecified encoding kind " + message.getKindValue());
    };
    String tokenizer = message.getTokenizer();
    if (!tokenizer.isEmpty() && !tokenizer.equals(TOKENIZER_ID)) {
      throw new IllegalArgumentException("unknown tokenizer " + tokenizer);
    }
    long unitSize = Integer.toUnsignedLong(message.getUnitSize());
    long maxLength = Integer.toUnsignedLong(message.getMaxLength());
    long intBits = Integer.toUnsignedLong(message.getIntBits());
    boolean tokenize = !tokenizer.isEmpty();
    if (unitSize < 1) {
      throw new IllegalArgumentException("unit_size must be >= 1");
    }
    if (maxLength < 2) {
      throw new IllegalArgumentException("max_length must be >= 2");
    }
    if ((message.getCaseFold() || tokenize) && kind != Kind.TEXT) {
      throw new IllegalArgumentException("case_fold and tokenize apply to text items only");
    }
    if (kind != Kind.INT) {
      if (intBits != 0) {
        throw new IllegalArgumentException("int_bits applies to integer items only");
      }
      // Larger sizes than an int holds cannot be met by any item: clamp, same behaviour.
      return new ItemEncoder(kind, (int) Math.min(unitSize, Integer.MAX_VALUE),
          (int) Math.min(maxLength, Integer.MAX_VALUE), message.getCaseFold(), 0, tokenize);
    }
    long bits = intBits == 0 ? 64 : intBits;
    if (bits > 64) {
      throw new IllegalArgumentException("int_bits must be from 1 to 64");
    }
    if (unitSize > Math.min(16, bits)) {
      throw new IllegalArgumentException("unit_size for integers is 1 to min(16, int_bits)");
    }
    long units = (bits + unitSize - 1) / unitSize;
    if (maxLength > units + 1) {
      throw new IllegalArgumentException("max_length is more than an integer's units and the terminator");
    }
    return new ItemEncoder(kind, (int) unitSize, (int) maxLength, false, (int) bits, false);
  }

  /** Integers only: the units of every value. */
  int intUnits() {
    return (intBits + unitSize - 1) / unitSize;
  }

  /** The items a record's value holds (its tokens with {@code words-v1}), or null for none. */
  List<Object> itemsOf(Object value) {
    if (!tokenize) {
      return Collections.singletonList(value);
    }
    if (!(value instanceof String text)) {
      return null;
    }
    return new ArrayList<>(WordsV1.tokenize(text));
  }

  /**
   * The item's sequence, terminator included; with {@code truncate} a too-long item's first
   * {@code maxLength} units without terminator. Null when the item contributes nothing: of the
   * wrong type, empty, out of range, not valid UTF-8, or (without {@code truncate}) too long.
   */
  UnitSequence encode(Object item, boolean truncate) {
    List<byte[]> body = units(item);
    if (body == null) {
      return null;
    }
    if (body.size() + 1 > maxLength) {
      return truncate ? UnitSequence.of(body.subList(0, maxLength)) : null;
    }
    body.add(EOS);
    return UnitSequence.of(body);
  }

  private List<byte[]> units(Object item) {
    return switch (kind) {
      case TEXT -> textUnits(item);
      case BYTES -> byteUnits(item);
      case INT -> intUnits(item);
    };
  }

  private List<byte[]> textUnits(Object item) {
    if (!(item instanceof String text)) {
      return null;
    }
    if (Unicode.isAscii(text)) {
      text = caseFold ? Unicode.asciiLower(text) : text;
    } else {
      text = Unicode.nfc(text);
      if (caseFold) {
        text = Unicode.nfc(Unicode.casefold(text));
      }
      if (Unicode.hasLoneSurrogate(text)) {
        return null;
      }
    }
    if (text.isEmpty()) {
      return null;
    }
    int[] codePoints = text.codePoints().toArray();
    List<byte[]> out = new ArrayList<>();
    for (int i = 0; i < codePoints.length; i += unitSize) {
      int end = (int) Math.min((long) i + unitSize, codePoints.length);
      out.add(new String(codePoints, i, end - i).getBytes(StandardCharsets.UTF_8));
    }
    return out;
  }

  private List<byte[]> byteUnits(Object item) {
    if (!(item instanceof byte[] bytes) || bytes.length == 0) {
      return null;
    }
    List<byte[]> out = new ArrayList<>();
    for (int i = 0; i < bytes.length; i += unitSize) {
      out.add(java.util.Arrays.copyOfRange(bytes, i, (int) Math.min((long) i + unitSize, bytes.length)));
    }
    return out;
  }

  private List<byte[]> intUnits(Object item) {
    BigInteger value = intValue(item);
    if (value == null) {
      return null;
    }
    BigInteger half = BigInteger.ONE.shiftLeft(intBits - 1);
    if (value.compareTo(half.negate()) < 0 || value.compareTo(half) >= 0) {
      return null;
    }
    String digits = value.add(half).toString(2);
    StringBuilder padded = new StringBuilder(intBits);
    for (int i = digits.length(); i < intBits; i++) {
      padded.append('0');
    }
    String bits = padded.append(digits).toString();
    List<byte[]> out = new ArrayList<>();
    for (int i = 0; i < bits.length(); i += unitSize) {
      out.add(bits.substring(i, Math.min(i + unitSize, bits.length())).getBytes(StandardCharsets.US_ASCII));
    }
    return out;
  }

  private static BigInteger intValue(Object item) {
    if (item instanceof String text) {
      String stripped = Unicode.strip(text);
      return DECIMAL.matcher(stripped).matches() ? new BigInteger(stripped) : null;
    }
    if (item instanceof BigInteger big) {
      return big;
    }
    if (item instanceof Long || item instanceof Integer || item instanceof Short || item instanceof Byte) {
      return BigInteger.valueOf(((Number) item).longValue());
    }
    return null;
  }

  /**
   * Why {@code prefix} cannot be a prefix of a sequence this encoder makes, or null if it can
   * (the Python {@code ItemEncoder.prefix_problem}); text units must be valid UTF-8 already.
   */
  String prefixProblem(UnitSequence prefix) {
    int n = prefix.size();
    if (n > maxLength) {
      return "more units than max_length";
    }
    for (int i = 0; i < n; i++) {
      byte[] unit = prefix.unit(i);
      long length = unit.length;
      if (kind == Kind.TEXT) {
        String text = Unicode.decodeUtf8(unit);
        length = text.codePointCount(0, text.length());
      }
      if (length > unitSize) {
        return "unit " + i + " is longer than unit_size";
      }
      if (length == 0) {
        if (i != n - 1) {
          return "the terminator before the end";
        }
        if (i == 0) {
          return "the empty item";
        }
      } else if (length < unitSize && i + 1 < n && prefix.unit(i + 1).length > 0) {
        return "unit " + i + " is short but not the item's last";
      }
    }
    return kind == Kind.INT ? intPrefixProblem(prefix) : null;
  }

  private String intPrefixProblem(UnitSequence prefix) {
    int n = intUnits();
    int last = intBits - unitSize * (n - 1);
    for (int i = 0; i < prefix.size(); i++) {
      byte[] unit = prefix.unit(i);
      if (unit.length == 0) {
        if (i != n) {
          return "the terminator after " + i + " units";
        }
        continue;
      }
      for (byte b : unit) {
        if (b != '0' && b != '1') {
          return "unit " + i + " holds something other than binary digits";
        }
      }
      if (i >= n) {
        return "more units than an integer has";
      }
      if (unit.length != (i == n - 1 ? last : unitSize)) {
        return "unit " + i + " has the wrong number of bits";
      }
    }
    return null;
  }
}
