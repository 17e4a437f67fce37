"""Running a discovery as a job, in rooms each importing only those before it: ``state``
(compare-and-swap, the lease, the ledger, the versioned state store), ``settings`` (every setting
defined once, the configuration, identity and pinned sources), ``release`` (the lifecycle: plan,
checks, commit, charge, outputs), ``batch`` (the multi-round driver and its graphs),
``windows`` (windowed discovery and streams) and ``federated`` (the federated server)."""
