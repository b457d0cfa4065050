"""Shared helpers of the slim FlashInfer SM90 CUTLASS fused-MoE builds (bf16 x MXFP4 only).

Used by ``tools/cutlass_slim/build_cutlass_sm90_slim.py`` (FlashInfer 0.5.2) and
``tools/cutlass_slim/build_cutlass_sm90_slim_074.py`` (FlashInfer 0.7.4).  Everything here drives the
*installed* flashinfer (its JitSpec/ninja writer, nvcc flags, kernel generator) and writes only
under ``--out``; no FlashInfer source is copied.

Pieces:

* CLI (:func:`add_cli`, :func:`finish_args`) and environment (:func:`setup_env`);
* :func:`collect_instantiations` / :func:`write_kernel_files`: pick launcher instantiations out
  of ``generate_gemm_operations`` output, one kernel per generated ``.cu``;
* ``cutlass_slim_symbols``: the stubs for still-undefined ``tensorrt_llm::`` symbols, the link-only
  libcuda, and ``verify`` (the built module's dynamic-symbol picture);
* :func:`run_ninja`, :func:`smoke`, :func:`publish`;
* :func:`run_build`: the whole compile -> stub -> link -> verify -> dist flow;
* :func:`install_prebuilt` (GPU host): make FlashInfer's module getter return a prebuilt .so.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import cutlass_slim_symbols as symbols  # tools/cutlass_slim is sys.path[0] (or on PYTHONPATH) wherever this is imported

HEADER_WHEELS = ("nvidia-curand>=10.4.0,<10.4.1", "nvidia-cublas>=13.0,<13.1")


# --------------------------------------------------------------------------- GPU side
def install_prebuilt(so_path) -> object:
    """Make the installed FlashInfer's CUTLASS module getter return the prebuilt .so (call before first use):
    the package's own loader, :func:`fp4moe_diag.backends.flashinfer.prebuilt.install`, which also refuses a
    .so built for the other FlashInfer generation (fp4moe_diag installed, or on PYTHONPATH as gpu_session.sh has it)."""
    try:
        from fp4moe_diag.backends.flashinfer import prebuilt
    except ImportError as e:
        raise ImportError(f"install_prebuilt: {e}; pip install -e . or PYTHONPATH=<repository>") from None

    return prebuilt.install("cutlass_fused_moe_sm90", so_path)


def install_aot(so_path: Path, module_name: str) -> Path:
    """Copy the .so to flashinfer's fallback AOT slot ``<flashinfer>/data/aot/<m>/<m>.so``,
    which ``JitSpec.build_and_load`` loads before any ninja run (0.5.2 and 0.7.4)."""
    from flashinfer.jit import env as jit_env

    dst = jit_env.FLASHINFER_AOT_DIR / module_name / f"{module_name}.so"
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(so_path, dst)
    return dst


# --------------------------------------------------------------------------- CLI / env
def add_cli(ap: argparse.ArgumentParser, default_out: Path, default_name: str,
            n_fast: str, n_full: str) -> None:
    ap.add_argument("--out", type=Path, default=default_out, help="build root (outside the repo)")
    ap.add_argument("--name", default=None,
                    help=f"JitSpec name (default {default_name}, or {default_name}_full)")
    ap.add_argument("--tactics", choices=("fast", "full"), default="fast",
                    help=f"fast = tiles offered by FlashInfer's FAST_BUILD heuristic ({n_fast}); "
                         f"full = every tile the normal heuristic offers ({n_full})")
    ap.add_argument("--per-file", type=int, default=1, help="kernel instantiations per .cu")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--cuda-home", default=None)
    ap.add_argument("--extra-include", action="append", default=None,
                    help="extra -isystem dirs (curand/cublas headers); "
                         "default: OUT/deps/nvidia/cu13/include")
    ap.add_argument("--fetch-deps", action="store_true",
                    help="pip-download curand/cublas wheels and unpack their headers into OUT/deps")
    ap.add_argument("--only-generate", action="store_true")
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--verify-only", action="store_true", help="only re-run the .so checks")
    ap.add_argument("--install-aot", type=Path, metavar="SO",
                    help="(GPU host) copy SO to flashinfer's AOT slot for the stock module and exit")


def finish_args(args, default_name: str) -> None:
    args.out = args.out.resolve()
    if args.name is None:
        args.name = default_name + ("_full" if args.tactics == "full" else "")
    if args.fetch_deps:
        print("headers in", fetch_header_deps(args.out))
    if args.extra_include is None:
        d = args.out / "deps/nvidia/cu13/include"
        args.extra_include = [str(d)] if d.exists() else []


def fetch_header_deps(out: Path) -> Path:
    """curand_kernel.h / cublasLt.h are included by the CUTLASS/TRT-LLM headers but are not
    part of a minimal CUDA toolkit: take only the include/ trees of the PyPI wheels."""
    import zipfile

    dl, dst = out / "deps_dl", out / "deps"
    dl.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dl),
                    *HEADER_WHEELS], check=True)
    for whl in dl.glob("nvidia_*.whl"):
        with zipfile.ZipFile(whl) as z:
            for n in z.namelist():
                if "/include/" in n:
                    z.extract(n, dst)
        whl.unlink()
    return dst / "nvidia/cu13/include"


def setup_env(args) -> None:
    # All of these are read by flashinfer at import time / first use.
    os.environ["FLASHINFER_WORKSPACE_BASE"] = str(args.out / "ws")
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")  # no GPU query
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")
    os.environ["MAX_JOBS"] = str(args.jobs)
    if getattr(args, "cuda_home", None):
        os.environ["CUDA_HOME"] = args.cuda_home
    elif "CUDA_HOME" not in os.environ and Path("/usr/local/cuda/include/cuda.h").exists():
        os.environ["CUDA_HOME"] = "/usr/local/cuda"
    inc = [f"-isystem {d}" for d in args.extra_include]
    if inc:
        for var in ("FLASHINFER_EXTRA_CUDAFLAGS", "FLASHINFER_EXTRA_CFLAGS"):
            os.environ[var] = " ".join([os.environ.get(var, "")] + inc).strip()
    # link-time stub libcuda.so (build host has no driver); see write_libcuda_stub
    old = os.environ.get("FLASHINFER_EXTRA_LDFLAGS", "")
    os.environ["FLASHINFER_EXTRA_LDFLAGS"] = f"{old} -L{args.out / 'linkstubs'}".strip()


def write_if_different(path: Path, content: str) -> None:
    if path.exists() and path.read_text() == content:
        return
    path.write_text(content)


# --------------------------------------------------------------------------- sources
_NS_RE = re.compile(r"namespace\s+tensorrt_llm\s*\{\s*namespace\s+kernels\s*\{\s*namespace\s+(\w+)")


def parse_inst(text: str):
    """-> (normalised text, tile MxNxK, cluster, 'coop'|'pingpong'|'single_warpgroup_prefill'|'..._rolling');
    the last two: 0.7.4's Humming small-K launcher (``MainloopScheduleType::SINGLE_WARPGROUP_*``)."""
    t = " ".join(text.split())
    ints = [int(x) for x in re.findall(r"cute::Int<(\d+)>", t)]
    tile, cluster = tuple(ints[0:3]), tuple(ints[3:6])
    sched = "coop" if "gemm::KernelTmaWarpSpecializedCooperative" in t else "pingpong"
    sw = re.search(r"MainloopScheduleType::(SINGLE_WARPGROUP_\w+)", t)
    sched = sw.group(1).lower() if sw else sched
    return t, tile, cluster, sched


def collect_instantiations(probe: Path, launcher: str, dtype_prefix: str, wanted):
    """Scan generator output for ``template void <launcher><dtype_prefix ...>(...);`` and keep
    those with ``wanted(tile, cluster, sched)``.
    Returns (header, namespace, kept items sorted, number of matching instantiations)."""
    inst_re = re.compile(r"template void " + launcher + r"<.*?\);", re.S)
    header = namespace = None
    insts, seen = {}, set()
    for f in sorted(probe.rglob("*Mixed*.generated.cu")):
        text = f.read_text()
        for m in inst_re.finditer(text):
            body = m.group(0)
            if dtype_prefix not in " ".join(body.split()):
                continue
            norm, tile, cluster, sched = parse_inst(body)
            seen.add(norm)
            if header is None:
                header = text.split("namespace tensorrt_llm")[0].strip()
                ns = _NS_RE.search(text)
                namespace = f"tensorrt_llm::kernels::{ns.group(1) if ns else 'cutlass_kernels'}"
            if wanted(tile, cluster, sched):
                insts.setdefault(norm, (tile, cluster, sched, body))
    if not insts:
        raise RuntimeError(f"no {dtype_prefix} {launcher} instantiations in generator output")
    return header, namespace, sorted(insts.values(), key=lambda v: v[:3]), len(seen)


def write_kernel_files(gen: Path, stem: str, header: str, namespace: str, items, per: int):
    files = []
    per = max(1, per)
    width = max(2, len(str((len(items) - 1) // per)))  # 0.5.2 full build: _00 .. _40
    for i in range(0, len(items), per):
        f = gen / f"{stem}_{i // per:0{width}d}.generated.cu"
        lines = [header, f"namespace {namespace} {{", ""]
        for tile, cluster, sched, body in items[i : i + per]:
            lines += [f"// tile {tile} cluster {cluster} {sched}", body, ""]
        lines += [f"}}  // namespace {namespace}", ""]
        write_if_different(f, "\n".join(lines))
        files.append(f)
    for old in gen.glob(f"{stem}_*.generated.cu"):  # from an earlier, larger selection
        if old not in files:
            old.unlink()
    return files


def run_generator(gen: Path, generate_gemm_operations) -> Path:
    probe = gen / "fi_generated"
    if probe.exists():
        shutil.rmtree(probe)
    probe.mkdir(parents=True)
    generate_gemm_operations(probe, "90;90-real")  # flashinfer's own generator
    return probe


def run_ninja(jit_dir: Path, ninja_path: Path, jobs: int, targets=()):
    cmd = ["nice", "-n", "10", "ninja", "-v", "-C", str(jit_dir), "-f", str(ninja_path),
           "-j", str(jobs), *targets]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def smoke(so: Path, init_args: str, extra: str = "") -> int:
    """CPU-host check in a fresh interpreter: ``LD_BIND_NOW=1 tvm_ffi.load_module(so)`` and
    ``init(<init_args>)``, which must get as far as its first CUDA call (no GPU here); then ``extra``, which may
    import this kit's modules (tools/ leads the child's ``PYTHONPATH``)."""
    code = (
        "import torch, tvm_ffi\n"
        f"m = tvm_ffi.load_module({str(so)!r})\n"
        "print('smoke: LD_BIND_NOW=1 load_module OK')\n"
        "try:\n"
        f"    m.init({init_args})\n"
        "    print('smoke: init returned')\n"
        "except Exception as e:\n"
        "    print('smoke: init ->', type(e).__name__, str(e).strip().splitlines()[-1][:240])\n"
        + extra
    )
    path = os.pathsep.join(p for p in (str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, LD_BIND_NOW="1", PYTHONPATH=path)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    print(r.stdout + r.stderr[-2000:], end="")
    return r.returncode


def publish(so: Path, out: Path) -> None:
    dist = out / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    shutil.copy2(so, dist / so.name)
    subprocess.run(["xz", "-T1", "-9", "-k", "-f", str(dist / so.name)], check=True)
    digest = subprocess.run(["sha256sum", so.name, so.name + ".xz"], cwd=dist,
                            capture_output=True, text=True).stdout
    (dist / (so.name + ".sha256")).write_text(digest)
    print(f"copied to {dist / so.name} ({so.stat().st_size / 2**20:.1f} MiB; "
          f".xz {(dist / (so.name + '.xz')).stat().st_size / 2**20:.1f} MiB)")


# --------------------------------------------------------------------------- flow
def ninja_objects(ninja_path: Path, name: str):
    """(ninja target, source) of every compile step, as flashinfer's ninja writer names them
    (0.5.2: ``$name/x.cuda.o``; 0.7.4: absolute, ``<parent>_x.cuda.o``)."""
    out = []
    for line in Path(ninja_path).read_text().splitlines():
        m = re.match(r"build (\S+): (compile|cuda_compile) (\S+)", line)
        if m:
            out.append((m.group(1).replace("$name", name), m.group(3)))
    return out


def run_build(args, spec, jit_dir: Path, items, n_generated: int, stubs: Path, launcher: str,
              what: str, exports, expected_stubs: int, t0: float, smoke_args=None) -> int:
    """--only-generate / --build flow shared by both FlashInfer versions.  ``expected_stubs``:
    launcher instantiations the dispatcher references but the slim build does not compile."""
    spec.write_ninja()
    objs = ninja_objects(spec.ninja_path, spec.name)
    print(f"JitSpec {spec.name}: {len(spec.sources)} sources -> {len(objs)} objects "
          f"({len(items)} of {n_generated} generated {launcher} kernels, tactics={args.tactics})")
    print("ninja file:", spec.ninja_path)
    print("library   :", spec.jit_library_path)
    for s in spec.sources:
        print("   ", s)
    if args.only_generate or not args.build:
        return 0
    (args.out / "linkstubs").mkdir(parents=True, exist_ok=True)
    real = [(t, src) for t, src in objs if Path(src) != stubs]
    real_objs = [Path(t) if Path(t).is_absolute() else jit_dir / t for t, _ in real]
    t1 = time.time()
    run_ninja(jit_dir, spec.ninja_path, args.jobs, [t for t, _ in real])
    print(f"compile phase: {time.time() - t1:.0f} s", flush=True)
    missing, other = symbols.write_stubs(real_objs, stubs, spec.name, what)
    n_launch = sum(launcher in s for s in missing)
    print(f"stubbed {len(missing)} tensorrt_llm symbols; {n_launch} of them are un-offered "
          "mixed-input tiles")
    if n_launch != expected_stubs:
        print(f"WARNING: expected {expected_stubs} stubbed launcher tiles, got {n_launch}: this "
              "FlashInfer's dispatcher/heuristic differ from what the script assumes; tactics "
              "hitting a stub raise 'not compiled in this slim build'", flush=True)
    print("driver symbols via link-stub libcuda.so:", symbols.write_libcuda_stub(args.out, other))
    run_ninja(jit_dir, spec.ninja_path, args.jobs)
    so = spec.jit_library_path
    print(f"build wall time: {time.time() - t0:.0f} s ({(time.time() - t0) / 60:.1f} min)")
    bad = symbols.verify(so, exports)
    if bad:
        print("ERROR: unresolved symbols / missing exports:", bad[:10])
        return 1
    if smoke_args is not None and smoke(so, *smoke_args):
        print("ERROR: smoke test failed")
        return 1
    publish(so, args.out)
    print(f"OK: {so}")
    return 0
