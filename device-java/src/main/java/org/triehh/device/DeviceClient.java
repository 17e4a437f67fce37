package org.triehh.device;

import com.google.protobuf.ByteString;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.AbstractMap;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import triehh_beam.Federated.VoteReport;
import triehh_beam.VoteOuterClass.Prefix;

/**
 * One device's records, and its answer to each round it is invited to: the device side of the
 * federated protocol (docs/federated_protocol.md, "The device algorithm"), byte for byte what the
 * Python reference {@code triehh_beam.device.DeviceClient} answers (tests/vectors).
 *
 * <p>For each round the device receives the announcement and, if it was selected, its
 * invitation; {@link #respondBytes} returns the serialized {@code VoteReport} to send back (a
 * vote for one prefix, or an explicit abstention), or throws a {@link Refusal} when either
 * message must not be answered. The answer is a function of the records and the two messages:
 * a resent report is identical.
 *
 * <p>Thread safety: an instance may be shared between threads; the per-encoding cache of the
 * encoded records is synchronized. Nothing is written to storage and nothing leaves the device
 * but the returned report.
 */
public final class DeviceClient {
  private static final double TWO_TO_MINUS_53 = 0x1.0p-53;

  private final List<Record> records;
  private final byte[] deviceId;
  private final Map<String, List<Map.Entry<UnitSequence, BigInteger>>> encoded = new HashMap<>();

  /** A device without an id check: it answers an invitation addressed to any device id. */
  public DeviceClient(Collection<Record> records) {
    this(records, null);
  }

  /**
   * @param records the device's (item, count) records, copied; an item may repeat (counts add up)
   * @param deviceId this device's enrolled id, or null; when given, an invitation for another id
   *     is refused ({@code invitation:mismatch})
   * @throws IllegalArgumentException an empty device id
   */
  public DeviceClient(Collection<Record> records, byte[] deviceId) {
    this.records = Collections.unmodifiableList(new ArrayList<>(records));
    if (deviceId != null && deviceId.length == 0) {
      throw new IllegalArgumentException("a device id is non-empty bytes");
    }
    this.deviceId = deviceId == null ? null : deviceId.clone();
  }

  /**
   * The report answering {@code invitation} in the announced round, serialized.
   *
   * @throws Refusal either message is malformed, of an unknown version or invalid (the
   *     announcement is read first), or the invitation does not belong with the announcement or
   *     this device
   */
  public byte[] respondBytes(byte[] announcement, byte[] invitation) throws Refusal {
    return respond(Announcement.read(announcement), Invitation.read(invitation));
  }

  /**
   * The serialized report answering {@code invitation} in {@code announcement}'s round.
   *
   * @throws Refusal ({@code invitation:mismatch}) the invitation is for another job or round,
   *     for another device, or for a vote round where the announcement is the estimate round's
   *     (or the reverse)
   */
  public byte[] respond(Announcement announcement, Invitation invitation) throws Refusal {
    return report(invitation, answer(announcement, invitation));
  }

  /**
   * What the device answers {@code invitation} with: the prefix it votes for (in the estimate
   * round, the target it names), or null to abstain; the same checks as {@link #respond}.
   */
  UnitSequence answer(Announcement announcement, Invitation invitation) throws Refusal {
    if (invitation.isEstimate() != announcement.isEstimate()) {
      throw mismatch("an invitation and an announcement of different kinds of round");
    }
    if (!invitation.jobId().equals(announcement.jobId()) || invitation.roundIndex() != announcement.roundIndex()) {
      throw mismatch("the invitation is for another job or round than the announcement");
    }
    if (deviceId != null && !Arrays.equals(invitation.deviceId(), deviceId)) {
      throw mismatch("the invitation is for another device");
    }
    double u = uniform(invitation.choiceWord());
    List<Map.Entry<UnitSequence, BigInteger>> weighted = weightedSequences(announcement.encoder, announcement.truncate);
    return announcement.isEstimate()
        ? estimateChoice(announcement.targets, weighted, u)
        : vote(weighted, announcement.frontier, (int) announcement.roundIndex(), u);
  }

  private static Refusal mismatch(String problem) {
    return new Refusal(Refusal.Message.INVITATION, Refusal.Kind.MISMATCH, problem);
  }

  /** {@code (word >>> 11) / 2^53}: an exact double in [0, 1). */
  static double uniform(long choiceWord) {
    return (choiceWord >>> 11) * TWO_TO_MINUS_53;
  }

  /** The device's sequences with their summed counts (zero totals left out), sorted; cached. */
  synchronized List<Map.Entry<UnitSequence, BigInteger>> weightedSequences(ItemEncoder encoder, boolean truncate) {
    String key = encoder.kind + "/" + encoder.unitSize + "/" + encoder.maxLength + "/" + encoder.caseFold + "/"
        + encoder.intBits + "/" + encoder.tokenize + "/" + truncate;
    return encoded.computeIfAbsent(key, k -> encode(encoder, truncate));
  }

  private List<Map.Entry<UnitSequence, BigInteger>> encode(ItemEncoder encoder, boolean truncate) {
    TreeMap<UnitSequence, BigInteger> totals = new TreeMap<>();
    for (Record record : records) {
      if (record.count() == 0) {
        continue;
      }
      List<Object> items = encoder.itemsOf(record.item());
      if (items == null) {
        continue;
      }
      for (Object item : items) {
        UnitSequence sequence = encoder.encode(item, truncate);
        if (sequence != null) {
          totals.merge(sequence, BigInteger.valueOf(record.count()), BigInteger::add);
        }
      }
    }
    List<Map.Entry<UnitSequence, BigInteger>> sorted = new ArrayList<>();
    for (Map.Entry<UnitSequence, BigInteger> entry : totals.entrySet()) {
      sorted.add(new AbstractMap.SimpleImmutableEntry<>(entry.getKey(), entry.getValue()));
    }
    return Collections.unmodifiableList(sorted);
  }

  /**
   * The first of the sorted {@code weighted} whose running count exceeds {@code u * total}
   * (total converted to a double first, the comparison exact), or null for none.
   */
  static UnitSequence choose(List<Map.Entry<UnitSequence, BigInteger>> weighted, double u) {
    if (weighted.isEmpty()) {
      return null;
    }
    BigInteger total = BigInteger.ZERO;
    for (Map.Entry<UnitSequence, BigInteger> entry : weighted) {
      total = total.add(entry.getValue());
    }
    BigDecimal target = new BigDecimal(u * total.doubleValue());
    BigInteger running = BigInteger.ZERO;
    for (Map.Entry<UnitSequence, BigInteger> entry : weighted) {
      running = running.add(entry.getValue());
      if (new BigDecimal(running).compareTo(target) > 0) {
        return entry.getKey();
      }
    }
    throw new IllegalStateException("u must be below 1");
  }

  private static UnitSequence vote(List<Map.Entry<UnitSequence, BigInteger>> weighted,
      Set<UnitSequence> frontier, int roundIndex, double u) {
    UnitSequence chosen = choose(weighted, u);
    if (chosen == null || chosen.size() < roundIndex || !frontier.contains(chosen.prefix(roundIndex - 1))) {
      return null;
    }
    return chosen.prefix(roundIndex);
  }

  private static UnitSequence estimateChoice(List<UnitSequence> targets,
      List<Map.Entry<UnitSequence, BigInteger>> weighted, double u) {
    Map<UnitSequence, UnitSequence> byTarget = new HashMap<>();
    TreeSet<Integer> lengths = new TreeSet<>();
    for (UnitSequence target : targets) {
      byTarget.put(target, target);
      lengths.add(target.size());
    }
    TreeMap<UnitSequence, BigInteger> weights = new TreeMap<>();
    for (Map.Entry<UnitSequence, BigInteger> entry : weighted) {
      UnitSequence sequence = entry.getKey();
      for (int length : lengths) {
        if (length > sequence.size()) {
          break;
        }
        UnitSequence target = byTarget.get(sequence.prefix(length));
        if (target != null) {
          weights.merge(target, entry.getValue(), BigInteger::add);
          break;
        }
      }
    }
    return choose(new ArrayList<>(weights.entrySet()), u);
  }

  private static byte[] report(Invitation invitation, UnitSequence answer) {
    VoteReport.Builder report = VoteReport.newBuilder()
        .setSchemaVersion(invitation.isEstimate() ? Announcement.ESTIMATE_VERSION : Announcement.VOTE_VERSION)
        .setJobId(invitation.jobId())
        .setRoundIndex((int) invitation.roundIndex())
        .setToken(ByteString.copyFrom(invitation.token()));
    if (answer == null) {
      report.setAbstain(VoteReport.Abstain.getDefaultInstance());
    } else {
      Prefix.Builder prefix = Prefix.newBuilder();
      for (int i = 0; i < answer.size(); i++) {
        prefix.addUnits(ByteString.copyFrom(answer.unit(i)));
      }
      report.setPrefix(prefix);
    }
    return report.build().toByteArray();
  }
}
