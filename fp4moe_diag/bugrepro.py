"""Reproduce the upstream bug: routed FP4 MoE + ``autotune(True)`` -> ``Cannot pack tensors on meta``.

Two levels:

* :func:`reproduce_meta_bug` -- the seed's exact call, ``with autotune(True):
  trtllm_fp4_block_scale_routed_moe(**kwargs)``, on a GPU that runs trtllm-gen (SM100/SM103).
  Verdict ``reproduced`` (with the traceback), ``fixed-upstream`` (the call succeeded) or
  ``not-applicable`` (why).  Anything else that goes wrong is ``inconclusive``.
* :func:`static_meta_check` -- on any machine (H200, CPU): the same call with FlashInfer's
  trtllm-gen JIT module replaced by a TVM-FFI packing stub
  (:class:`fp4moe_diag.backends.flashinfer.stubs.TvmFfiPackingStub`), recording what the stock
  ``AutoTuner.choose_one`` receives.  It shows *which* argument is on ``meta`` and whether the
  stock profiling path dies on it in TVM-FFI's own packer.
"""

from __future__ import annotations

import tempfile
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from .problem.case import MoECase
from .backends.flashinfer.hooks import TRTLLM_FP4_OP, call_with_supported_kwargs, find_meta_tensors, intercept_choose_one, routed_moe_function
from .backends.flashinfer.status import flashinfer_status
from .backends.flashinfer.stubs import stub_trtllm_gen_module
from .problem.inputs import build_inputs, default_device
from . import child

META_ERROR = "Cannot pack tensors on meta"
TRTLLM_GEN_CCS = ((10, 0), (10, 3))

SEED_CASE = MoECase(
    num_tokens=16,
    hidden_size=3072,
    intermediate_size=3072,
    num_experts=16,
    top_k=4,
    local_num_experts=16,
    routing_method=1,
    model="seed-repro",
)
"""The seed's minimal repro (M=16, 16 experts, top-4, hidden/intermediate 3072, Renormalize)."""


@dataclass
class BugVerdict:
    status: str  # reproduced | fixed-upstream | not-applicable | inconclusive
    reason: str
    mode: str  # "kernel" (real trtllm-gen) or "stub" (TVM-FFI packing stub)
    flashinfer_version: Optional[str]
    device: str
    traceback: str = ""
    tuner_inputs: list = field(default_factory=list)  # list[InputInfo]
    meta_inputs: list = field(default_factory=list)  # list[InputInfo]

    def to_dict(self) -> dict:
        d = asdict(self)
        return d

    def summary(self) -> str:
        meta = ", ".join(f"{i.name}{list(i.shape)}" for i in self.meta_inputs) or "none"
        return (
            f"[{self.status}] flashinfer {self.flashinfer_version} on {self.device} ({self.mode}): "
            f"{self.reason}; meta tuner inputs: {meta}"
        )


def device_label(device: Any) -> str:
    dev = torch.device(device)
    if dev.type == "cuda" and torch.cuda.is_available():
        cc = torch.cuda.get_device_capability(dev)
        return f"{torch.cuda.get_device_name(dev)} (SM{cc[0]}{cc[1]})"
    return dev.type


def _routed_kwargs(case: MoECase, device: Any) -> dict:
    inputs = build_inputs(case, device)
    out = torch.empty_like(inputs.hidden_states).normal_()  # poisoned-ish, real memory
    from .backends.flashinfer.trtllm import routed_kwargs

    kwargs = routed_kwargs(inputs, output=out, tune_max_num_tokens=max(1, case.num_tokens))
    kwargs["enable_pdl"] = False if torch.device(device).type != "cuda" else None
    return kwargs


def _classify(exc: BaseException) -> tuple[str, str]:
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if META_ERROR in str(exc):
        return "reproduced", f"{type(exc).__name__}: {msg}"
    return "inconclusive", f"different failure: {type(exc).__name__}: {msg}"


def static_meta_check(case: MoECase = SEED_CASE, device: Any = "cpu", tune: bool = True) -> BugVerdict:
    """Run the stock routed op over a TVM-FFI packing stub (no Blackwell needed)."""
    st = flashinfer_status()
    dev_label = device_label(device)
    if not st.importable:
        return BugVerdict("not-applicable", st.reason, "stub", None, dev_label)
    if not st.has_routed_moe:
        return BugVerdict("not-applicable", "this flashinfer has no trtllm_fp4_block_scale_routed_moe",
                          "stub", st.version, dev_label)
    from flashinfer import autotune

    kwargs = _routed_kwargs(case, device)
    fn = routed_moe_function()
    with stub_trtllm_gen_module(), intercept_choose_one("record", ops=[TRTLLM_FP4_OP]) as rec:
        try:
            with autotune(tune):
                call_with_supported_kwargs(fn, kwargs)
            status, reason, tb = "fixed-upstream", "the stock call went through the tuner without a meta tensor reaching TVM-FFI", ""
        except Exception as e:  # noqa: BLE001 - we report whatever happened
            status, reason = _classify(e)
            tb = traceback.format_exc()
    call = rec.last
    infos = call.describe_inputs() if call else []
    meta = find_meta_tensors(call) if call else []
    if status == "fixed-upstream" and meta:
        reason += f" (but the tuner still received meta input(s): {[m.name for m in meta]})"
    return BugVerdict(status, reason, "stub", st.version, dev_label, tb, infos, meta)


def reproduce_meta_bug(case: MoECase = SEED_CASE, device: Any = None) -> BugVerdict:
    """The seed's call on real hardware; ``not-applicable`` (with the static check attached) elsewhere."""
    st = flashinfer_status()
    if device is None:
        device = default_device()
    dev = torch.device(device)
    dev_label = device_label(dev)
    if not st.importable:
        return BugVerdict("not-applicable", st.reason, "kernel", None, dev_label)
    if not st.has_routed_moe:
        return BugVerdict("not-applicable", f"flashinfer {st.version} has no trtllm_fp4_block_scale_routed_moe",
                          "kernel", st.version, dev_label)
    cc = torch.cuda.get_device_capability(dev) if dev.type == "cuda" and torch.cuda.is_available() else None
    if cc not in TRTLLM_GEN_CCS:
        static = static_meta_check(case, dev if dev.type == "cuda" else "cpu")
        where = f"SM{cc[0]}{cc[1]}" if cc else "no CUDA GPU"
        reason = (
            f"trtllm-gen FP4 MoE kernels need SM100/SM103 (B200/GB200/B300); this device is {dev_label} "
            f"({where}). Static check with the stock op over a TVM-FFI stub: {static.status} ({static.reason})"
        )
        return BugVerdict("not-applicable", reason, "kernel", st.version, dev_label, static.traceback,
                          static.tuner_inputs, static.meta_inputs)
    from flashinfer import autotune

    kwargs = _routed_kwargs(case, dev)
    from .backends.flashinfer.trtllm import prepare_trtllm_weights

    kwargs = prepare_trtllm_weights(kwargs, case)
    fn = routed_moe_function()
    with intercept_choose_one("record", ops=[TRTLLM_FP4_OP]) as rec:
        try:
            with autotune(True):
                call_with_supported_kwargs(fn, kwargs)
            torch.cuda.synchronize(dev)
            status, reason, tb = "fixed-upstream", "autotune(True) + routed call succeeded", ""
        except Exception as e:  # noqa: BLE001
            status, reason = _classify(e)
            tb = traceback.format_exc()
    call = rec.last
    return BugVerdict(status, reason, "kernel", st.version, dev_label, tb,
                      call.describe_inputs() if call else [], find_meta_tensors(call) if call else [])


# --------------------------------------------------------------------------- version matrix
def probe_install(folder: Path, path: str) -> dict:
    """In a child running the install at ``path`` (:func:`version_matrix`): its version, whether the meta placeholder
    is in its source, its routed API, and the static check's verdict; ``error`` when something failed."""
    import inspect
    import re

    out: dict = {"path": path}
    try:
        import flashinfer
        import flashinfer.fused_moe.core as core

        out["version"] = getattr(flashinfer, "__version__", None)
        out["meta_placeholder_in_source"] = bool(re.search(r'device\s*=\s*"meta"', inspect.getsource(core)))
        st = flashinfer_status()
        out.update(has_routed_moe=st.has_routed_moe, routed_signature=st.routed_signature,
                   has_sm90_interleave=st.has_sm90_interleave)
        v = static_meta_check()
        out.update(static_status=v.status, static_reason=v.reason, meta_inputs=[m.name for m in v.meta_inputs])
    except Exception as e:  # noqa: BLE001 - the row says what broke
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def version_matrix(site_dirs: list[str], timeout: float = 300.0) -> "Any":
    """For each ``--target`` dir holding a flashinfer install, :func:`probe_install` in a child running it (the one
    child runner, :func:`fp4moe_diag.child.run_child`; a child that crashed or timed out is a row whose ``error``
    says so, with the end of its stderr).

    Returns a DataFrame: version, meta placeholder still in source, routed API signature,
    whether it changed from the first row, and the static check's verdict.
    """
    import pandas as pd

    rows = []
    for d in site_dirs:
        with tempfile.TemporaryDirectory(prefix="fp4moe-versions-") as folder:
            res = child.run_child(probe_install, {"path": str(d)}, folder, site=d, timeout=timeout)
        rows.append(res.result if res.ok else {"path": str(d), "error": res.error})
    df = pd.DataFrame(rows)
    if "routed_signature" in df and len(df):
        params = [_param_names(s) for s in df["routed_signature"]]
        first = params[0]
        df["signature_changed"] = [p != first for p in params]
        df["params_added"] = [", ".join(sorted(set(p) - set(first))) for p in params]
        df["params_removed"] = [", ".join(sorted(set(first) - set(p))) for p in params]
    return df


def _param_names(signature: Any) -> list[str]:
    """Parameter names of a ``str(inspect.signature(...))``."""
    if not isinstance(signature, str):
        return []
    inner = signature.split(") ->")[0].lstrip("(")
    names, depth, cur = [], 0, ""
    for ch in inner:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            names.append(cur)
            cur = ""
        else:
            cur += ch
    names.append(cur)
    return [n.split(":")[0].split("=")[0].strip() for n in names if n.strip()]
