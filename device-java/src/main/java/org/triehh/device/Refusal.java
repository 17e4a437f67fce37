package org.triehh.device;

/**
 * A message the device must not answer, and why. The kinds are stable and shared with the Python
 * reference (tests/vectors/device_vectors.json, {@code refusal_kinds}); {@link #code()} is the
 * vectors' {@code "<message>:<kind>"}. A refused round is simply not answered: the server counts
 * the device as not reporting.
 */
public final class Refusal extends Exception {
  private static final long serialVersionUID = 1L;

  /** Why a message is refused. */
  public enum Kind {
    /** The bytes do not parse as the message (cut inside a field, corrupt). */
    MALFORMED,
    /** No schema_version, or one this reader does not understand. */
    VERSION,
    /** Parses, but a field is missing, out of range or inconsistent. */
    INVALID,
    /** The invitation does not belong with the announcement or with this device. */
    MISMATCH,
    /**
     * A secure-aggregation request the protocol does not allow at this point: out of order, too
     * few devices (below the threshold), keys or shares that do not check. It ends the device's
     * run of the round.
     */
    PROTOCOL;

    /** The kind's name in the vectors and in logs: {@code malformed}, {@code version}, ... */
    public String code() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** Which message is refused. */
  public enum Message {
    ANNOUNCEMENT,
    INVITATION,
    /** A secure-aggregation request ({@code SecAggRequest}, {@link SecureVoteSession}). */
    SECAGG;

    public String code() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  private final Message message;
  private final Kind kind;

  public Refusal(Message message, Kind kind, String problem) {
    super(message.code() + ": " + problem);
    this.message = message;
    this.kind = kind;
  }

  public Message message() {
    return message;
  }

  public Kind kind() {
    return kind;
  }

  /** {@code "<message>:<kind>"}, e.g. {@code "announcement:invalid"}. */
  public String code() {
    return message.code() + ":" + kind.code();
  }
}
