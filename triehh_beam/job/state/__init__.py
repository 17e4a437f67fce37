"""What a job keeps and how it keeps it safely: compare-and-swap objects, the lease on a state
directory, the append-only record log and the privacy ledger on it, the versioned state store,
progress files and the clean-up of what a refused run created. Imports no other room of ``job``."""
