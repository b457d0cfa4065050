"""Capture: cases (and tensors) from the user's own evidence, and what goes back out.

* :mod:`.flashinfer_log` -- FlashInfer's ``@flashinfer_api`` level-3/5 logs -> :class:`~.derive.SourcedCase` s
  (every :class:`~fp4moe_diag.problem.case.MoECase` field with the log line it came from).
* :mod:`.dump` -- level-10 Flight-Recorder dumps -> a case plus the recorded tensors in the suite's canonical
  layout (:func:`.dump.inputs_from_dump`), the inverse of FlashInfer's weight preparation (:mod:`.layouts`).
* :mod:`.source` -- ``"log:PATH"`` / ``"dump:DIR"``: what ``sweep --from-log/--from-dump`` runs.
* :mod:`.bundle` -- a bug bundle with a generated standalone repro script.
* :mod:`.fib` -- FlashInfer-Bench trace-set export.
"""
