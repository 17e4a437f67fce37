package org.triehh.device;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * A fleet of Java devices in one JVM, for the end-to-end test (tests/e2e/test_federated_java_fleet.py):
 * the test does the Pub/Sub I/O and hands each invitation here with its announcement.
 *
 * <p>Usage: {@code FleetMain <records.tsv>}, the file one record a line:
 * {@code <device id hex> TAB <t|b|i> TAB <item: UTF-8 hex, bytes hex, or decimal> TAB <count>}.
 * Then on stdin, one request a line: {@code <device id hex> <announcement hex> <invitation hex>};
 * on stdout, one answer a line: {@code R <report hex>}, or {@code X <refusal code>}. Under secure
 * aggregation: {@code S <session> <device id hex> <announcement hex> <setup hex>} starts a
 * {@link SecureVoteSession} (answer: its keys) and {@code H <session> <request hex>} answers a
 * later request of it ({@code <session>} is any name the caller gives a device's run of a round).
 */
public final class FleetMain {
  private FleetMain() {}

  public static void main(String[] args) throws IOException {
    HexFormat hex = HexFormat.of();
    Map<String, List<Record>> records = new HashMap<>();
    for (String line : Files.readAllLines(Path.of(args[0]), StandardCharsets.US_ASCII)) {
      String[] f = line.split("\t");
      Object item = switch (f[1]) {
        case "t" -> new String(hex.parseHex(f[2]), StandardCharsets.UTF_8);
        case "b" -> hex.parseHex(f[2]);
        case "i" -> new BigInteger(f[2]);
        default -> throw new IllegalArgumentException("item type " + f[1]);
      };
      records.computeIfAbsent(f[0], k -> new ArrayList<>()).add(new Record(item, Long.parseLong(f[3])));
    }
    Map<String, DeviceClient> devices = new HashMap<>();
    records.forEach((id, held) -> devices.put(id, new DeviceClient(held, hex.parseHex(id))));
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
    BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII));
    out.write("ready " + devices.size() + "\n");
    out.flush();
    Map<String, SecureVoteSession> sessions = new HashMap<>();
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      String[] f = line.split(" ");
      String answer;
      if (f[0].equals("S") || f[0].equals("H")) {
        answer = secure(f, devices, sessions, hex);
        out.write(answer + "\n");
        out.flush();
        continue;
      }
      DeviceClient device = devices.get(f[0]);
      if (device == null) {
        answer = "X unknown-device";
      } else {
        try {
          answer = "R " + hex.formatHex(device.respondBytes(hex.parseHex(f[1]), hex.parseHex(f[2])));
        } catch (Refusal refusal) {
          answer = "X " + refusal.code();
        }
      }
      out.write(answer + "\n");
      out.flush();
    }
  }

  private static String secure(String[] f, Map<String, DeviceClient> devices, Map<String, SecureVoteSession> sessions,
      HexFormat hex) {
    try {
      if (f[0].equals("S")) {
        DeviceClient device = devices.get(f[2]);
        if (device == null) {
          return "X unknown-device";
        }
        SecureVoteSession session = SecureVoteSession.start(device, hex.parseHex(f[3]), hex.parseHex(f[4]));
        sessions.put(f[1], session);
        return "R " + hex.formatHex(session.keys());
      }
      SecureVoteSession session = sessions.get(f[1]);
      return session == null ? "X unknown-session" : "R " + hex.formatHex(session.handle(hex.parseHex(f[2])));
    } catch (Refusal refusal) {
      return "X " + refusal.code();
    }
  }
}
