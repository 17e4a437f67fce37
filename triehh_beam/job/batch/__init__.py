"""A discovery over records at rest: the multi-round driver, the Beam graphs it runs and how one
runs, the census, passes and levels, and the whole-item, noisy-rounds and estimate jobs. Imports
``state``, ``settings`` and ``release``."""
