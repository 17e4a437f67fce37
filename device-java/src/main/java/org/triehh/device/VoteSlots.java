package org.triehh.device;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The slots of a round's vote vector under secure aggregation (the Python {@code vote_slots}):
 * in a vote round every frontier prefix extended by each alphabet unit of the setup and by the end
 * marker, sorted unit by unit by their bytes; in the estimate round the announced targets; then
 * {@code other} (a vote for a prefix not listed) and {@code abstain}.
 */
final class VoteSlots {
  private final List<UnitSequence> candidates;
  private final Map<UnitSequence, Integer> index = new HashMap<>();

  private VoteSlots(List<UnitSequence> candidates) {
    this.candidates = candidates;
    for (int i = 0; i < candidates.size(); i++) {
      index.put(candidates.get(i), i);
    }
  }

  /**
   * The round's slots.
   *
   * @throws Refusal ({@code secagg:invalid}) an alphabet unit that is not a unit of the
   *     announced encoding, an alphabet in the estimate round, or another slot count than the
   *     setup's
   */
  static VoteSlots of(Announcement announcement, List<byte[]> alphabet, long slots) throws Refusal {
    List<UnitSequence> candidates = new ArrayList<>();
    if (announcement.isEstimate()) {
      if (!alphabet.isEmpty()) {
        throw invalid("an alphabet in the estimate round (its slots are the targets)");
      }
      candidates.addAll(announcement.targets);
    } else {
      ItemEncoder encoder = announcement.encoder;
      Set<UnitSequence> units = new LinkedHashSet<>();
      for (byte[] unit : alphabet) {
        if (encoder.kind == ItemEncoder.Kind.TEXT && Unicode.decodeUtf8(unit) == null) {
          throw invalid("alphabet: a unit is not UTF-8");
        }
        UnitSequence one = new UnitSequence(new byte[][] {unit});
        String problem = encoder.prefixProblem(one);
        if (problem != null) {
          throw invalid("alphabet unit " + one + " " + problem);
        }
        units.add(one);
      }
      units.add(new UnitSequence(new byte[][] {new byte[0]}));
      for (UnitSequence prefix : announcement.frontier) {
        for (UnitSequence unit : units) {
          byte[][] extended = new byte[prefix.size() + 1][];
          for (int i = 0; i < prefix.size(); i++) {
            extended[i] = prefix.unit(i);
          }
          extended[prefix.size()] = unit.unit(0);
          candidates.add(new UnitSequence(extended));
        }
      }
    }
    Collections.sort(candidates);
    if (candidates.size() + 2L != slots) {
      throw invalid("the round has " + (candidates.size() + 2) + " slots, the setup says " + slots);
    }
    return new VoteSlots(Collections.unmodifiableList(candidates));
  }

  private static Refusal invalid(String problem) {
    return SecAggDevice.refuse(Refusal.Kind.INVALID, problem);
  }

  /** The vector's length: the candidates, {@code other} and {@code abstain}. */
  int length() {
    return candidates.size() + 2;
  }

  /** 1 in the slot of {@code vote} (a prefix, or null to abstain), 0 elsewhere. */
  int[] oneHot(UnitSequence vote) {
    int[] vector = new int[length()];
    Integer slot = vote == null ? Integer.valueOf(candidates.size() + 1) : index.get(vote);
    vector[slot == null ? candidates.size() : slot] = 1;
    return vector;
  }
}
