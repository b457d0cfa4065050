"""Measurement: timing (:mod:`.timing`), work and device ceilings (:mod:`.ceilings`), correctness
against the float32 reference (:mod:`.correctness`)."""
