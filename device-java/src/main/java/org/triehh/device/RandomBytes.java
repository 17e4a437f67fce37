package org.triehh.device;

import java.security.SecureRandom;

/**
 * Where a device's secure-aggregation secrets come from: {@link #secure()} in production; a
 * seeded source only in tests, to replay the shared test vectors.
 */
interface RandomBytes {
  /** {@code n} fresh bytes. */
  byte[] next(int n);

  /** The platform's {@link SecureRandom}. */
  static RandomBytes secure() {
    SecureRandom random = new SecureRandom();
    return n -> {
      byte[] out = new byte[n];
      random.nextBytes(out);
      return out;
    };
  }
}
