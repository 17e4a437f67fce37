package org.triehh.device;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import triehh_beam.Federated;
import triehh_beam.TrieOuterClass.Encoding;

/**
 * The worked example of docs/federated_protocol.md, written as a server would send it: a device
 * holding "hello" once and "tree" three times, round 2, frontier {h, t}.
 */
class DeviceClientTest {
  private static final String JOB = "job-example";
  private static final byte[] DEVICE = "device-7".getBytes(StandardCharsets.UTF_8);
  private static final byte[] TOKEN = new byte[16];
  private static final List<Record> RECORDS = Arrays.asList(new Record("hello", 1), new Record("tree", 3));

  /** Round 2 of text items, unit size 1, L = 10; the frontier "h", "t" front-coded. */
  private static byte[] announcement(String frontierUnits) {
    return Federated.RoundAnnouncement.newBuilder()
        .setSchemaVersion(1).setJobId(JOB).setRoundIndex(2)
        .setEncoding(Encoding.newBuilder().setKind(Encoding.Kind.TEXT).setUnitSize(1).setMaxLength(10))
        .setLongItems(Federated.RoundAnnouncement.LongItems.DROP).setDeadlineMillis(1_790_000_000_000L)
        .addAllFrontierShared(frontierUnits.length() == 2 ? Arrays.asList(0, 0) : Arrays.asList(0))
        .setFrontierUnits(ByteString.copyFromUtf8(frontierUnits)).setFrontierUnitWidth(1)
        .setFrontierCount(frontierUnits.length())
        .build().toByteArray();
  }

  private static byte[] invitation(long choiceWord, byte[] device) {
    return Federated.Invitation.newBuilder()
        .setSchemaVersion(1).setJobId(JOB).setRoundIndex(2).setDeviceId(ByteString.copyFrom(device))
        .setToken(ByteString.copyFrom(TOKEN)).setChoiceWord(choiceWord)
        .build().toByteArray();
  }

  private static Federated.VoteReport answer(String frontier, long word) throws Exception {
    byte[] report = new DeviceClient(RECORDS, DEVICE).respondBytes(announcement(frontier), invitation(word, DEVICE));
    return Federated.VoteReport.parseFrom(report);
  }

  private static String prefix(Federated.VoteReport report) {
    StringBuilder out = new StringBuilder();
    report.getPrefix().getUnitsList().forEach(u -> out.append(u.toStringUtf8()));
    return out.toString();
  }

  @Test
  void aWordBelowAQuarterDrawsHelloAndVotesHe() throws Exception {
    Federated.VoteReport report = answer("ht", (1L << 62) - 1);
    assertEquals("he", prefix(report));
    assertEquals(JOB, report.getJobId());
    assertEquals(2, report.getRoundIndex());
    assertArrayEquals(TOKEN, report.getToken().toByteArray());
  }

  @Test
  void aWordOfAQuarterOrMoreDrawsTreeAndVotesTr() throws Exception {
    assertEquals("tr", prefix(answer("ht", 1L << 62)));
    assertEquals("tr", prefix(answer("ht", -1L))); // 2^64 - 1, the largest word
  }

  @Test
  void aDrawOffTheFrontierAbstainsAndNeverFallsBack() throws Exception {
    Federated.VoteReport report = answer("h", 1L << 63); // draws "tree": "t" is not on the frontier
    assertTrue(report.hasAbstain());
    assertFalse(report.hasPrefix());
  }

  @Test
  void theAnswerIsAFunctionOfTheRecordsAndTheMessages() throws Exception {
    DeviceClient device = new DeviceClient(RECORDS, DEVICE);
    byte[] first = device.respondBytes(announcement("ht"), invitation(5, DEVICE));
    assertArrayEquals(first, device.respondBytes(announcement("ht"), invitation(5, DEVICE)));
  }

  @Test
  void anInvitationForAnotherDeviceIsRefused() {
    Refusal refusal = assertThrows(Refusal.class, () -> new DeviceClient(RECORDS, DEVICE)
        .respondBytes(announcement("ht"), invitation(5, "device-8".getBytes(StandardCharsets.UTF_8))));
    assertEquals("invitation:mismatch", refusal.code());
  }

  @Test
  void aCutAnnouncementIsRefused() {
    byte[] whole = announcement("ht");
    Refusal refusal = assertThrows(Refusal.class, () -> new DeviceClient(RECORDS)
        .respondBytes(Arrays.copyOf(whole, whole.length - 2), invitation(5, DEVICE)));
    assertEquals(Refusal.Message.ANNOUNCEMENT, refusal.message());
  }

  @Test
  void badArgumentsAreRefusedWhenBuilt() {
    assertThrows(IllegalArgumentException.class, () -> new Record("a", -1));
    assertThrows(NullPointerException.class, () -> new Record(null, 1));
    assertThrows(IllegalArgumentException.class, () -> new DeviceClient(RECORDS, new byte[0]));
  }
}
