"""Kernel profiling with Nsight Compute: :mod:`.ncu` (metrics, CSV export and parsing), :mod:`.driver`
(the profiled process, ``python -m fp4moe_diag.profiling.driver``), :mod:`.session` (run it, read back);
:mod:`.sass` (static SASS of our Triton kernels on a CPU host: instructions per weight in the MMA loop)."""
