package org.triehh.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The shared secure-aggregation vectors (tests/vectors/secagg_vectors.json, generated from the
 * Python reference): every device, replayed from its records, its seeded secrets (Python's
 * {@code random.Random(seed).randbytes}, {@link PythonRandom}) and the server's requests, sends
 * exactly the committed report bytes: X25519, HKDF, AES-GCM, the AES-CTR masks, Shamir's shares
 * and every secure-aggregation message through protobuf-java. A one-byte change in a committed
 * report is caught, and one in a request's ciphertext is refused, as in the Python suite
 * (tests/device/test_secagg_vectors.py); every refusal vector (a request cut, of another version,
 * round or token, replayed, a second setup) is refused with the Python library's kind.
 */
class SecAggVectorsTest {
  private static final String PY_1000_7 = "4cd800c777d16d";
  private static final String PY_1000_NEXT_4 = "05b079ab";
  private static final HexFormat HEX = HexFormat.of();
  private static JsonObject vectors;
  private static Announcement announcement;

  @BeforeAll
  static void load() throws IOException, Refusal {
    Path path = Path.of(System.getProperty("triehh.secaggVectors", "../tests/vectors/secagg_vectors.json"));
    vectors = JsonParser.parseString(Files.readString(path, StandardCharsets.US_ASCII)).getAsJsonObject();
    assertEquals("triehh-secagg-vectors/1", vectors.get("format").getAsString());
    announcement = Announcement.read(HEX.parseHex(vectors.get("announcement").getAsString()));
  }

  private static JsonObject device(int i) {
    return vectors.getAsJsonArray("devices").get(i).getAsJsonObject();
  }

  private static List<byte[]> requests(JsonObject device) {
    List<byte[]> out = new ArrayList<>();
    for (JsonElement exchange : device.getAsJsonArray("exchanges")) {
      out.add(HEX.parseHex(exchange.getAsJsonObject().get("request").getAsString()));
    }
    return out;
  }

  private static List<Record> records(JsonObject device) {
    List<Record> records = new ArrayList<>();
    for (JsonElement pair : device.getAsJsonArray("records")) {
      records.add(new Record(pair.getAsJsonArray().get(0).getAsString(), pair.getAsJsonArray().get(1).getAsLong()));
    }
    return records;
  }

  /** The Java device's report (hex) to each request, replayed from the device's seed. */
  private static List<String> replay(JsonObject device, List<byte[]> requests) throws Refusal {
    SecureVoteSession session = SecureVoteSession.start(new DeviceClient(records(device)), announcement, requests.get(0),
        new PythonRandom(device.get("seed").getAsLong()));
    List<String> reports = new ArrayList<>();
    reports.add(HEX.formatHex(session.keys()));
    for (byte[] request : requests.subList(1, requests.size())) {
      reports.add(HEX.formatHex(session.handle(request)));
    }
    return reports;
  }

  /** The exchanges whose committed report differs from the Java device's, as "device/exchange". */
  private static List<String> disagreements(JsonObject device, int number) throws Refusal {
    List<String> got = replay(device, requests(device));
    List<String> wrong = new ArrayList<>();
    for (int e = 0; e < got.size(); e++) {
      String expected = device.getAsJsonArray("exchanges").get(e).getAsJsonObject().get("report").getAsString();
      if (!got.get(e).equals(expected)) {
        wrong.add(number + "/" + e);
      }
    }
    return wrong;
  }

  @Test
  void pythonRandomReplaysCPython() {
    // random.Random(1000).randbytes(7).hex() and then .randbytes(4).hex() in CPython 3.11.
    PythonRandom random = new PythonRandom(1000);
    assertEquals(PY_1000_7, HEX.formatHex(random.next(7)));
    assertEquals(PY_1000_NEXT_4, HEX.formatHex(random.next(4)));
  }

  @Test
  void everyDeviceSendsTheCommittedReports() throws Refusal {
    int devices = vectors.getAsJsonArray("devices").size();
    assertEquals(4, devices);
    List<String> wrong = new ArrayList<>();
    int exchanges = 0;
    for (int i = 0; i < devices; i++) {
      wrong.addAll(disagreements(device(i), i));
      exchanges += device(i).getAsJsonArray("exchanges").size();
    }
    assertEquals(14, exchanges);  // device 4 drops after sharing: keys and shares only
    assertTrue(wrong.isEmpty(), "reports that differ (device/exchange): " + wrong);
  }

  @Test
  void aOneByteChangeInACommittedReportIsCaught() throws Refusal {
    JsonObject mutated = device(0).deepCopy();
    JsonObject exchange = mutated.getAsJsonArray("exchanges").get(2).getAsJsonObject();  // the masked vector
    byte[] report = HEX.parseHex(exchange.get("report").getAsString());
    report[report.length - 1] ^= 1;
    exchange.addProperty("report", HEX.formatHex(report));
    assertEquals(List.of("0/2"), disagreements(mutated, 0));
  }

  @Test
  void aOneByteChangeInAnInboxCiphertextIsRefused() throws Refusal {
    List<byte[]> requests = requests(device(0));
    byte[] inbox = requests.get(2);
    inbox[inbox.length - 1] ^= 1;  // the last byte of the last ciphertext's GCM tag
    Refusal refusal = assertThrows(Refusal.class, () -> replay(device(0), requests));
    assertEquals("secagg:protocol", refusal.code());
    // The unchanged request is answered: the refusal is the changed byte's.
    assertNotEquals(null, replay(device(0), requests(device(0))));
  }

  /**
   * The refusal kind the Java device gives a vector's request after answering the first {@code
   * answered} committed requests of its device, or "answered".
   */
  private static String refusalOf(JsonObject refusal) throws Refusal {
    JsonObject device = device(refusal.get("device").getAsInt());
    List<byte[]> earlier = requests(device).subList(0, refusal.get("answered").getAsInt());
    SecureVoteSession session = SecureVoteSession.start(new DeviceClient(records(device)), announcement,
        earlier.get(0), new PythonRandom(device.get("seed").getAsLong()));
    session.keys();
    for (byte[] request : earlier.subList(1, earlier.size())) {
      session.handle(request);
    }
    try {
      session.handle(HEX.parseHex(refusal.get("request").getAsString()));
    } catch (Refusal refused) {
      return refused.code();
    }
    return "answered";
  }

  @Test
  void everyRefusalVectorIsRefusedWithItsKind() throws Refusal {
    List<String> wrong = new ArrayList<>();
    int cases = 0;
    for (JsonElement element : vectors.getAsJsonArray("refusals")) {
      JsonObject refusal = element.getAsJsonObject();
      String got = refusalOf(refusal);
      if (!got.equals(refusal.get("refusal").getAsString())) {
        wrong.add(refusal.get("name").getAsString() + ": " + got);
      }
      cases++;
    }
    assertEquals(6, cases);
    assertTrue(wrong.isEmpty(), "refusals that differ from the Python library's: " + wrong);
  }
}
