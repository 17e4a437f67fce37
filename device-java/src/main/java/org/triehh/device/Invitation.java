package org.triehh.device;

import com.google.protobuf.InvalidProtocolBufferException;

/**
 * An invitation, read and checked: what one selected device receives for a round (schema
 * version 1; 2 in the estimate round). Only the invited device receives one; a device without
 * an invitation does nothing that round.
 */
public final class Invitation {
  static final int TOKEN_BYTES = 16;

  private final String jobId;
  private final long roundIndex;
  private final byte[] deviceId;
  private final byte[] token;
  private final long choiceWord;
  private final boolean estimate;

  private Invitation(String jobId, long roundIndex, byte[] deviceId, byte[] token, long choiceWord,
      boolean estimate) {
    this.jobId = jobId;
    this.roundIndex = roundIndex;
    this.deviceId = deviceId;
    this.token = token;
    this.choiceWord = choiceWord;
    this.estimate = estimate;
  }

  private static Refusal refuse(Refusal.Kind kind, String problem) {
    return new Refusal(Refusal.Message.INVITATION, kind, problem);
  }

  /**
   * Reads an invitation.
   *
   * @throws Refusal bytes that do not parse ({@code malformed}), a version other than 1 or 2
   *     ({@code version}), no choice word (cut short), no job id, round 0, no device id or a
   *     token that is not 16 bytes ({@code invalid})
   */
  public static Invitation read(byte[] data) throws Refusal {
    triehh_beam.Federated.Invitation message;
    try {
      message = triehh_beam.Federated.Invitation.parseFrom(data);
    } catch (InvalidProtocolBufferException e) {
      throw refuse(Refusal.Kind.MALFORMED, "not a triehh_beam.Invitation message");
    }
    int version = message.getSchemaVersion();
    if (version != Announcement.VOTE_VERSION && version != Announcement.ESTIMATE_VERSION) {
      throw refuse(Refusal.Kind.VERSION, "schema_version " + Integer.toUnsignedString(version));
    }
    if (!message.hasChoiceWord()) {
      throw refuse(Refusal.Kind.INVALID, "no choice_word (truncated or corrupt)");
    }
    long round = Integer.toUnsignedLong(message.getRoundIndex());
    if (message.getJobId().isEmpty() || round < 1) {
      throw refuse(Refusal.Kind.INVALID, "no job id, or round_index 0");
    }
    if (message.getDeviceId().isEmpty()) {
      throw refuse(Refusal.Kind.INVALID, "no device id");
    }
    if (message.getToken().size() != TOKEN_BYTES) {
      throw refuse(Refusal.Kind.INVALID, "the token must be 16 bytes, got " + message.getToken().size());
    }
    return new Invitation(message.getJobId(), round, message.getDeviceId().toByteArray(),
        message.getToken().toByteArray(), message.getChoiceWord(), version == Announcement.ESTIMATE_VERSION);
  }

  public String jobId() {
    return jobId;
  }

  public long roundIndex() {
    return roundIndex;
  }

  public byte[] deviceId() {
    return deviceId.clone();
  }

  byte[] token() {
    return token;
  }

  /** The device's item-choice draw, an unsigned 64-bit word held in a {@code long}. */
  long choiceWord() {
    return choiceWord;
  }

  /** An invitation to the estimate round (schema version 2). */
  public boolean isEstimate() {
    return estimate;
  }
}
