package org.triehh.device;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import triehh_beam.Federated.RoundAnnouncement;

/**
 * Reads the front-coded frontier of a {@code RoundAnnouncement} (docs/federated_protocol.md, the
 * Python {@code front_coding.front_decode}), refusing any coding but the canonical one.
 */
final class FrontCoding {
  private FrontCoding() {}

  /**
   * The prefixes of {@code width} units the announcement's frontier fields hold, in order.
   *
   * @throws IllegalArgumentException the fields are not the canonical front coding of a set of
   *     {@code width}-unit prefixes
   */
  static List<byte[][]> decode(RoundAnnouncement message, int width) {
    List<Integer> lengths = message.getFrontierUnitLengthsList();
    byte[] units = message.getFrontierUnits().toByteArray();
    long unitWidth = Integer.toUnsignedLong(message.getFrontierUnitWidth());
    if (unitWidth != 0 && !lengths.isEmpty()) {
      throw new IllegalArgumentException("both a unit width and unit lengths");
    }
    if (new HashSet<>(lengths).size() == 1) {
      throw new IllegalArgumentException("unit lengths all equal where a unit width is written");
    }
    long available = unitWidth != 0 ? units.length / unitWidth : lengths.size();
    List<byte[][]> prefixes = new ArrayList<>();
    byte[][] previous = new byte[0][];
    long unit = 0;
    long offset = 0;
    List<Integer> shared = message.getFrontierSharedList();
    for (int i = 0; i < shared.size(); i++) {
      long common = Integer.toUnsignedLong(shared.get(i));
      if ((i == 0 && common != 0) || (i > 0 && common >= width)) {
        throw new IllegalArgumentException("prefix " + i + " shares " + common + " units with the previous one");
      }
      long fresh = width - common;
      if (unit + fresh > available) {
        throw new IllegalArgumentException("prefix " + i + ": too few units written");
      }
      byte[][] prefix = Arrays.copyOf(previous, width); // width <= the units written, checked above
      for (long k = unit; k < unit + fresh; k++) {
        long length = unitWidth != 0 ? unitWidth : Integer.toUnsignedLong(lengths.get((int) k));
        if (length < 1 || offset + length > units.length) {
          throw new IllegalArgumentException("prefix " + i + ": a unit of " + length + " bytes at byte " + offset);
        }
        prefix[(int) (common + k - unit)] = Arrays.copyOfRange(units, (int) offset, (int) (offset + length));
        offset += length;
      }
      unit += fresh;
      if (i > 0 && UnitSequence.compareUnits(prefix[(int) common], previous[(int) common]) <= 0) {
        throw new IllegalArgumentException("prefix " + i + " does not come after the previous one (not canonical)");
      }
      prefixes.add(prefix);
      previous = prefix;
    }
    if (unit != available || offset != units.length) {
      throw new IllegalArgumentException("units or unit bytes left over");
    }
    return prefixes;
  }
}
