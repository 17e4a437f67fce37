"""Evaluating TrieHH: utility metrics, the local-DP rival PEM, the central-DP rival PipelineDP
(optional), the reference simulation, evaluation runs and their reports, the bundled demo
population, and a simulated fleet of devices for federated rounds (``fleet``, with its faults in
``fleet_faults``)."""
