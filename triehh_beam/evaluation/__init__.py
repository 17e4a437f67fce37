"""Harnesses that run jobs to judge them: evaluation runs against the rivals (``experiment``), the
privacy audit of the real pipeline, the frequency-estimate and deny-list evaluations, the bundled
demo population, and a simulated fleet of devices for federated rounds (``fleet``, its faults in
``fleet_faults``); the oracles they compare with are in ``reference``, what they draw in ``present``."""
