"""Each round's sample, drawn in one read: the sampling pass, the one-read candidates, their cut
to each round (split by rank when large) and the private on-disk sample tables. Imports the base."""
