package org.triehh.device;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.IvParameterSpec;
import javax.crypto.spec.SecretKeySpec;
import org.bouncycastle.crypto.digests.SHA256Digest;
import org.bouncycastle.crypto.generators.HKDFBytesGenerator;
import org.bouncycastle.crypto.params.HKDFParameters;
import org.bouncycastle.math.ec.rfc7748.X25519;

/**
 * The cryptography of one cohort's secure aggregation, byte for byte the Python reference's
 * ({@code triehh_beam/protocol/secagg/crypto.py}): X25519 (BouncyCastle's RFC 7748
 * implementation, which needs no provider and runs at any Android API level), HKDF-SHA256
 * (BouncyCastle; salt the cohort's context, info the key's purpose), the mask generator (the
 * JCA's AES-256-CTR keystream from a zero counter block, read as little-endian 32-bit words), and
 * the JCA's AES-256-GCM for the shares one device sends another (nonce: sender, receiver, 0 as
 * big-endian 32-bit words; AAD: the context).
 */
final class SecAggCrypto {
  static final int KEY_BYTES = 32;
  static final byte[] MASK_PURPOSE = "triehh-secagg-v1 pairwise mask".getBytes(StandardCharsets.US_ASCII);
  static final byte[] SHARE_PURPOSE = "triehh-secagg-v1 share encryption".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] VERSION = "triehh-secagg-v1".getBytes(StandardCharsets.US_ASCII);

  private SecAggCrypto() {}

  /** A key or ciphertext that does not check: the request that carried it is refused. */
  static final class CryptoException extends Exception {
    private static final long serialVersionUID = 1L;

    CryptoException(String problem) {
      super(problem);
    }
  }

  /**
   * What every key and ciphertext of a cohort's run is bound to: {@code "triehh-secagg-v1"}, the
   * job id's UTF-8 length (4 bytes, big-endian) and bytes, the round and the cohort (4 bytes
   * each, big-endian).
   */
  static byte[] context(String jobId, long roundIndex, long cohort) {
    byte[] job = jobId.getBytes(StandardCharsets.UTF_8);
    return ByteBuffer.allocate(VERSION.length + 4 + job.length + 8).put(VERSION).putInt(job.length).put(job)
        .putInt((int) roundIndex).putInt((int) cohort).array();
  }

  /** The X25519 public key of a 32-byte private key (clamped as RFC 7748 says). */
  static byte[] publicOf(byte[] privateKey) {
    byte[] out = new byte[KEY_BYTES];
    X25519.scalarMultBase(privateKey, 0, out, 0);
    return out;
  }

  /**
   * HKDF-SHA256(X25519(privateKey, peerPublic), salt=context, info=purpose), 32 bytes.
   *
   * @throws CryptoException a peer key of the wrong length or of small order (an all-zero secret)
   */
  static byte[] agree(byte[] privateKey, byte[] peerPublic, byte[] context, byte[] purpose) throws CryptoException {
    if (peerPublic.length != KEY_BYTES) {
      throw new CryptoException("an X25519 public key is 32 bytes");
    }
    byte[] shared = new byte[KEY_BYTES];
    if (!X25519.calculateAgreement(privateKey, 0, peerPublic, 0, shared, 0)) {
      throw new CryptoException("an unusable peer key (small order)");
    }
    HKDFBytesGenerator hkdf = new HKDFBytesGenerator(new SHA256Digest());
    hkdf.init(new HKDFParameters(shared, context, purpose));
    byte[] key = new byte[KEY_BYTES];
    hkdf.generateBytes(key, 0, KEY_BYTES);
    return key;
  }

  /** {@code length} words modulo 2^32: the AES-256-CTR keystream of {@code seed}, little-endian. */
  static int[] expandMask(byte[] seed, int length) {
    byte[] stream;
    try {
      Cipher ctr = Cipher.getInstance("AES/CTR/NoPadding");
      ctr.init(Cipher.ENCRYPT_MODE, new SecretKeySpec(seed, "AES"), new IvParameterSpec(new byte[16]));
      stream = ctr.doFinal(new byte[4 * length]);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-CTR is not available", e);
    }
    int[] words = new int[length];
    for (int i = 0; i < length; i++) {
      words[i] = (stream[4 * i] & 0xFF) | (stream[4 * i + 1] & 0xFF) << 8 | (stream[4 * i + 2] & 0xFF) << 16
          | (stream[4 * i + 3] & 0xFF) << 24;
    }
    return words;
  }

  private static Cipher gcm(int mode, byte[] key, byte[] context, int sender, int receiver)
      throws GeneralSecurityException {
    byte[] nonce = ByteBuffer.allocate(12).putInt(sender).putInt(receiver).putInt(0).array();
    Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
    cipher.init(mode, new SecretKeySpec(key, "AES"), new GCMParameterSpec(128, nonce));
    cipher.updateAAD(context);
    return cipher;
  }

  /** AES-256-GCM of {@code plaintext} from {@code sender} to {@code receiver}: ciphertext then tag. */
  static byte[] seal(byte[] key, byte[] context, int sender, int receiver, byte[] plaintext) {
    try {
      return gcm(Cipher.ENCRYPT_MODE, key, context, sender, receiver).doFinal(plaintext);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-GCM is not available", e);
    }
  }

  /**
   * The plaintext of {@link #seal}.
   *
   * @throws CryptoException the ciphertext does not authenticate (altered, or for another pair,
   *     cohort, round or job)
   */
  static byte[] open(byte[] key, byte[] context, int sender, int receiver, byte[] ciphertext) throws CryptoException {
    try {
      return gcm(Cipher.DECRYPT_MODE, key, context, sender, receiver).doFinal(ciphertext);
    } catch (AEADBadTagException e) {
      throw new CryptoException("shares from " + sender + " to " + receiver + " do not authenticate");
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-GCM is not available", e);
    }
  }
}
