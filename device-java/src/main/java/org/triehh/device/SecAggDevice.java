package org.triehh.device;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * One device's side of a cohort's secure aggregation, the Python reference's
 * {@code SecAggDevice} ({@code triehh_beam/protocol/secagg/device.py}) with the same draws in the
 * same order: advertise two X25519 public keys; share (t-of-n Shamir shares of the mask key and
 * of a fresh self-mask seed, each other member's encrypted to it); mask (the input plus the
 * self-mask plus, for every other device that shared, the pair's mask, added by the lower index
 * and subtracted by the higher, modulo 2^32); unmask (for each device that shared: its seed share
 * if it sent its masked input, else its mask-key share, never both). A refused message ends the
 * run: every later call is refused too.
 */
final class SecAggDevice {
  /** Sender, receiver (4 bytes each) and the two shares of 32-byte secrets. */
  static final int SHARE_PLAINTEXT_BYTES = 8 + 2 * Shamir.shareBytes(SecAggCrypto.KEY_BYTES);
  static final int SELF_MASK = 1;
  static final int MASK_KEY = 2;

  /** One unmasking share: what it recovers ({@link #SELF_MASK} or {@link #MASK_KEY}) and its bytes. */
  static final class UnmaskShare {
    final int kind;
    final byte[] share;

    UnmaskShare(int kind, byte[] share) {
      this.kind = kind;
      this.share = share;
    }
  }

  private enum Phase { KEYS, SHARE, MASK, UNMASK, DONE, REFUSED }

  private final byte[] context;
  private final int index;
  private final long size;
  private final int threshold;
  private final RandomBytes random;
  private final byte[] cipherPrivate;
  private final byte[] cipherPublic;
  private final byte[] maskPrivate;
  private final byte[] maskPublic;
  private int[] vector;
  private Phase phase = Phase.KEYS;
  private SortedMap<Integer, byte[][]> roster = new TreeMap<>();  // index -> {cipher, mask} public keys
  private final SortedMap<Integer, byte[][]> held = new TreeMap<>();  // sender -> {mask key share, seed share}
  private byte[] seed;
  private int[] sharers = new int[0];

  /** A {@link Refusal} of kind {@code protocol} (or {@code invalid}) for a secure-aggregation request. */
  static Refusal refuse(Refusal.Kind kind, String problem) {
    return new Refusal(Refusal.Message.SECAGG, kind, problem);
  }

  /**
   * @param context the cohort's context ({@link SecAggCrypto#context})
   * @param index this device's index in the cohort, in [1, size] (checked by the setup's reader)
   * @param threshold t, in [2, size]
   * @param vector the input (one-hot for a vote), copied
   */
  SecAggDevice(byte[] context, int index, long size, int threshold, int[] vector, RandomBytes random) {
    this.context = context.clone();
    this.index = index;
    this.size = size;
    this.threshold = threshold;
    this.vector = vector.clone();
    this.random = random;
    this.cipherPrivate = random.next(SecAggCrypto.KEY_BYTES);
    this.cipherPublic = SecAggCrypto.publicOf(cipherPrivate);
    this.maskPrivate = random.next(SecAggCrypto.KEY_BYTES);
    this.maskPublic = SecAggCrypto.publicOf(maskPrivate);
  }

  private void advance(Phase expected) throws Refusal {
    if (phase != expected) {
      Phase was = phase;
      phase = Phase.REFUSED;
      throw refuse(Refusal.Kind.PROTOCOL, "device " + index + ": a " + expected.name().toLowerCase(java.util.Locale.ROOT)
          + " message in the " + was.name().toLowerCase(java.util.Locale.ROOT) + " phase");
    }
    phase = Phase.values()[expected.ordinal() + 1];
  }

  private Refusal fail(String problem) {
    phase = Phase.REFUSED;
    return refuse(Refusal.Kind.PROTOCOL, problem);
  }

  private void checkMembers(Collection<Integer> members, String what) throws Refusal {
    if (!members.contains(index)) {
      throw fail("device " + index + " is not among the " + what);
    }
    for (int m : members) {
      if (m < 1 || m > size) {
        throw fail("the " + what + " name an index outside [1, " + size + "]");
      }
    }
    if (members.size() < threshold) {
      throw fail(members.size() + " " + what + ", below the threshold " + threshold);
    }
  }

  /** Phase 0: {share-encryption public key, mask public key}. */
  byte[][] advertise() throws Refusal {
    advance(Phase.KEYS);
    return new byte[][] {cipherPublic.clone(), maskPublic.clone()};
  }

  private byte[] agree(byte[] peerPublic, boolean forMask) throws Refusal {
    try {
      return SecAggCrypto.agree(forMask ? maskPrivate : cipherPrivate, peerPublic, context,
          forMask ? SecAggCrypto.MASK_PURPOSE : SecAggCrypto.SHARE_PURPOSE);
    } catch (SecAggCrypto.CryptoException e) {
      throw fail(e.getMessage());
    }
  }

  /**
   * Phase 1: given every advertised device's keys (this one's included), the ciphertext for each
   * other member, by receiver.
   */
  SortedMap<Integer, byte[]> share(SortedMap<Integer, byte[][]> advertised) throws Refusal {
    advance(Phase.SHARE);
    checkMembers(advertised.keySet(), "advertised devices");
    byte[][] own = advertised.get(index);
    if (!Arrays.equals(own[0], cipherPublic) || !Arrays.equals(own[1], maskPublic)) {
      throw fail("device " + index + ": the roster holds other keys for this device");
    }
    Set<ByteBuffer> publics = new HashSet<>();
    for (byte[][] keys : advertised.values()) {
      for (byte[] key : keys) {
        if (!publics.add(ByteBuffer.wrap(key))) {
          throw fail("the roster repeats a public key");
        }
      }
    }
    roster = new TreeMap<>(advertised);
    seed = random.next(SecAggCrypto.KEY_BYTES);
    int[] members = new int[roster.size()];
    int k = 0;
    for (int m : roster.keySet()) {
      members[k++] = m;
    }
    byte[][] keyShares = Shamir.split(maskPrivate, threshold, members, random);
    byte[][] seedShares = Shamir.split(seed, threshold, members, random);
    SortedMap<Integer, byte[]> out = new TreeMap<>();
    for (int i = 0; i < members.length; i++) {
      int other = members[i];
      if (other == index) {
        held.put(index, new byte[][] {keyShares[i], seedShares[i]});
        continue;
      }
      byte[] plaintext = ByteBuffer.allocate(SHARE_PLAINTEXT_BYTES).putInt(index).putInt(other).put(keyShares[i])
          .put(seedShares[i]).array();
      out.put(other, SecAggCrypto.seal(agree(roster.get(other)[0], false), context, index, other, plaintext));
    }
    return out;
  }

  /** Phase 2: given the ciphertexts addressed to this device by sender, the masked input. */
  int[] mask(SortedMap<Integer, byte[]> received) throws Refusal {
    advance(Phase.MASK);
    TreeSet<Integer> shared = new TreeSet<>(received.keySet());
    shared.add(index);
    checkMembers(shared, "devices that shared");
    int half = Shamir.shareBytes(SecAggCrypto.KEY_BYTES);
    for (Map.Entry<Integer, byte[]> entry : received.entrySet()) {
      int sender = entry.getKey();
      if (sender == index || !roster.containsKey(sender)) {
        throw fail("shares from " + sender + ", who is not another advertised device");
      }
      byte[] plaintext;
      try {
        plaintext = SecAggCrypto.open(agree(roster.get(sender)[0], false), context, sender, index, entry.getValue());
      } catch (SecAggCrypto.CryptoException e) {
        throw fail(e.getMessage());
      }
      if (plaintext.length != SHARE_PLAINTEXT_BYTES) {
        throw fail("shares from " + sender + " are " + plaintext.length + " bytes, not " + SHARE_PLAINTEXT_BYTES);
      }
      ByteBuffer body = ByteBuffer.wrap(plaintext);
      if (body.getInt() != sender || body.getInt() != index) {
        throw fail("shares from " + sender + " name another pair");
      }
      held.put(sender, new byte[][] {Arrays.copyOfRange(plaintext, 8, 8 + half),
          Arrays.copyOfRange(plaintext, 8 + half, 8 + 2 * half)});
    }
    sharers = shared.stream().mapToInt(Integer::intValue).toArray();
    int[] masked = vector.clone();
    add(masked, SecAggCrypto.expandMask(seed, masked.length), 1);
    for (int other : sharers) {
      if (other != index) {
        int[] pairwise = SecAggCrypto.expandMask(agree(roster.get(other)[1], true), masked.length);
        add(masked, pairwise, index < other ? 1 : -1);
      }
    }
    vector = new int[0];  // the plaintext is not kept past masking
    return masked;
  }

  private static void add(int[] into, int[] mask, int sign) {
    for (int i = 0; i < into.length; i++) {
      into[i] += sign * mask[i];  // modulo 2^32: Java's int arithmetic wraps
    }
  }

  /**
   * Phase 3: given the devices whose masked inputs reached the server, for every device that
   * shared, by owner: a survivor's seed share ({@link #SELF_MASK}), a dropped device's mask key
   * share ({@link #MASK_KEY}).
   */
  SortedMap<Integer, UnmaskShare> unmask(Collection<Integer> survivors) throws Refusal {
    advance(Phase.UNMASK);
    Set<Integer> alive = new HashSet<>(survivors);
    checkMembers(alive, "survivors");
    Set<Integer> shared = new HashSet<>();
    for (int s : sharers) {
      shared.add(s);
    }
    if (!shared.containsAll(alive)) {
      throw fail("a survivor that did not share");
    }
    SortedMap<Integer, UnmaskShare> out = new TreeMap<>();
    for (int sharer : sharers) {
      byte[][] shares = held.get(sharer);
      out.put(sharer, alive.contains(sharer) ? new UnmaskShare(SELF_MASK, shares[1]) : new UnmaskShare(MASK_KEY, shares[0]));
    }
    return out;
  }
}
