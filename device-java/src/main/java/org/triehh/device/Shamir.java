package org.triehh.device;

/**
 * t-of-n Shamir sharing of byte strings over GF(2^31 - 1), the Python reference's
 * ({@code triehh_beam/protocol/secagg/shamir.py}): the secret cut into 3-byte chunks (big-endian,
 * zero-padded), each shared with its own polynomial of degree t - 1, a share one 31-bit value per
 * chunk (4 bytes each, big-endian); the x-coordinates are the holders' indices in their cohort.
 * The coefficients are drawn chunk by chunk, coefficient 1 to t - 1, as 31-bit big-endian words
 * (the one word equal to the prime redrawn), so a seeded source gives the Python shares.
 */
final class Shamir {
  static final long PRIME = (1L << 31) - 1;

  private Shamir() {}

  /** The bytes of one share of a {@code secretLength}-byte secret. */
  static int shareBytes(int secretLength) {
    return 4 * ((secretLength + 2) / 3);
  }

  /** {@code count} uniform field elements: 31-bit words, the value p redrawn. */
  static long[] randomField(RandomBytes random, int count) {
    long[] out = new long[count];
    int filled = 0;
    while (filled < count) {
      byte[] raw = random.next(4 * (count - filled));
      for (int i = 0; i < raw.length; i += 4) {
        long word = ((raw[i] & 0x7FL) << 24) | ((raw[i + 1] & 0xFFL) << 16) | ((raw[i + 2] & 0xFFL) << 8)
            | (raw[i + 3] & 0xFFL);
        if (word != PRIME) {
          out[filled++] = word;
        }
      }
    }
    return out;
  }

  /**
   * The shares of {@code secret} at {@code xs} (sorted, distinct, in [1, p)): {@code shares[i]}
   * is the share of {@code xs[i]}; any {@code threshold} of them recover the secret.
   */
  static byte[][] split(byte[] secret, int threshold, int[] xs, RandomBytes random) {
    int chunks = (secret.length + 2) / 3;
    byte[] padded = java.util.Arrays.copyOf(secret, 3 * chunks);
    long[] coefficients = randomField(random, chunks * (threshold - 1));
    byte[][] shares = new byte[xs.length][4 * chunks];
    for (int c = 0; c < chunks; c++) {
      long constant = ((padded[3 * c] & 0xFFL) << 16) | ((padded[3 * c + 1] & 0xFFL) << 8) | (padded[3 * c + 2] & 0xFFL);
      for (int i = 0; i < xs.length; i++) {
        long x = xs[i];
        long value = 0;
        for (int degree = threshold - 2; degree >= 0; degree--) {
          value = (value * x + coefficients[c * (threshold - 1) + degree]) % PRIME;
        }
        value = (value * x + constant) % PRIME;
        shares[i][4 * c] = (byte) (value >>> 24);
        shares[i][4 * c + 1] = (byte) (value >>> 16);
        shares[i][4 * c + 2] = (byte) (value >>> 8);
        shares[i][4 * c + 3] = (byte) value;
      }
    }
    return shares;
  }
}
