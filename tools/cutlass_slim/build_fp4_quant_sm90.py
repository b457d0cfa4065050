#!/usr/bin/env python3
"""Build FlashInfer's own SM90 fp4 quantization module (``fp4_quantization_90``) on a CPU host.

``flashinfer.fp4_quantize`` JIT-compiles this module (7 sources) on first use.  This drives the
installed flashinfer's unmodified ``gen_fp4_quantization_sm90_module`` spec with nvcc and no GPU
(arch list 9.0a, CUDA headers from ``--extra-include``, link-time libcuda stub) and copies the
``.so`` + ``.so.xz`` to ``OUT/dist``.  On the GPU host ``FP4MOE_FP4QUANT_MODULE=<.so[.xz]>``
makes :mod:`fp4moe_diag.backends.flashinfer.prebuilt` load it instead of compiling (``tests/test_quant_gpu.py``
does so).  Measured here: 7 objects, about 1 minute on 2 cores.

    python tools/cutlass_slim/build_fp4_quant_sm90.py [--out /work/fp4q] [--fetch-deps]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import build_cutlass_sm90_slim as slim  # tools/ is sys.path[0] when this runs as a script (its DEFAULT_OUT)
import cutlass_slim_common as common  # the kit's env/header/stub helpers
import cutlass_slim_symbols as symbols  # stubs, the link-only libcuda, verify


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/work/fp4q"))
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--cuda-home", default=None)
    ap.add_argument("--extra-include", action="append", default=None)
    ap.add_argument("--fetch-deps", action="store_true", help="fetch cublasLt/curand headers into OUT/deps")
    args = ap.parse_args(argv)
    args.out = args.out.resolve()
    if args.fetch_deps:
        common.fetch_header_deps(args.out)
    if args.extra_include is None:
        d = args.out / "deps/nvidia/cu13/include"
        fallback = slim.DEFAULT_OUT / "deps/nvidia/cu13/include"
        args.extra_include = [str(p) for p in (d, fallback) if p.exists()][:1]
    common.setup_env(args)
    symbols.write_libcuda_stub(args.out, [])

    from flashinfer.jit.fp4_quantization import gen_fp4_quantization_sm90_module

    spec = gen_fp4_quantization_sm90_module()
    t0 = time.time()
    spec.build(verbose=False)
    so = spec.get_library_path()
    print(f"built {so} in {time.time() - t0:.0f} s ({so.stat().st_size / 2**20:.1f} MiB)")
    dist = args.out / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    shutil.copy2(so, dist / so.name)
    subprocess.run(["xz", "-T1", "-9", "-k", "-f", str(dist / so.name)], check=True)
    print("copied to", dist / (so.name + ".xz"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
