"""Empirical privacy audits: ``triehh audit`` of the real pipeline, what it audits, and the audit
of one noisy prefix round's mechanism. Imports the base of ``evaluation``."""
