"""FlashInfer's fused-MoE entry points as backends: :mod:`.cutlass` (``cutlass_fused_moe``), :mod:`.trtllm`
(trtllm-gen routed MoE); :mod:`.base` (what they share), :mod:`.hooks` (FlashInfer's AutoTuner seen from
outside: recording, stubbing, committing tactics), :mod:`.prebuilt` (carried JIT modules).
Importing this package imports no flashinfer."""
