"""Static SASS of our Triton kernels without a GPU: instructions per weight element in the MMA loop.

``python -m fp4moe_diag.profiling.sass --tactic m16n64k128w4s3-x2 [--gemm gemm2] [--k 3072] [--arch 90]``
compiles one of :mod:`fp4moe_diag.backends.triton._kernels` (``-ps``: ``_kernels_ps``, with ``-fs`` its fused ends;
``-f8``: ``_kernels_f8``; ``-p8``: ``_kernels_p8``) for ``sm_<arch>a`` with the installed Triton
(its bundled ptxas; no driver needed), disassembles it with the bundled ``nvdisasm`` and reports the loop that holds
the MMAs: its instruction count, the opcode histogram, the MMA kind (``HMMA`` = mma.sync, ``HGMMA`` = wgmma, ``QGMMA``
= FP8 wgmma) and instructions per weight element (the loop handles ``BLOCK_N x BLOCK_K`` weights per tile, two tiles
in gemm1, over ``num_warps x 32`` threads).  Integer arguments are compiled as Triton specialises them at a real
launch (pointers and strides divisible by 16), so loads vectorise as they do on the GPU.  It is a static count, not
a timing: it says whether a kernel is issue-bound, the GPU says how fast it is.

Registers (:func:`resource_usage`, and the programs / warps an SM holds with them, :func:`residency`) are this host's
build; at K = 3072 (gpt-oss as the sweeps run it, H = I = 3072) they match the H200's Nsight Compute for every tile
profiled there (m16n64k256w4s3-ps-sk2 113 / 116, m16n128k128w4s3-ps 168 / 123, m64n128k64w8s4-ps 128,
m128n128k64w8s3-ps 255) when this host's Triton is the H200 image's, 3.6.0.  Other K build other code (masks where K is
not whole BLOCK_K steps): pass the case's.

``--triton DIR`` (repeatable; ``installed`` is this Python's) builds the same tactics under other Triton releases,
each in a child Python with that release first on its path (:func:`count_under`), and ``--table`` prints one markdown
row per tactic and release; the wgmma commit groups per K step and their wait depths (:func:`mma_sync`) show how a
release pipelines the MMAs (docs/static-h200-s14.md: 3.7+ group them otherwise than 3.6.0, and hold more registers)."""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field, replace
from typing import Optional, Sequence

from ..backends.triton.configs import (ABLATIONS, KernelConfig, even_k, k_main, k_split, parse_config, ps_n_fastest,
                                        ps_scale_words, ps_tiles_first, split_k_fits)
from ..backends.triton.configs_gu import ps_gu_chunk_dots
from ..backends.triton.configs_tail import launch_pdl
from ..backends.triton.tiling import SM90_LIMITS, residency, residency_cap  # noqa: F401 (SM90_LIMITS: re-exported)
from ..environment import triton_bin_dir, triton_ptxas
from .sass_text import kernel_source, loop_bodies

_GEMMS = {
    "gemm1": (["x_ptr", "w_ptr", "ws_ptr", "b_ptr", "alpha_ptr", "beta_ptr", "limit_ptr", "out_ptr", "part_ptr",
               "sorted_pair_ptr", "block_expert_ptr"],
              ["*bf16", "*u8", "*u8", "*fp32", "*fp32", "*fp32", "*fp32", "*bf16", "*fp32", "*i32", "*i32"],
              ["num_pairs", "top_k", "N", "stride_xm", "stride_we", "stride_wn", "stride_se", "stride_sn", "stride_be",
               "stride_om", "stride_ps", "stride_pm"]),
    "gemm2": (["a_ptr", "w_ptr", "ws_ptr", "b_ptr", "topk_w_ptr", "out_ptr", "sorted_pair_ptr", "block_expert_ptr"],
              ["*bf16", "*u8", "*u8", "*fp32", "*fp32", "*fp32", "*i32", "*i32"],
              ["num_pairs", "N", "stride_am", "stride_we", "stride_wn", "stride_se", "stride_sn", "stride_be",
               "stride_om", "stride_os"]),
}
#: the W4A8 kernels of _kernels_f8 (mode f8)
_GEMMS_F8 = {
    "gemm1": (["x_ptr", "xs_ptr", "w_ptr", "ws_ptr", "we_ptr", "b_ptr", "alpha_ptr", "beta_ptr", "limit_ptr", "out_ptr",
               "sorted_pair_ptr", "block_expert_ptr"],
              ["*fp8e4nv", "*fp32", "*u8", "*u8", "*u8", "*fp32", "*fp32", "*fp32", "*fp32", "*bf16", "*i32", "*i32"],
              ["num_pairs", "top_k", "N", "stride_xm", "stride_we", "stride_wn", "stride_se", "stride_sn", "stride_ee",
               "stride_be", "stride_om"]),
    "gemm2": (["a_ptr", "as_ptr", "w_ptr", "ws_ptr", "we_ptr", "b_ptr", "topk_w_ptr", "out_ptr", "sorted_pair_ptr",
               "block_expert_ptr"],
              ["*fp8e4nv", "*fp32", "*u8", "*u8", "*u8", "*fp32", "*fp32", "*fp32", "*i32", "*i32"],
              ["num_pairs", "N", "stride_am", "stride_we", "stride_wn", "stride_se", "stride_sn", "stride_ee",
               "stride_be", "stride_om"]),
}
#: the W4A8 kernels of _kernels_p8 (mode p8): the f8 arguments with tables and slab strides
_GEMMS_P8 = {g: ([{"ws_ptr": "wt_ptr"}.get(p, p) for p in ptrs], types,
                 [{"stride_wn": "stride_ws", "stride_se": "stride_te", "stride_sn": "stride_ts"}.get(i, i) for i in ints])
             for g, (ptrs, types, ints) in _GEMMS_F8.items()}
#: the fused ends of the ps kernels (tactics ``-fs``, :mod:`fp4moe_diag.backends.triton._kernels_fused`): pointer and
#: integer arguments after the ones above, and constexprs (gpt-oss: top_k 4; no token without a local pair); the
#: ``FUSED`` constexpr switches them on
_FUSED = {
    "gemm1": ({"cnt_ptr": "*i32"}, {}),
    "gemm2": ({"y_ptr": "*bf16", "cnt_ptr": "*i32", "tok_pairs_ptr": "*i32", "orph_ptr": "*i32", "stride_ym": "i32"},
              {"TOP_K": 4, "ORPH": 0}),
}
_DEPBAR = re.compile(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*(0x[0-9a-f]+)")


@dataclass
class LoopCount:
    """The MMA loop of one compiled kernel."""
    tactic: str
    gemm: str
    arch: int
    triton_version: str
    loop_instructions: int
    weights_per_thread: int
    instructions_per_weight: float
    mma: str
    shared_bytes: int
    opcodes: dict = field(default_factory=dict)
    registers: int = 0  # per thread (cuobjdump); see the module note on which K to pass
    stack_bytes: int = 0  # stack per thread: 0 when nothing spills
    local_bytes: int = 0  # other local memory per thread
    loop_spills: int = 0  # local loads / stores (LDL / STL) inside the MMA loop
    resident_programs: int = 0  # per SM (residency; sm_90 / sm_100 limits, 0 for older archs)
    resident_warps: int = 0  # resident_programs x num_warps; / 4 per warp scheduler
    mma_groups: int = 0  # wgmma commit groups per loop iteration (the HGMMA / QGMMA that closes one: ``gsb0``)
    mma_waits: list = field(default_factory=list)  # N of each distinct ``WARPGROUP.DEPBAR.LE gsb0, N`` in the loop
    ptxas: str = ""  # the version of the ptxas that assembled it (environment.triton_ptxas)
    advisories: list = field(default_factory=list)  # ptxas' performance advisories (:func:`ptxas_advisories`)


def resident_programs(compiled, num_warps: int) -> int:
    """:func:`residency` of a compiled kernel (its registers from cuobjdump, its shared memory from Triton)."""
    return residency(resource_usage(compiled)["reg"], int(compiled.metadata.shared), num_warps)


def mma_loop(sass: str, marker: str = "MMA") -> list[str]:
    """The instructions of the innermost (smallest) backward-branch loop of ``sass`` (nvdisasm text) that holds an MMA
    (an instruction with ``marker`` in it: ``LDGSTS`` finds the K loop of a ``~load`` ablation, which has no MMA): the
    K loop, also inside the tile loop of a ``-pt`` kernel."""
    found = [body for body in loop_bodies(sass) if any(marker in t for t in body)]
    if not found:
        raise ValueError(f"sass: no loop with an {marker} instruction found")
    return min(found, key=len)


def mma_sync(body: Sequence[str]) -> tuple[int, list[int]]:
    """The wgmma groups of a loop: how many commit groups it closes per iteration (an ``HGMMA`` / ``QGMMA`` that
    carries ``gsb0``) and the distinct ``N`` of its waits (``WARPGROUP.DEPBAR.LE gsb0, N``: at most N groups still in
    flight after it; 0 waits for every wgmma issued).  While a group is in flight its accumulator, and its A operand
    where that comes from registers (our upcast weights), stay allocated: fewer, larger groups and deeper waits hold
    more registers."""
    groups = sum(1 for t in body if opcode(t) in ("HGMMA", "QGMMA") and t.rstrip(" ;").endswith("gsb0"))
    waits = sorted({int(m.group(1), 16) for t in body for m in [_DEPBAR.search(t)] if m})
    return groups, waits


def opcode(text: str) -> str:
    """``@!P0 LDG.E.128 R4, desc[...]`` -> ``LDG``."""
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def _compile(kc: KernelConfig, gemm: str, k: int, arch: int):
    import triton
    from triton.backends.compiler import GPUTarget

    from ..backends.triton import _kernels as K

    ptrs, types, ints = (_GEMMS_F8 if kc.f8 else _GEMMS_P8 if kc.p8 else _GEMMS)[gemm]
    bn = kc.gemm2_block_n if gemm == "gemm2" else kc.block_n
    const = dict(K=k, BLOCK_M=kc.block_m, BLOCK_N=bn, BLOCK_K=kc.block_k, HAS_BIAS=True,
                 EVEN_K=even_k(k, kc.block_k, kc.split_k), DOT_F32=False,
                 SPLIT_K=kc.split_k, K_SPLIT=k_split(k, kc.block_k, kc.split_k))
    if kc.f8:  # the W4A8 kernels: no split-K, no mode switches
        from ..backends.triton import _kernels_f8 as KF

        fn = KF._moe_w4a8_gemm1_kernel if gemm == "gemm1" else KF._moe_w4a8_gemm2_kernel
        del const["SPLIT_K"], const["K_SPLIT"]
        if gemm == "gemm2":
            const["N_FASTEST"] = ps_n_fastest(kc.block_m)
    elif kc.p8:  # the W4A8 kernels on the p8 layout: no split-K, no mode switches
        from ..backends.triton import _kernels_p8 as K8

        fn = K8._moe_w4a8_gemm1_p8_kernel if gemm == "gemm1" else K8._moe_w4a8_gemm2_p8_kernel
        del const["SPLIT_K"], const["K_SPLIT"]
        const["N_FASTEST"] = ps_n_fastest(kc.block_m)
    elif kc.ps:  # the pre-shuffled kernels: slab strides instead of row strides, no mode switches
        from ..backends.triton import _kernels_ps as KP

        fn = KP._moe_mxfp4_gemm1_ps_kernel if gemm == "gemm1" else KP._moe_mxfp4_gemm2_ps_kernel
        gu = kc.gate_up and gemm == "gemm1"  # -gu: gemm1 on gate/up-interleaved slabs, one tile of 2 BLOCK_N rows
        if gu:
            from ..backends.triton._kernels_ps_gu import _moe_mxfp4_gemm1_ps_gu_kernel as fn
        ints = [{"stride_wn": "stride_ws", "stride_sn": "stride_ss"}.get(i, i) for i in ints]
        const["N_FASTEST"] = ps_n_fastest(kc.block_m)
        const["SCALE_WORDS"] = ps_scale_words(2 * bn if gu else bn, kc.block_k, kc.num_warps)
        const["PDL"] = launch_pdl(kc.pdl, gemm, True, True)  # -pdlt / -pdltt: the tail launch's build
        const |= dict(ABLATE=ABLATIONS[kc.ablate], STAGES=kc.num_stages, TILE_MAJOR=kc.tile_major)  # _kernels_ablate
        const |= {"UNROLL": max(kc.unroll, 1)} if gu or gemm == "gemm2" else {}  # -uN; 3.9: every argument given
        if gu:
            const["CHUNK_DOTS"] = ps_gu_chunk_dots(kc.block_k, kc.num_warps)
        else:  # gemm2's W_FIRST: -pdlw, its first weights before its wait (launch._w_first_args)
            const |= {"TILES_FIRST": ps_tiles_first(kc.block_m, bn, kc.block_k, kc.num_warps)} if gemm == "gemm1" else {
                "W_FIRST": kc.pdl == 4}
        args, fconst = _FUSED[gemm]  # typed even when unused (Triton 3.9 wants every argument in the signature)
        ptrs, types = ptrs + [a for a in args if args[a] != "i32"], types + [t for t in args.values() if t != "i32"]
        ints = ints + [a for a in args if args[a] == "i32"]
        const |= fconst | {"FUSED": kc.fused and (gemm == "gemm2" or kc.split_k > 1)}  # gemm1's: only when split
        if not gu:  # -pt / -ptf: the tile loop (launch_bind._persistent); -pk: the K steps without K masks
            const |= dict(PERSIST=kc.persist, TILES=0, PROGRAMS=0)  # the last two: the interpreter's
            const |= dict(PEEL=kc.peel, K_MAIN=k_main(k, kc.block_k, kc.split_k))  # the split this build has
            ints = ints + ["m_blocks"]
    else:
        fn = K._moe_mxfp4_gemm1_kernel if gemm == "gemm1" else K._moe_mxfp4_gemm2_kernel
        const |= dict(DOT_SCALED=kc.dot_scaled, X2=kc.x2, SWAP=kc.swap)
    const |= {"ACTIVATION": 1} if gemm == "gemm1" else {}
    src = kernel_source(fn, dict(zip(ptrs, types)), ints, const)
    twin = replace(kc, ablate="") if kc.ablate == "nodeq" else replace(kc, pdl=1) if kc.pdl == 4 and gemm == "gemm2" \
        else None  # ~nodeq, -pdlw's gemm2: at most their twin's registers, as launch_bind._bound builds them
    cap = {} if twin is None else {"maxnreg": resource_usage(_compile(twin, gemm, k, arch))["reg"]}
    options = dict(num_warps=kc.num_warps, num_stages=kc.gemm2_stages if gemm == "gemm2" else kc.num_stages,
                   **K.BUILD_OPTIONS)
    cap |= {"maxnreg": kc.reg_cap} if kc.reg_cap and gemm == "gemm1" else {}  # -rN: gemm1 only, as the backend
    if kc.peel:  # -pk: capped where a granule of registers buys one more program an SM (launch_bind._bound)
        free = resource_usage(triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options))["reg"]
        cap = {"maxnreg": c} if (c := residency_cap(free, kc.num_warps)) else {}
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options={**options, **cap})


def ptxas_advisories(compiled, arch: int) -> list[str]:
    """The performance advisories ptxas gives on ``compiled``'s PTX (the ptxas Triton calls for ``sm_<arch>a``, run
    again with ``-v``): e.g. ``C7512: wgmma.mma_async instructions are serialized due to insufficient register
    resources ...``, which ptxas 13.3-13.4 gives on the ``-tNf`` kernels and 12.8-13.2 do not (docs/evidence-s37.md).
    Triton keeps ptxas' log only when the build fails."""
    from triton.backends.nvidia.compiler import get_ptxas

    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(compiled.asm["ptx"])
        out = subprocess.run([get_ptxas(arch).path, "-v", f"--gpu-name=sm_{arch}a", src, "-o", src + ".cubin"],
                             capture_output=True, text=True, check=True)
    found = re.findall(r"\((C\d+)\) Potential Performance Loss: (.*)", out.stdout + out.stderr)
    return sorted({f"{code}: {text.strip()}" for code, text in found})


def bundled_tool(name: str) -> str:
    """The path of a CUDA tool Triton bundles (``ptxas``, ``nvdisasm``, ``cuobjdump``); a ValueError when absent."""
    folder = triton_bin_dir()
    path = os.path.join(folder, name)
    if not (folder and os.path.exists(path)):
        raise ValueError(f"{name}: not found at {path} (this Triton install bundles no CUDA tools)")
    return path


def _on_cubin(tool: str, flags: list[str], cubin: bytes) -> str:
    """The stdout of a bundled ``tool`` (its path) with ``flags`` on ``cubin``, written to a temporary file."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        return subprocess.run([tool, *flags, path], capture_output=True, text=True, check=True).stdout


def resource_usage(compiled) -> dict[str, int]:
    """``reg``, ``stack``, ``shared``, ``local`` (bytes but ``reg``) of a compiled kernel (``cuobjdump -res-usage``
    on its cubin); ``stack`` 0 when nothing spills."""
    res = _on_cubin(bundled_tool("cuobjdump"), ["-res-usage"], compiled.asm["cubin"])
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", res)
    if m is None:
        raise ValueError(f"cuobjdump: no resource usage in its output: {res[-300:]}")
    return dict(zip(("reg", "stack", "shared", "local"), map(int, m.groups())))


def stack_bytes(tactic: str, gemm: str, k: int, arch: int = 90) -> int:
    """The local-memory stack of ``tactic``'s ``gemm`` compiled for ``sm_<arch>a``: 0 when nothing spills."""
    return resource_usage(_compile(parse_config(tactic), gemm, k, arch))["stack"]


def count(tactic: str, gemm: str = "gemm2", k: int = 3072, arch: int = 90) -> LoopCount:
    """Compile ``tactic`` (a label of our Triton backend) for ``sm_<arch>a`` and count its MMA loop."""
    kc = parse_config(tactic)
    if kc.tail_fused:
        raise ValueError(f"tactic: {kc.label} builds two K loops per kernel (_kernels_over): profiling.sass_over")
    if gemm not in _GEMMS:
        raise ValueError(f"gemm: expected one of {sorted(_GEMMS)}, got {gemm!r}")
    if not isinstance(k, int) or k < kc.block_k or k % 32:
        raise ValueError(f"k: expected a multiple of 32 of at least block_k={kc.block_k}, got {k!r}")
    if not split_k_fits(k, kc.block_k, kc.split_k):
        raise ValueError(f"k: {k} in {kc.split_k} splits of block_k={kc.block_k} leaves a split empty")
    if arch < 80:
        raise ValueError(f"arch: expected a compute capability x10 of 80 or more, got {arch!r}")
    import triton

    nvdisasm = bundled_tool("nvdisasm")  # before the compile: a missing tool is reported before any long work
    cc = _compile(kc, gemm, k, arch)
    try:  # a ~load loop of a few steps (m16n64k256w4s3-ps-sk2 gemm2: 6) may be unrolled: no loop to count
        body = mma_loop(_on_cubin(nvdisasm, ["-c"], cc.asm["cubin"]), "LDG" if kc.ablate in ("load", "seq") else "MMA")
    except ValueError as e:
        raise ValueError(f"{e} in {kc.label} {gemm} (a short ~load loop is unrolled)") from None
    use = resource_usage(cc)
    programs = resident_programs(cc, kc.num_warps) if arch >= 90 else 0
    ops = collections.Counter(opcode(t) for t in body)
    tiles = 2 if gemm == "gemm1" else 1
    per_thread = (tiles * (kc.gemm2_block_n if gemm == "gemm2" else kc.block_n) * kc.block_k * max(kc.unroll, 1)
                  // (kc.num_warps * 32))  # -uN: one loop iteration takes N K steps
    mma = next((m for m in ("HGMMA", "QGMMA", "HMMA") if ops.get(m)), "?")  # QGMMA: FP8 wgmma
    groups, waits = mma_sync(body)
    return LoopCount(tactic=kc.label, gemm=gemm, arch=arch, triton_version=triton.__version__,
                     loop_instructions=len(body), weights_per_thread=per_thread,
                     instructions_per_weight=round(len(body) / per_thread, 2), mma=mma,
                     shared_bytes=int(cc.metadata.shared), opcodes=dict(ops.most_common()), registers=use["reg"],
                     stack_bytes=use["stack"], local_bytes=use["local"], loop_spills=ops.get("LDL", 0) + ops.get("STL", 0),
                     resident_programs=programs, resident_warps=programs * kc.num_warps, mma_groups=groups,
                     mma_waits=waits, ptxas=triton_ptxas(arch)[0], advisories=ptxas_advisories(cc, arch))


#: the checkout that holds ``fp4moe_diag/`` (and ``.alt/``, where scripts/install_alt.sh puts other releases)
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _triton_folder(path: str) -> str:
    """The folder of a ``--triton`` value: a folder holding ``triton/``, or a release ``X.Y.Z`` that
    ``scripts/install_alt.sh`` put in this checkout's ``.alt/``; a ValueError saying how to get it otherwise."""
    if re.fullmatch(r"\d+\.\d+\.\d+", path):
        alt = os.path.join(_ROOT, ".alt", f"triton-{path}")
        if not os.path.isfile(os.path.join(alt, "triton", "__init__.py")):
            raise ValueError(f"triton: {path} is not installed beside this one (bash scripts/install_alt.sh "
                             f"triton=={path})")
        return alt
    if not os.path.isfile(os.path.join(path, "triton", "__init__.py")):
        raise ValueError(f"triton: expected a folder holding triton/ or a release X.Y.Z in .alt/ (bash "
                         f"scripts/install_alt.sh triton==X.Y.Z), got {path!r}")
    return path


def count_under(triton_dir: str, tactics: Sequence[str], gemm: str = "gemm2", k: int = 3072,
                arch: int = 90) -> list[LoopCount]:
    """:func:`count` of each tactic as another Triton builds it: in a child Python with ``triton_dir`` (a folder that
    holds ``triton/``, or a release ``X.Y.Z`` that ``scripts/install_alt.sh triton==X.Y.Z`` put in ``.alt/``) first on
    its path, so that one process compares the builds of several Triton releases.  ValueError for a folder without
    Triton, before any compile; RuntimeError with the child's last words if it fails."""
    for t in tactics:
        parse_config(t)  # a bad label: its ValueError here, before a child starts
    triton_dir = _triton_folder(triton_dir)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.abspath(triton_dir), _ROOT]))
    cmd = [sys.executable, "-m", "fp4moe_diag.profiling.sass", "--json", "--gemm", gemm, "--k", str(k), "--arch",
           str(arch)] + [a for t in tactics for a in ("--tactic", t)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode == 2:  # the child refused an argument: the same one-line error here
        raise ValueError(done.stderr.strip().splitlines()[-1].removeprefix("sass: error: "))
    if done.returncode != 0:
        raise RuntimeError(f"sass under {triton_dir}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    return [LoopCount(**json.loads(line)) for line in done.stdout.splitlines() if line.startswith("{")]


TABLE_HEAD = ("| tactic | gemm | triton | registers | programs (warps) per SM | loop instructions per weight | "
              "wgmma groups per iteration, waits | spills in the loop |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- |")


def table_row(r: LoopCount) -> str:
    """One markdown row of :data:`TABLE_HEAD`."""
    waits = ", ".join(f"<= {w}" for w in r.mma_waits) or "-"
    return (f"| `{r.tactic}` | {r.gemm} | {r.triton_version} | {r.registers} | {r.resident_programs} "
            f"({r.resident_warps}) | {r.instructions_per_weight} | {r.mma_groups}, {waits} | {r.loop_spills} |")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fp4moe_diag.profiling.sass", description=__doc__.split("\n")[0])
    ap.add_argument("--tactic", action="append", required=True, help="a Triton tactic label; repeat for several")
    ap.add_argument("--gemm", choices=sorted(_GEMMS), default="gemm2")
    ap.add_argument("--k", type=int, default=3072, help="reduction length (H for gemm1, I for gemm2)")
    ap.add_argument("--arch", type=int, default=90, help="compute capability x10 (90 = sm_90a)")
    form = ap.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="one JSON object per tactic")
    form.add_argument("--table", action="store_true", help="one markdown table row per tactic and Triton")
    ap.add_argument("--triton", action="append", metavar="DIR",
                    help="build with the Triton in DIR, or release X.Y.Z of .alt/ (scripts/install_alt.sh puts it "
                         "there); 'installed': this Python's; repeat to compare releases (default: installed)")
    args = ap.parse_args(argv)
    try:
        # every folder resolved (and checked) before the first build
        dirs = [d if d == "installed" else _triton_folder(d) for d in args.triton or ["installed"]]
        rows = [r for d in dirs for r in (
            [count(t, args.gemm, args.k, args.arch) for t in args.tactic] if d == "installed" else
            count_under(d, args.tactic, args.gemm, args.k, args.arch))]
    except ValueError as e:
        print(f"sass: error: {e}", file=sys.stderr)
        return 2
    if args.table:
        print(TABLE_HEAD)
    for r in rows:
        if args.table:
            print(table_row(r))
        elif args.json:
            print(json.dumps(asdict(r)))
        else:
            top = ", ".join(f"{o} {n}" for o, n in list(r.opcodes.items())[:8])
            print(f"{r.tactic} {r.gemm} sm_{r.arch}a (triton {r.triton_version}): {r.loop_instructions} instructions "
                  f"in the MMA loop ({r.mma}), {r.instructions_per_weight} per weight; smem {r.shared_bytes} B; "
                  f"{r.registers} registers, {r.stack_bytes} B stack ({r.loop_spills} spill ops in the loop); "
                  f"{r.resident_programs} programs = {r.resident_warps} warps per SM; {r.mma_groups} wgmma groups per "
                  f"iteration, waits {r.mma_waits}; {top}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
