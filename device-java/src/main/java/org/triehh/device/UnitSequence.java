package org.triehh.device;

import java.util.Arrays;
import java.util.List;

/**
 * A sequence of units, or a prefix of one, each unit held as its wire bytes (UTF-8 for text,
 * the bytes for byte items, ASCII {@code 0}/{@code 1} for integers); the empty unit is the
 * end-of-sequence terminator. Ordered unit by unit, each unit by its bytes unsigned (for text
 * that is code point order), a sequence before any it is a prefix of: the order the protocol
 * sorts by (docs/federated_protocol.md, step 4).
 */
final class UnitSequence implements Comparable<UnitSequence> {
  static final UnitSequence EMPTY = new UnitSequence(new byte[0][]);

  private final byte[][] units;
  private final int hash;

  UnitSequence(byte[][] units) {
    this.units = units;
    this.hash = Arrays.deepHashCode(units);
  }

  static UnitSequence of(List<byte[]> units) {
    return new UnitSequence(units.toArray(new byte[0][]));
  }

  int size() {
    return units.length;
  }

  byte[] unit(int i) {
    return units[i];
  }

  /** The first {@code n} units. */
  UnitSequence prefix(int n) {
    return n == units.length ? this : new UnitSequence(Arrays.copyOf(units, n));
  }

  /** Ends with the terminator: a complete item. */
  boolean terminated() {
    return units.length > 0 && units[units.length - 1].length == 0;
  }

  /** Two units compared as unsigned bytes, lexicographically (a unit before any it begins). */
  static int compareUnits(byte[] a, byte[] b) {
    int common = Math.min(a.length, b.length);
    for (int i = 0; i < common; i++) {
      int c = Integer.compare(a[i] & 0xFF, b[i] & 0xFF);
      if (c != 0) {
        return c;
      }
    }
    return Integer.compare(a.length, b.length);
  }

  @Override
  public int compareTo(UnitSequence other) {
    int common = Math.min(units.length, other.units.length);
    for (int i = 0; i < common; i++) {
      int c = compareUnits(units[i], other.units[i]);
      if (c != 0) {
        return c;
      }
    }
    return Integer.compare(units.length, other.units.length);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof UnitSequence other && hash == other.hash && Arrays.deepEquals(units, other.units);
  }

  @Override
  public int hashCode() {
    return hash;
  }

  @Override
  public String toString() {
    StringBuilder out = new StringBuilder("(");
    for (byte[] unit : units) {
      for (byte b : unit) {
        out.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
      }
      out.append(' ');
    }
    return out.append(')').toString();
  }
}
