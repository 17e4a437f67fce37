"""Every random decision of a release, keyed: SipHash-2-4, the per-round user sampling and item
choice, bottom-m sampling, and the discrete Laplace noise. Imports the base and ``items``."""
