package org.triehh.device;

import com.google.protobuf.InvalidProtocolBufferException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import triehh_beam.Federated.EstimateAnnouncement;
import triehh_beam.Federated.RoundAnnouncement;
import triehh_beam.VoteOuterClass.Prefix;

/**
 * A round's announcement, read and checked: a vote round's {@code RoundAnnouncement} (schema
 * version 1: the frontier its votes extend) or the estimate round's {@code EstimateAnnouncement}
 * (version 2: the targets), as docs/federated_protocol.md specifies them. Every device receives
 * it; {@link #read} refuses anything the Python reference refuses, with the same kind.
 */
public final class Announcement {
  static final int VOTE_VERSION = 1;
  static final int ESTIMATE_VERSION = 2;

  private final String jobId;
  private final long roundIndex;
  private final boolean estimate;
  private final long deadlineMillis;
  final ItemEncoder encoder;
  final boolean truncate;
  /** A vote round's frontier (prefixes of {@code roundIndex - 1} units); empty for an estimate. */
  final Set<UnitSequence> frontier;
  /** The estimate round's targets, sorted; empty for a vote round. */
  final List<UnitSequence> targets;

  private Announcement(String jobId, long roundIndex, boolean estimate, long deadlineMillis, ItemEncoder encoder,
      boolean truncate, Set<UnitSequence> frontier, List<UnitSequence> targets) {
    this.jobId = jobId;
    this.roundIndex = roundIndex;
    this.estimate = estimate;
    this.deadlineMillis = deadlineMillis;
    this.encoder = encoder;
    this.truncate = truncate;
    this.frontier = frontier;
    this.targets = targets;
  }

  public String jobId() {
    return jobId;
  }

  public long roundIndex() {
    return roundIndex;
  }

  /** Reports arriving after this instant (Unix epoch milliseconds, UTC) are not counted. */
  public long deadlineMillis() {
    return deadlineMillis;
  }

  /** The estimate round's announcement (schema version 2), not a vote round's. */
  public boolean isEstimate() {
    return estimate;
  }

  private static Refusal refuse(Refusal.Kind kind, String problem) {
    return new Refusal(Refusal.Message.ANNOUNCEMENT, kind, problem);
  }

  /**
   * Reads an announcement of either kind, as its schema version says.
   *
   * @throws Refusal bytes that do not parse ({@code malformed}), a version other than 1 or 2
   *     ({@code version}), or anything the protocol refuses in the fields ({@code invalid})
   */
  public static Announcement read(byte[] data) throws Refusal {
    RoundAnnouncement header;
    try {
      header = RoundAnnouncement.parseFrom(data); // field 1 is the version in both messages
    } catch (InvalidProtocolBufferException e) {
      throw refuse(Refusal.Kind.MALFORMED, "not a triehh_beam.RoundAnnouncement message");
    }
    if (header.getSchemaVersion() == ESTIMATE_VERSION) {
      return readEstimate(data);
    }
    if (header.getSchemaVersion() != VOTE_VERSION) {
      throw refuse(Refusal.Kind.VERSION, "schema_version " + Integer.toUnsignedString(header.getSchemaVersion()));
    }
    return readVote(header);
  }

  private static ItemEncoder encoder(boolean has, triehh_beam.TrieOuterClass.Encoding encoding) throws Refusal {
    if (!has) {
      throw refuse(Refusal.Kind.INVALID, "no encoding");
    }
    try {
      return ItemEncoder.fromProto(encoding);
    } catch (IllegalArgumentException e) {
      throw refuse(Refusal.Kind.INVALID, "invalid encoding: " + e.getMessage());
    }
  }

  private static boolean truncate(int longItems) throws Refusal {
    return switch (longItems) {
      case RoundAnnouncement.LongItems.DROP_VALUE -> false;
      case RoundAnnouncement.LongItems.TRUNCATE_VALUE -> true;
      default -> throw refuse(Refusal.Kind.INVALID, "unknown or unspecified long_items " + longItems);
    };
  }

  private static void checkCommon(String jobId, long roundIndex, long deadline) throws Refusal {
    if (jobId.isEmpty()) {
      throw refuse(Refusal.Kind.INVALID, "no job id");
    }
    if (roundIndex < 1) {
      throw refuse(Refusal.Kind.INVALID, "round_index 0");
    }
    if (deadline < 1) {
      throw refuse(Refusal.Kind.INVALID, "deadline_millis must be > 0");
    }
  }

  private static UnitSequence checkedPrefix(ItemEncoder encoder, byte[][] units, String where) throws Refusal {
    if (encoder.kind == ItemEncoder.Kind.TEXT) {
      for (byte[] unit : units) {
        if (Unicode.decodeUtf8(unit) == null) {
          throw refuse(Refusal.Kind.INVALID, where + ": a unit is not UTF-8");
        }
      }
    }
    UnitSequence prefix = new UnitSequence(units);
    String problem = encoder.prefixProblem(prefix);
    if (problem != null) {
      throw refuse(Refusal.Kind.INVALID, where + " " + prefix + ": " + problem);
    }
    return prefix;
  }

  private static Announcement readVote(RoundAnnouncement message) throws Refusal {
    ItemEncoder encoder = encoder(message.hasEncoding(), message.getEncoding());
    boolean truncate = truncate(message.getLongItemsValue());
    long round = Integer.toUnsignedLong(message.getRoundIndex());
    checkCommon(message.getJobId(), round, message.getDeadlineMillis());
    if (round > encoder.maxLength) {
      throw refuse(Refusal.Kind.INVALID, "round_index exceeds max_length");
    }
    int count = message.getFrontierSharedCount();
    if (!message.hasFrontierCount() || Integer.toUnsignedLong(message.getFrontierCount()) != count) {
      throw refuse(Refusal.Kind.INVALID, count + " frontier prefixes, another frontier_count (cut or corrupt)");
    }
    List<byte[][]> raw;
    try {
      raw = FrontCoding.decode(message, (int) round - 1);
    } catch (IllegalArgumentException e) {
      throw refuse(Refusal.Kind.INVALID, "frontier: " + e.getMessage());
    }
    if (raw.isEmpty()) {
      throw refuse(Refusal.Kind.INVALID, "an empty frontier");
    }
    Set<UnitSequence> frontier = new HashSet<>();
    for (int i = 0; i < raw.size(); i++) {
      frontier.add(checkedPrefix(encoder, raw.get(i), "frontier prefix " + i));
    }
    return new Announcement(message.getJobId(), round, false, message.getDeadlineMillis(), encoder, truncate,
        Collections.unmodifiableSet(frontier), Collections.<UnitSequence>emptyList());
  }

  private static Announcement readEstimate(byte[] data) throws Refusal {
    EstimateAnnouncement message;
    try {
      message = EstimateAnnouncement.parseFrom(data);
    } catch (InvalidProtocolBufferException e) {
      throw refuse(Refusal.Kind.MALFORMED, "not a triehh_beam.EstimateAnnouncement message");
    }
    ItemEncoder encoder = encoder(message.hasEncoding(), message.getEncoding());
    boolean truncate = truncate(message.getLongItemsValue());
    int count = message.getTargetsCount();
    if (!message.hasTargetCount() || Integer.toUnsignedLong(message.getTargetCount()) != count) {
      throw refuse(Refusal.Kind.INVALID, count + " targets but another target_count (truncated or corrupt)");
    }
    List<UnitSequence> raw = new ArrayList<>();
    for (Prefix prefix : message.getTargetsList()) {
      byte[][] units = new byte[prefix.getUnitsCount()][];
      for (int i = 0; i < units.length; i++) {
        units[i] = prefix.getUnits(i).toByteArray();
      }
      raw.add(new UnitSequence(units));
    }
    for (int i = 1; i < raw.size(); i++) {
      if (raw.get(i - 1).compareTo(raw.get(i)) >= 0) {
        throw refuse(Refusal.Kind.INVALID, "targets out of canonical order, or repeated");
      }
    }
    List<UnitSequence> targets = new ArrayList<>();
    for (int i = 0; i < raw.size(); i++) {
      UnitSequence target = raw.get(i);
      byte[][] units = new byte[target.size()][];
      for (int k = 0; k < units.length; k++) {
        units[k] = target.unit(k);
      }
      targets.add(checkedPrefix(encoder, units, "target " + i));
      if (target.size() == 0) {
        throw refuse(Refusal.Kind.INVALID, "targets: an empty target");
      }
      if (i > 0 && target.size() >= raw.get(i - 1).size()
          && target.prefix(raw.get(i - 1).size()).equals(raw.get(i - 1))) {
        throw refuse(Refusal.Kind.INVALID, "targets: a target is a prefix of the next");
      }
    }
    long round = Integer.toUnsignedLong(message.getRoundIndex());
    checkCommon(message.getJobId(), round, message.getDeadlineMillis());
    if (targets.isEmpty()) {
      throw refuse(Refusal.Kind.INVALID, "no target");
    }
    return new Announcement(message.getJobId(), round, true, message.getDeadlineMillis(), encoder, truncate,
        Collections.<UnitSequence>emptySet(), Collections.unmodifiableList(targets));
  }
}
