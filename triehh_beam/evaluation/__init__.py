"""Harnesses that run jobs to judge them: evaluation runs against the rivals (``experiment``), the
frequency-estimate and deny-list evaluations, the bundled demo population; the privacy audits
(``audits``) and a simulated fleet of devices for federated rounds (``fleet``); the oracles they
compare with are in ``reference``, what they draw in ``present``."""
