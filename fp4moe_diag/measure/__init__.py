"""Measurement: timing (:mod:`.timing`), work and device ceilings (:mod:`.ceilings`), correctness
against the float32 reference (:mod:`.correctness`)."""

#: the seconds of back-to-back bf16 GEMMs before the sustained bf16 ceiling (:func:`.ceilings.measure_ceilings`'
#: default, every sweep's): the texts that name that figure take it from here
SUSTAIN_S = 3.0
