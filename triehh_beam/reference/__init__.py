"""Reference oracles: plain-Python simulations and metrics the pipelines are checked against."""
