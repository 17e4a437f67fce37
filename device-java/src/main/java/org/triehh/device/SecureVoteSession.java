package org.triehh.device;

import java.util.Arrays;
import triehh_beam.Secagg.SecAggRequest;

/**
 * One device's run of secure aggregation in one round (docs/federated_protocol.md, "Secure
 * aggregation"; the Python {@code SecureVoteSession}): the device's vote, exactly
 * {@link DeviceClient}'s, as a one-hot vector over the round's slots, answered phase by phase to
 * the server's {@code SecAggRequest} messages, so that only public keys, encrypted shares, the
 * masked vector and unmasking shares leave the device.
 *
 * <p>Start a session with the round's announcement and the device's <b>setup</b> request (its
 * invitation inside; a secure round sends no invitation outside a setup) and send
 * {@link #keys()}; then answer each later request of the same token ({@code roster},
 * {@code inbox}, {@code survivors}) with {@link #handle}. A refused request ({@link Refusal},
 * message {@code secagg}) is not answered; a {@code protocol} refusal ends the run, which the
 * server counts as a dropout. Keep the session in memory for the round only: its secrets are
 * fresh for each round and are never stored.
 *
 * <p>Thread safety: one session answers one device's requests in order; do not share it.
 */
public final class SecureVoteSession {
  private final Invitation invitation;
  private final SecAggDevice device;

  private SecureVoteSession(Invitation invitation, SecAggDevice device) {
    this.invitation = invitation;
    this.device = device;
  }

  /**
   * The session a setup starts, its secrets from {@link java.security.SecureRandom}.
   *
   * @param device the device's records
   * @param announcement the round's announcement (a vote round's or the estimate round's)
   * @param setup the server's setup request to this device
   * @throws Refusal either message refused ({@code announcement:*}, {@code secagg:*}: not a
   *     setup, or slots that do not match the round), the invitation inside refused
   *     ({@code invitation:*}), or not this device's, round's or token's ({@code
   *     invitation:mismatch})
   */
  public static SecureVoteSession start(DeviceClient device, byte[] announcement, byte[] setup) throws Refusal {
    return start(device, Announcement.read(announcement), setup, RandomBytes.secure());
  }

  /** {@link #start} with an announcement already read and a given source of secrets. */
  static SecureVoteSession start(DeviceClient device, Announcement announcement, byte[] setup, RandomBytes random)
      throws Refusal {
    SecAggRequest request = SecAggWire.read(setup);
    if (request.getPhaseCase() != SecAggRequest.PhaseCase.SETUP) {
      throw SecAggDevice.refuse(Refusal.Kind.INVALID, "a session starts with a setup, got " + request.getPhaseCase());
    }
    SecAggRequest.Setup phase = request.getSetup();
    Invitation invitation = Invitation.read(phase.getInvitation().toByteArray());
    if (!invitation.jobId().equals(request.getJobId()) || invitation.roundIndex() != Integer.toUnsignedLong(
        request.getRoundIndex()) || !Arrays.equals(invitation.token(), request.getToken().toByteArray())) {
      throw new Refusal(Refusal.Message.INVITATION, Refusal.Kind.MISMATCH,
          "the setup's invitation is for another job, round or token");
    }
    UnitSequence vote = device.answer(announcement, invitation);
    VoteSlots slots = VoteSlots.of(announcement, phase.getAlphabetList().stream().map(u -> u.toByteArray())
        .collect(java.util.stream.Collectors.toList()), Integer.toUnsignedLong(phase.getSlots()));
    byte[] context = SecAggCrypto.context(invitation.jobId(), invitation.roundIndex(), Integer.toUnsignedLong(
        phase.getCohort()));
    return new SecureVoteSession(invitation, new SecAggDevice(context, phase.getIndex(),
        Integer.toUnsignedLong(phase.getSize()), phase.getThreshold(), slots.oneHot(vote), random));
  }

  /**
   * The serialized answer to the setup: the device's two public keys.
   *
   * @throws Refusal ({@code secagg:protocol}) asked twice
   */
  public byte[] keys() throws Refusal {
    return SecAggWire.keys(invitation, device.advertise());
  }

  /**
   * The serialized report answering a roster, inbox or survivors request.
   *
   * @throws Refusal the request refused as {@link #start} refuses one ({@code secagg:malformed},
   *     {@code version}, {@code invalid}), for another job, round or token
   *     ({@code secagg:mismatch}), or out of order or refused by the protocol
   *     ({@code secagg:protocol}: too few devices, keys or shares that do not check, a second
   *     setup)
   */
  public byte[] handle(byte[] data) throws Refusal {
    SecAggRequest request = SecAggWire.read(data);
    if (!request.getJobId().equals(invitation.jobId())
        || Integer.toUnsignedLong(request.getRoundIndex()) != invitation.roundIndex()
        || !Arrays.equals(request.getToken().toByteArray(), invitation.token())) {
      throw SecAggDevice.refuse(Refusal.Kind.MISMATCH, "a request for another job, round or invitation");
    }
    return switch (request.getPhaseCase()) {
      case ROSTER -> SecAggWire.shares(invitation, device.share(SecAggWire.roster(request.getRoster())));
      case INBOX -> SecAggWire.masked(invitation, device.mask(SecAggWire.inbox(request.getInbox())));
      case SURVIVORS -> SecAggWire.unmask(invitation, device.unmask(request.getSurvivors().getIndicesList()));
      default -> throw SecAggDevice.refuse(Refusal.Kind.PROTOCOL, "a second setup for one invitation");
    };
  }
}
