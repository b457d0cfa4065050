"""Kernel profiling with Nsight Compute: :mod:`.ncu` (metrics, CSV export and parsing), :mod:`.driver`
(the profiled process, ``python -m fp4moe_diag.profiling.driver``), :mod:`.session` (run it, read back)."""
