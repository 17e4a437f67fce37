package org.triehh.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every shared test vector (tests/vectors/device_vectors.json, generated from the Python
 * reference): the Java device gives exactly the committed report bytes, or the committed refusal
 * kind; and the comparison itself catches a one-byte difference.
 */
class VectorsTest {
  private static final HexFormat HEX = HexFormat.of();
  private static JsonObject vectors;
  private static List<byte[]> messages;
  private static Map<String, DeviceClient> devices;

  @BeforeAll
  static void load() throws IOException {
    Path path = Path.of(System.getProperty("triehh.vectors", "../tests/vectors/device_vectors.json"));
    vectors = JsonParser.parseString(Files.readString(path, StandardCharsets.US_ASCII)).getAsJsonObject();
    assertEquals("triehh-device-vectors/1", vectors.get("format").getAsString());
    messages = new ArrayList<>();
    for (JsonElement message : vectors.getAsJsonArray("messages")) {
      messages.add(HEX.parseHex(message.getAsString()));
    }
    devices = new HashMap<>();
    for (Map.Entry<String, JsonElement> set : vectors.getAsJsonObject("record_sets").entrySet()) {
      JsonObject recordSet = set.getValue().getAsJsonObject();
      List<Record> records = new ArrayList<>();
      for (JsonElement pair : recordSet.getAsJsonArray("records")) {
        JsonArray itemAndCount = pair.getAsJsonArray();
        records.add(new Record(item(itemAndCount.get(0).getAsJsonObject()), itemAndCount.get(1).getAsLong()));
      }
      JsonElement id = recordSet.get("device_id");
      devices.put(set.getKey(), new DeviceClient(records, id.isJsonNull() ? null : HEX.parseHex(id.getAsString())));
    }
  }

  private static Object item(JsonObject item) {
    Map.Entry<String, JsonElement> only = item.entrySet().iterator().next();
    return switch (only.getKey()) {
      case "text" -> only.getValue().getAsString();
      case "bytes" -> HEX.parseHex(only.getValue().getAsString());
      case "bool" -> only.getValue().getAsBoolean();
      case "int" -> {
        BigInteger value = new BigInteger(only.getValue().getAsString());
        yield value.bitLength() < 64 ? (Object) value.longValueExact() : value;
      }
      default -> throw new IllegalArgumentException("unknown item type " + only.getKey());
    };
  }

  /** What the Java device answers: {@code report:<hex>} or {@code refusal:<kind>}. */
  static String answer(DeviceClient device, byte[] announcement, byte[] invitation) {
    try {
      return "report:" + HEX.formatHex(device.respondBytes(announcement, invitation));
    } catch (Refusal refusal) {
      return "refusal:" + refusal.code();
    }
  }

  private static String expected(JsonObject vector) {
    return vector.has("report") ? "report:" + vector.get("report").getAsString()
        : "refusal:" + vector.get("refusal").getAsString();
  }

  /** The vectors (name: expected, got) the Java device disagrees with. */
  static List<String> disagreements(Iterable<JsonElement> cases) {
    List<String> wrong = new ArrayList<>();
    for (JsonElement element : cases) {
      JsonObject vector = element.getAsJsonObject();
      String got = answer(devices.get(vector.get("records").getAsString()),
          messages.get(vector.get("announcement").getAsInt()), messages.get(vector.get("invitation").getAsInt()));
      if (!got.equals(expected(vector))) {
        wrong.add(vector.get("name").getAsString() + ": expected " + expected(vector) + ", got " + got);
      }
    }
    return wrong;
  }

  @Test
  void everyVectorGivesTheCommittedAnswer() {
    JsonArray cases = vectors.getAsJsonArray("cases");
    assertTrue(cases.size() > 5000, "the vectors hold " + cases.size() + " cases");
    List<String> wrong = disagreements(cases);
    assertTrue(wrong.isEmpty(), wrong.size() + " of " + cases.size() + " vectors disagree, e.g.\n"
        + String.join("\n", wrong.subList(0, Math.min(20, wrong.size()))));
  }

  @Test
  void aOneByteDifferenceInAnExpectedReportIsCaught() {
    for (JsonElement element : vectors.getAsJsonArray("cases")) {
      JsonObject vector = element.getAsJsonObject();
      if (vector.has("report") && vector.get("name").getAsString().startsWith("unicode/")) {
        byte[] report = HEX.parseHex(vector.get("report").getAsString());
        report[report.length - 1] ^= 1;
        JsonObject mutated = vector.deepCopy();
        mutated.addProperty("report", HEX.formatHex(report));
        JsonArray one = new JsonArray();
        one.add(mutated);
        assertEquals(1, disagreements(one).size());
        return;
      }
    }
    throw new AssertionError("no unicode vote vector");
  }
}
