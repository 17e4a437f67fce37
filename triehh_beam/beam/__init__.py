"""The Beam glue of triehh-beam: PTransforms, DoFns and record I/O over the pure protocol modules."""
