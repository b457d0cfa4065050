"""tools/: no sys.path inserts or hard-coded /tmp paths in the Python kit, every helper a script calls on a sibling
module exists, and tools/device/gpu_session.sh runs only files that are there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
KITS = (TOOLS / "cutlass_slim", TOOLS / "device")  # the slim-build kit; the device-session kit
SCRIPTS = sorted(p for kit in KITS for p in kit.glob("*.py"))


def top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def missing_sibling_attributes(path: Path) -> list[str]:
    """``alias.name`` uses of a sibling tools module (``import cutlass_slim_common as common``) that it lacks."""
    tree = ast.parse(path.read_text())
    kit = path.parent
    aliases = {(a.asname or a.name): kit / f"{a.name}.py" for n in ast.walk(tree) if isinstance(n, ast.Import)
               for a in n.names if (kit / f"{a.name}.py").is_file()}
    bad = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases:
            if n.attr not in top_level_names(aliases[n.value.id]):
                bad.append(f"{path.name}:{n.lineno}: {aliases[n.value.id].stem} has no {n.attr}")
    return bad


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_path_hacks_or_tmp_paths(path: Path):
    text = path.read_text()
    assert not re.search(r"sys\.path\.(insert|append)", text), path.name
    assert not re.search(r"""["']/tmp/""", text), path.name


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_helpers_called_on_sibling_modules_exist(path: Path):
    assert missing_sibling_attributes(path) == []


def test_the_sibling_checker_finds_a_missing_helper(tmp_path, monkeypatch):
    (tmp_path / "kit.py").write_text("def setup_env(args):\n    pass\n")
    (tmp_path / "script.py").write_text("import kit as k\nk.setup_env(1)\nk._setup_env(1)\n")
    assert missing_sibling_attributes(tmp_path / "script.py") == ["script.py:3: kit has no _setup_env"]


def test_gpu_session_runs_only_files_that_exist():
    text = (TOOLS / "device" / "gpu_session.sh").read_text()
    used = set(re.findall(r"tools/([\w./]+\.(?:py|sh))", text))
    assert used and sorted(u for u in used if not (TOOLS / u).is_file()) == []
    assert "debug_cutlass" not in text and not (TOOLS / "debug_cutlass.py").exists()


def test_tools_is_two_kits():
    assert sorted(p.name for p in TOOLS.iterdir()) == ["cutlass_slim", "device"]


# --------------------------------------------------------------------------- slim 0.7.4 builder: which kernels
def _builder074(monkeypatch):
    monkeypatch.syspath_prepend(str(TOOLS / "cutlass_slim"))
    import build_cutlass_sm90_slim_074 as b  # stdlib + the kit's own modules only (no flashinfer, no nvcc)

    return b


_WS_TILES = ([(64, n, k) for n in (16, 32, 64, 128) for k in (128, 256, 512)]
             + [(128, n, k) for n in (16, 32, 64, 128) for k in (128, 256, 512)]
             + [(128, 256, 128), (128, 256, 256), (256, 128, 128), (256, 128, 256), (256, 256, 128)])
_SMALL_K = ("SINGLE_WARPGROUP_PREFILL", "SINGLE_WARPGROUP_ROLLING")


def _shape(t):
    return "cute::Shape<" + ", ".join(f"cute::Int<{x}>" for x in t) + ">"


def _inst(act, out, tile, cluster, sched, mode="", small_k=None):
    """One launcher instantiation as FlashInfer 0.7.4's generate_kernels.py writes it."""
    launcher = "sm90_generic_mixed_moe_small_k_kernelLauncher" if small_k else "sm90_generic_mixed_moe_gemm_kernelLauncher"
    extra = "".join(f", {x}" for x in (mode, small_k and f"tensorrt_llm::cutlass_extensions::MainloopScheduleType::{small_k}") if x)
    kernel = "Cooperative" if sched == "coop" else "Pingpong"
    return (f"\ntemplate void {launcher}<{act}, SafeFP4, {out},\ntensorrt_llm::cutlass_extensions::EpilogueOpDefault, "
            f"{_shape(tile)}, {_shape(cluster)}, cutlass::gemm::KernelTmaWarpSpecialized{kernel}, "
            "cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::WeightOnlyQuantOp::FINEGRAINED_SCALE_ONLY"
            f"{extra}> (\nGroupedGemmInput<{act}, SafeFP4, {out}, {out}>inputs, TmaWarpSpecializedGroupedGemmInput "
            "hopper_inputs, int sm_count_, size_t* workspace_size);\n")


def _generated(act, out, mode=""):
    """Every launcher instantiation 0.7.4 generates for one dtype combo (184 WS; + 10 small-K for FP8 x FP4)."""
    clusters = [(1, 1, 1), (1, 2, 1), (2, 1, 1), (2, 2, 1)]
    out_ = [_inst(act, out, t, c, s, mode) for t in _WS_TILES for c in clusters
            for s in (("coop", "pingpong") if t[0] >= 128 else ("pingpong",))]
    if act == "__nv_fp8_e4m3":
        out_ += [_inst(act, out, (128, n, 128), (1, 1, 1), "pingpong", mode, sk)
                 for n in (8, 16, 32, 40, 64) for sk in _SMALL_K]
    return out_


def _fake_generator(probe, arch):
    """generate_gemm_operations stand-in: the three SM90 mixed-input dtype combos of 0.7.4, in *Mixed* files."""
    d = probe / "gemm_grouped" / "90"
    d.mkdir(parents=True)
    pre = "cutlass::gemm::collective::MixedInputScaleMode::kPreMmaE8M0"
    for i, insts in enumerate((_generated("__nv_bfloat16", "__nv_bfloat16"),
                               _generated("__nv_fp8_e4m3", "half", pre), _generated("__nv_fp8_e4m3", "__nv_bfloat16", pre))):
        (d / f"cutlass_kernel_file_gemm_grouped_sm90_M128_Mixed_group{i}.generated.cu").write_text(
            '#include "moe_gemm_tma_ws_mixed_input_launcher.inl"\nnamespace tensorrt_llm\n{\nnamespace kernels\n{\n'
            "namespace cutlass_kernels_oss\n{\n" + "".join(insts) + "\n}\n}\n}\n")


def _picked(b, tactics, path):
    import cutlass_slim_common as common

    pred = b.wanted(tactics, path)
    act, out = ("__nv_fp8_e4m3", "__nv_bfloat16") if path == "humming" else ("__nv_bfloat16", "__nv_bfloat16")
    picked = [common.parse_inst(t)[1:] for t in _generated(act, out)]
    return sorted(p for p in picked if pred(*p))


def test_humming_fast_set_is_the_fast_build_tiles_plus_the_small_k_tactics(monkeypatch):
    b = _builder074(monkeypatch)
    got = _picked(b, "fast", "humming")
    small_k = [(128, n, 128) for n in (8, 16, 32, 40, 64)]
    assert got == sorted([((128, 128, 128), c, "pingpong") for c in [(1, 1, 1), (1, 2, 1), (2, 1, 1), (2, 2, 1)]]
                         + [((128, 64, 256), (1, 1, 1), "coop")]
                         + [(t, (1, 1, 1), s) for t in small_k
                            for s in ("single_warpgroup_prefill", "single_warpgroup_rolling")])
    assert len(got) == 15 and b.PATHS["humming"].dispatched == len(_generated("__nv_fp8_e4m3", "x")) == 194


def test_humming_full_set_is_the_heuristic_list_plus_small_k_and_bf16_gets_no_small_k(monkeypatch):
    b = _builder074(monkeypatch)
    assert len(_picked(b, "full", "humming")) == 116 + 10
    bf16_full, bf16_fast = _picked(b, "full", "bf16"), _picked(b, "fast", "bf16")
    assert len(bf16_full) == 116 and len(bf16_fast) == 5 and b.PATHS["bf16"].dispatched == 184
    assert not any(s.startswith("single_warpgroup") for _, _, s in bf16_full)
    # the small-K instantiations are never picked for the bf16 path, whatever the set
    sk = ((128, 16, 128), (1, 1, 1), "single_warpgroup_prefill")
    assert not b.wanted("full", "bf16")(*sk) and b.wanted("fast", "humming")(*sk)


def test_both_paths_generate_bf16_and_humming_sources(monkeypatch, tmp_path):
    import argparse

    b = _builder074(monkeypatch)
    paths, name = b.PATH_SETS["both"]
    assert name == "fused_moe_90_humming074" and paths == ("bf16", "humming")
    args = argparse.Namespace(out=tmp_path, name=name, tactics="fast", per_file=1, paths=paths)
    gen, sources, items, n_gen, stubs, expected = b.generate_sources(args, _fake_generator)
    assert n_gen == 184 + 194 and len(items) == 5 + 15 and expected == (184 - 5) + (194 - 15)
    names = [s if isinstance(s, str) else s.name for s in sources]
    assert "cutlass_kernels/moe_gemm/moe_gemm_kernels_bf16_fp4.cu" in names  # the bf16 x MXFP4 path is kept
    assert len([n for n in names if str(n).startswith("slim_sm90_bf16_fp4_mixed_")]) == 5
    humming = sorted(gen.glob("slim_sm90_fp8_fp4_humming_*.generated.cu"))
    assert len(humming) == 15
    text = "".join(f.read_text() for f in humming)
    assert "__nv_bfloat16, SafeFP4" not in text and "half" not in text and text.count("small_k_kernelLauncher") == 10
    # one runner TU for both (cutlass_fused_moe_kernels.cuh has non-inline definitions: two TUs do not link)
    assert [n for n in names if "slim_moe_runner" in str(n)] == ["slim_moe_runner_bf16_humming_instantiation.cu"]
    runner = (gen / "slim_moe_runner_bf16_humming_instantiation.cu").read_text()
    assert "CutlassMoeFCRunner<__nv_bfloat16, Fp4Type>;" in runner and runner.count("INSTANTIATE_FINALIZE") == 1
    assert ("CutlassMoeFCRunner<__nv_fp8_e4m3, Fp4Type, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, false, "
            "Sm90Wfp4Afp8ScaleMode::kHummingPreMmaE8M0>;") in runner
    moe_gemm = (gen / "slim_moe_gemm_runner_humming.cu").read_text()
    assert ("template class MoeGemmRunner<__nv_fp8_e4m3, Fp4Type, __nv_bfloat16, __nv_bfloat16, false, "
            "Sm90Wfp4Afp8ScaleMode::kHummingPreMmaE8M0>;") in moe_gemm
    assert '#include "moe_gemm/moe_gemm_template_dispatch.h"' in moe_gemm and stubs.exists()


def test_humming_only_drops_the_bf16_runner(monkeypatch, tmp_path):
    import argparse

    b = _builder074(monkeypatch)
    paths, name = b.PATH_SETS["humming"]
    args = argparse.Namespace(out=tmp_path, name=name, tactics="fast", per_file=1, paths=paths)
    gen, sources, items, n_gen, _, expected = b.generate_sources(args, _fake_generator)
    names = [s if isinstance(s, str) else s.name for s in sources]
    assert len(items) == 15 and n_gen == 194 and expected == 194 - 15
    assert not any("bf16" in str(n) for n in names)
    runner = (gen / "slim_moe_runner_humming_instantiation.cu").read_text()
    assert "INSTANTIATE_FINALIZE" in runner and "CutlassMoeFCRunner<__nv_bfloat16" not in runner


def test_generate_common_keeps_the_052_layout(monkeypatch, tmp_path):
    """The 0.5.2 builder's entry point (one bf16 path, its file names) is unchanged by the per-path split."""
    import argparse

    b = _builder074(monkeypatch)
    import cutlass_slim_sources as slim_sources

    args = argparse.Namespace(out=tmp_path, name="x", tactics="fast", per_file=1)
    gen, items, n_gen, files, runner, stubs = slim_sources.generate_common(
        args, _fake_generator, "sm90_generic_mixed_moe_gemm_kernelLauncher", b.PATHS["bf16"].dtype_prefix,
        b.wanted("fast"), "template class CutlassMoeFCRunner<__nv_bfloat16, Fp4Type>;\n")
    assert (n_gen, len(items)) == (184, 5) and [f.name for f in files][0] == "slim_sm90_bf16_fp4_mixed_00.generated.cu"
    assert runner.name == "slim_moe_runner_bf16_fp4_instantiation.cu" and stubs.exists()
    assert runner.read_text().startswith('#include "fused_moe/cutlass_backend/cutlass_fused_moe_kernels.cuh"\n')


def test_device_plans_run_only_files_that_exist():
    for plan in sorted((TOOLS / "device" / "plans").glob("*.sh")):
        used = set(re.findall(r"tools/([\w./]+\.(?:py|sh))", plan.read_text()))
        assert sorted(u for u in used if not (TOOLS / u).is_file()) == [], plan.name


def _bash(args, cwd, env=None):
    import os
    import subprocess

    return subprocess.run(["bash", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))


def test_triton_kit_refuses_a_bad_version_or_python_before_any_download(tmp_path):
    kit = str(TOOLS / "device" / "triton_kit.sh")
    for args, word in (([kit, "3.7"], "version: expected X.Y.Z"), ([kit], "version: expected X.Y.Z"),
                       ([kit, "3.7.1", "312"], "python: expected 3.N")):
        cp = _bash(args, tmp_path)
        assert cp.returncode == 2 and cp.stderr.count("\n") == 1 and word in cp.stderr, (args, cp.stderr)
    assert not (TOOLS.parent / ".carry" / "triton-3.7-cp312.tar.xz").exists()


def test_tritons_plan_refuses_a_bad_part_and_a_missing_kit_before_any_work(tmp_path):
    plan = str(TOOLS / "device" / "plans" / "tritons.sh")
    cp = _bash([plan], tmp_path, {"PART": "both"})
    assert cp.returncode == 2 and "PART: expected decode or prefill" in cp.stderr
    cp = _bash([plan], tmp_path, {"PART": "decode"})  # no .carry/ here: no kit
    assert cp.returncode == 2 and "KIT: no .carry/triton-X.Y.Z-cp312.tar.xz" in cp.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing unpacked, installed or written


_GET_PTXAS = {  # triton/backends/nvidia/compiler.py's get_ptxas, as 3.6-3.8 and 3.9 ship it
    "3.7": 'def get_ptxas(arch: int) -> knobs.NvidiaTool:\n    return knobs.nvidia.ptxas_blackwell if arch >= 100 '
           'else knobs.nvidia.ptxas\n',
    "3.9": 'def get_ptxas(arch: int) -> knobs.NvidiaTool:\n    if arch < 90:\n        return knobs.nvidia.ptxas\n'
           '    # The ptxas-blackwell name is misleading; keep it until legacy ptxas is removed.\n'
           '    return knobs.nvidia.ptxas_blackwell\n',
}


@pytest.mark.parametrize("release,unused", [("3.7", "ptxas-blackwell"), ("3.9", "ptxas")])
def test_triton_kit_keeps_the_ptxas_that_sm90_calls(tmp_path, release, unused):
    """The kit's own line picks the ptxas to leave out from the release's get_ptxas (3.9's first device call lost
    every row to 'Cannot find ptxas-blackwell' when the kit dropped that one)."""
    line = next(x for x in (TOOLS / "device" / "triton_kit.sh").read_text().splitlines() if "UNUSED=" in x)
    nvidia = tmp_path / "triton" / "backends" / "nvidia"
    nvidia.mkdir(parents=True)
    (nvidia / "compiler.py").write_text("import functools\n\n\n" + _GET_PTXAS[release] + "\n\nX = 1\n")
    cp = _bash(["-c", f'T={tmp_path}/triton; {line}; echo "$UNUSED"'], tmp_path)
    assert cp.returncode == 0 and cp.stdout.strip() == unused, cp.stderr
