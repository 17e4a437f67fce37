"""From a privacy target to a plan: TrieHH's and TrieHH++'s planners, the parameter rules, the
honest alternatives to an infeasible target, unit-size advice and the utility bounds (Proposition
1). Imports the base and ``accounting``."""
