"""Running a discovery as a job: its settings (defined once), the multi-round driver, the
versioned state store, the privacy ledger, and storage with compare-and-swap and a lease."""
