"""Reading device records with Arrow: one module per input format, the normalisation of
user ids, items and counts, and the accounting of dropped rows. No Beam."""
