package org.triehh.device;

import java.math.BigInteger;

/**
 * One record a device holds: an item and its local count (how often the device saw it).
 *
 * <p>The item is a {@link String} (text items), a {@code byte[]} (byte items), or an integer
 * ({@link Long}, {@link Integer}, {@link Short}, {@link Byte} or {@link BigInteger}; decimal text
 * is accepted for integer encodings too). An item the round's encoding cannot encode (of another
 * type, empty, out of range) contributes nothing, exactly as in the central job.
 */
public final class Record {
  private final Object item;
  private final long count;

  /**
   * @param item the item (not copied: a {@code byte[]} must not change afterwards)
   * @param count the local count, at least 0 (0 is ignored)
   * @throws IllegalArgumentException a negative count
   * @throws NullPointerException a null item
   */
  public Record(Object item, long count) {
    if (item == null) {
      throw new NullPointerException("item");
    }
    if (count < 0) {
      throw new IllegalArgumentException("counts must be non-negative integers, got " + count);
    }
    this.item = item;
    this.count = count;
  }

  public Object item() {
    return item;
  }

  public long count() {
    return count;
  }
}
