package org.triehh.device;

/**
 * Python's {@code random.Random(seed).randbytes} for a non-negative seed below 2^32 (MT19937
 * seeded by {@code init_by_array([seed])}; {@code randbytes(n)} is {@code getrandbits(8n)} as
 * little-endian bytes: 32-bit outputs in order, the last one shifted right to the bits still
 * needed): the seeded secrets of the shared secure-aggregation vectors. Tests only; never a
 * device's source of secrets.
 */
final class PythonRandom implements RandomBytes {
  private static final int N = 624;
  private static final int M = 397;
  private final int[] mt = new int[N];
  private int next = N;

  PythonRandom(long seed) {
    if (seed < 0 || seed >= 1L << 32) {
      throw new IllegalArgumentException("a seed in [0, 2^32)");
    }
    mt[0] = 19650218;
    for (int i = 1; i < N; i++) {
      mt[i] = 1812433253 * (mt[i - 1] ^ (mt[i - 1] >>> 30)) + i;
    }
    int i = 1;
    for (int k = N; k > 0; k--) {  // init_by_array with the one-word key [seed]
      mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >>> 30)) * 1664525)) + (int) seed;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1];
        i = 1;
      }
    }
    for (int k = N - 1; k > 0; k--) {
      mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >>> 30)) * 1566083941)) - i;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1];
        i = 1;
      }
    }
    mt[0] = 0x80000000;
  }

  private int word() {
    if (next >= N) {
      for (int k = 0; k < N; k++) {
        int y = (mt[k] & 0x80000000) | (mt[(k + 1) % N] & 0x7fffffff);
        mt[k] = mt[(k + M) % N] ^ (y >>> 1) ^ ((y & 1) == 0 ? 0 : 0x9908b0df);
      }
      next = 0;
    }
    int y = mt[next++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    return y ^ (y >>> 18);
  }

  @Override
  public byte[] next(int n) {
    byte[] out = new byte[n];
    for (int at = 0; at < n; at += 4) {
      int left = Math.min(4, n - at);
      int w = word() >>> (32 - 8 * left);
      for (int b = 0; b < left; b++) {
        out[at + b] = (byte) (w >>> (8 * b));
      }
    }
    return out;
  }
}
