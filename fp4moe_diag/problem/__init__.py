"""The problem model: one routed FP4 MoE call (:class:`~.case.MoECase`), its routing, FP4 quantization, the inputs
vLLM builds for it, the float32 reference, the vLLM shape table and the vLLM log parser.  Evidence from FlashInfer
itself (API logs, Flight-Recorder dumps) becomes cases in :mod:`fp4moe_diag.capture`."""
