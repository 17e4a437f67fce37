package org.triehh.device;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import triehh_beam.Secagg.SecAggCiphertext;
import triehh_beam.Secagg.SecAggMember;
import triehh_beam.Secagg.SecAggReport;
import triehh_beam.Secagg.SecAggRequest;
import triehh_beam.Secagg.SecAggUnmaskShare;

/**
 * The secure-aggregation messages on the wire ({@code protos/triehh_beam/proto/secagg.proto}):
 * a {@code SecAggRequest} read and checked as the Python reader checks it
 * ({@code triehh_beam/protocol/secagg/messages.py}), and the device's {@code SecAggReport}
 * written with the same bytes (repeated fields sorted by index).
 */
final class SecAggWire {
  static final int SCHEMA_VERSION = 1;
  /** An encrypted pair of shares: the plaintext and GCM's 16-byte tag. */
  static final int CIPHERTEXT_BYTES = SecAggDevice.SHARE_PLAINTEXT_BYTES + 16;
  private static final long U32 = 1L << 32;

  private SecAggWire() {}

  private static Refusal invalid(String problem) {
    return SecAggDevice.refuse(Refusal.Kind.INVALID, problem);
  }

  private static long unsigned(int value) {
    return Integer.toUnsignedLong(value);
  }

  private static void bounded(String name, long value, long low, long high) throws Refusal {
    if (value < low || value >= high) {
      throw invalid(name + " must be an integer in [" + low + ", " + high + "), got " + value);
    }
  }

  private static void distinct(List<Integer> indices, String what) throws Refusal {
    Set<Integer> seen = new HashSet<>();
    for (int i : indices) {
      bounded(what, unsigned(i), 1, U32);
      if (!seen.add(i)) {
        throw invalid("repeated " + what);
      }
    }
  }

  private static byte[] key(ByteString value, String what) throws Refusal {
    if (value.size() != SecAggCrypto.KEY_BYTES) {
      throw invalid(what + " must be 32 bytes");
    }
    return value.toByteArray();
  }

  /**
   * Reads and checks a request.
   *
   * @throws Refusal ({@code secagg:malformed}) bytes that do not parse, ({@code secagg:version})
   *     a schema version other than 1, ({@code secagg:invalid}) no phase, no job id, round 0, a
   *     token that is not 16 bytes, or a phase whose fields the protocol refuses
   */
  static SecAggRequest read(byte[] data) throws Refusal {
    SecAggRequest request;
    try {
      request = SecAggRequest.parseFrom(data);
    } catch (InvalidProtocolBufferException e) {
      throw SecAggDevice.refuse(Refusal.Kind.MALFORMED, "not a triehh_beam.SecAggRequest message");
    }
    if (request.getSchemaVersion() != SCHEMA_VERSION) {
      throw SecAggDevice.refuse(Refusal.Kind.VERSION, "schema_version " + unsigned(request.getSchemaVersion()));
    }
    if (request.getPhaseCase() == SecAggRequest.PhaseCase.PHASE_NOT_SET) {
      throw invalid("no phase (truncated or corrupt)");
    }
    if (request.getJobId().isEmpty() || request.getRoundIndex() == 0) {
      throw invalid("no job id, or round_index 0");
    }
    if (request.getToken().size() != Invitation.TOKEN_BYTES) {
      throw invalid("the token must be 16 bytes, got " + request.getToken().size());
    }
    switch (request.getPhaseCase()) {
      case SETUP -> checkSetup(request.getSetup());
      case ROSTER -> {
        List<Integer> indices = new ArrayList<>();
        for (SecAggMember member : request.getRoster().getMembersList()) {
          indices.add(member.getIndex());
          key(member.getCipherPublicKey(), "a cipher public key");
          key(member.getMaskPublicKey(), "a mask public key");
        }
        distinct(indices, "member index");
      }
      case INBOX -> {
        List<Integer> peers = new ArrayList<>();
        for (SecAggCiphertext share : request.getInbox().getSharesList()) {
          peers.add(share.getPeer());
          if (share.getCiphertext().size() != CIPHERTEXT_BYTES) {
            throw invalid("a ciphertext must be " + CIPHERTEXT_BYTES + " bytes");
          }
        }
        distinct(peers, "peer index");
      }
      default -> distinct(request.getSurvivors().getIndicesList(), "survivor index");
    }
    return request;
  }

  private static void checkSetup(SecAggRequest.Setup setup) throws Refusal {
    if (setup.getInvitation().isEmpty()) {
      throw invalid("a setup carries the device's invitation");
    }
    long size = unsigned(setup.getSize());
    bounded("size", size, 2, U32);
    bounded("index", unsigned(setup.getIndex()), 1, size + 1);
    bounded("threshold", unsigned(setup.getThreshold()), 2, size + 1);
    bounded("slots", unsigned(setup.getSlots()), 3, U32);
    Set<ByteString> units = new HashSet<>();
    for (ByteString unit : setup.getAlphabetList()) {
      if (unit.isEmpty() || !units.add(unit)) {
        throw invalid("the alphabet's units are distinct non-empty bytes");
      }
    }
  }

  /** The roster as index -> {cipher public key, mask public key}. */
  static SortedMap<Integer, byte[][]> roster(SecAggRequest.Roster roster) {
    SortedMap<Integer, byte[][]> out = new TreeMap<>();
    for (SecAggMember member : roster.getMembersList()) {
      out.put(member.getIndex(), new byte[][] {member.getCipherPublicKey().toByteArray(),
          member.getMaskPublicKey().toByteArray()});
    }
    return out;
  }

  /** The inbox as sender -> ciphertext. */
  static SortedMap<Integer, byte[]> inbox(SecAggRequest.Inbox inbox) {
    SortedMap<Integer, byte[]> out = new TreeMap<>();
    for (SecAggCiphertext share : inbox.getSharesList()) {
      out.put(share.getPeer(), share.getCiphertext().toByteArray());
    }
    return out;
  }

  /** A report's header: version 1, the invitation's job, round and token. */
  static SecAggReport.Builder report(Invitation invitation) {
    return SecAggReport.newBuilder().setSchemaVersion(SCHEMA_VERSION).setJobId(invitation.jobId())
        .setRoundIndex((int) invitation.roundIndex()).setToken(ByteString.copyFrom(invitation.token()));
  }

  static byte[] keys(Invitation invitation, byte[][] publicKeys) {
    return report(invitation).setKeys(SecAggReport.Keys.newBuilder()
        .setCipherPublicKey(ByteString.copyFrom(publicKeys[0])).setMaskPublicKey(ByteString.copyFrom(publicKeys[1])))
        .build().toByteArray();
  }

  static byte[] shares(Invitation invitation, SortedMap<Integer, byte[]> ciphertexts) {
    SecAggReport.Shares.Builder shares = SecAggReport.Shares.newBuilder();
    for (Map.Entry<Integer, byte[]> entry : ciphertexts.entrySet()) {
      shares.addShares(SecAggCiphertext.newBuilder().setPeer(entry.getKey())
          .setCiphertext(ByteString.copyFrom(entry.getValue())));
    }
    return report(invitation).setShares(shares).build().toByteArray();
  }

  static byte[] masked(Invitation invitation, int[] vector) {
    byte[] bytes = new byte[4 * vector.length];
    for (int i = 0; i < vector.length; i++) {
      bytes[4 * i] = (byte) vector[i];
      bytes[4 * i + 1] = (byte) (vector[i] >>> 8);
      bytes[4 * i + 2] = (byte) (vector[i] >>> 16);
      bytes[4 * i + 3] = (byte) (vector[i] >>> 24);
    }
    return report(invitation).setMasked(SecAggReport.Masked.newBuilder().setVector(ByteString.copyFrom(bytes)))
        .build().toByteArray();
  }

  static byte[] unmask(Invitation invitation, SortedMap<Integer, SecAggDevice.UnmaskShare> answer) {
    SecAggReport.Unmask.Builder unmask = SecAggReport.Unmask.newBuilder();
    for (Map.Entry<Integer, SecAggDevice.UnmaskShare> entry : answer.entrySet()) {
      unmask.addShares(SecAggUnmaskShare.newBuilder().setOwner(entry.getKey())
          .setKindValue(entry.getValue().kind).setShare(ByteString.copyFrom(entry.getValue().share)));
    }
    return report(invitation).setUnmask(unmask).build().toByteArray();
  }
}
