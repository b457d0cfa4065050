"""One adapter per FlashInfer API generation, picked from the installed version.

==========  ===========================  =====================================================================
adapter     FlashInfer versions          verified against
==========  ===========================  =====================================================================
``v05``     0.5.0 <= v < 0.6.0           0.5.2 (the bug report's version); 0.6.0 kept this routed API but was
                                         never run through this adapter: 0.6.x is refused, not guessed
``v07``     0.7.0 <= v < 0.8.0           0.7.4 sources and wheel (``/work/fi/074``)
==========  ===========================  =====================================================================

What an adapter owns (see :class:`FlashInferApi`): the entry points' argument names (an argument the
suite passes that the entry point does not take is a ``ValueError`` naming it, unless the adapter maps
it on purpose), the AutoTuner's input names per op, CUTLASS tactic enumeration and labels, forcing a
tactic, committing a tactic to FlashInfer's own AutoTuner, and the SM90 weight/scale layout.

``FP4MOE_FLASHINFER_API=v05|v07`` forces an adapter for a version outside the table (at your own risk;
the row's ``flashinfer_version`` still says what ran).  Importing this module imports no flashinfer.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any, Callable, Iterable, Optional

from ... import settings
from ...release import release_tuple

#: adapter name -> (lowest version, first version not covered, "module:Class")
ADAPTERS: dict[str, tuple[tuple[int, int, int], tuple[int, int, int], str]] = {
    "v05": ((0, 5, 0), (0, 6, 0), ".api_v05:ApiV05"),
    "v07": ((0, 7, 0), (0, 8, 0), ".api_v07:ApiV07"),
}

ENV_FORCE = settings.FLASHINFER_API


class UnsupportedFlashInferVersion(RuntimeError):
    """This FlashInfer version has no adapter (the message says which versions do)."""


def parse_version(version: str) -> tuple[int, int, int]:
    v = release_tuple(version)
    if v is None:
        raise UnsupportedFlashInferVersion(f"flashinfer version {version!r}: cannot parse it as X.Y.Z")
    return v  # type: ignore[return-value]


def covered_versions() -> str:
    """One line: which adapter covers which versions."""
    fmt = lambda v: ".".join(map(str, v))  # noqa: E731
    return "; ".join(f"{n}: {fmt(lo)} <= v < {fmt(hi)}" for n, (lo, hi, _) in ADAPTERS.items())


def adapter_name_for(version: str) -> str:
    """The adapter covering ``version``; :class:`UnsupportedFlashInferVersion` (with why) otherwise."""
    forced = settings.read(ENV_FORCE)
    if forced:
        if forced not in ADAPTERS:
            raise UnsupportedFlashInferVersion(f"{ENV_FORCE}={forced!r}: expected one of {sorted(ADAPTERS)}")
        return forced
    v = parse_version(version)
    for name, (lo, hi, _) in ADAPTERS.items():
        if lo <= v < hi:
            return name
    hint = ""
    if (0, 6, 0) <= v < (0, 7, 0):
        hint = (" (0.6.x is split by the routed-MoE API change of flashinfer PR #2916, first in 0.6.8, and "
                "neither side was verified here)")
    raise UnsupportedFlashInferVersion(
        f"flashinfer {version}: no fp4moe-diag adapter for this version{hint}; covered: {covered_versions()}. "
        f"Install a covered version or set {ENV_FORCE}=v05|v07 to force one."
    )


def adapter_class(name: str) -> type["FlashInferApi"]:
    module, cls = ADAPTERS[name][2].split(":")
    return getattr(importlib.import_module(module, __package__), cls)


@functools.lru_cache(maxsize=None)
def _api_for(version: str, forced: Optional[str]) -> "FlashInferApi":
    return adapter_class(adapter_name_for(version))(version)


def installed_version() -> str:
    import flashinfer

    return str(getattr(flashinfer, "__version__", ""))


def get_api() -> "FlashInferApi":
    """The adapter of the installed flashinfer (raises :class:`UnsupportedFlashInferVersion`)."""
    return _api_for(installed_version(), settings.read(ENV_FORCE) or None)


def api_support_reason() -> str:
    """'' when the installed flashinfer has an adapter, else the reason it does not."""
    try:
        get_api()
    except UnsupportedFlashInferVersion as e:
        return str(e)
    return ""


def checked_kwargs(fn: Callable, kwargs: dict, mapped: Iterable[str] = ()) -> dict:
    """``kwargs`` restricted to what ``fn`` takes; any other argument not in ``mapped`` is an error.

    ``mapped`` names arguments the adapter drops on purpose (documented in the adapter); nothing else
    is ever dropped silently, so a renamed argument cannot fall back to its default unnoticed.
    """
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    mapped = set(mapped)
    unknown = sorted(k for k in kwargs if k not in params and k not in mapped)
    if unknown:
        name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
        raise ValueError(f"{name}() of this flashinfer takes no argument(s) {unknown}; "
                         "the suite means to pass them (map them in the FlashInfer API adapter)")
    return {k: v for k, v in kwargs.items() if k in params}


class FlashInferApi:
    """What differs between FlashInfer API generations.  Subclasses: :mod:`.api_v05`, :mod:`.api_v07`."""

    name = "base"
    versions = ""
    #: AutoTuner input names per op, in FlashInfer's order
    input_names: dict[str, list[str]] = {}
    #: arguments of our canonical routed kwargs (``MoEInputs.trtllm_kwargs``) this generation drops on
    #: purpose -> why
    routed_dropped: dict[str, str] = {}
    #: entry-point arguments this generation adds that the suite sets -> value
    routed_added: dict[str, Any] = {}
    #: SM90 BF16 x MXFP4 layout of weights and scales this generation's kernels expect
    cutlass_sm90_layout = "vllm_sm90"
    #: CUTLASS ``cutlass_fused_moe(..., profile_ids=[g1, g2])`` exists
    has_profile_ids = False
    #: FlashInfer's ``AutoTuner.save_configs`` / ``load_configs`` / ``autotune(cache=...)`` exist
    has_tuner_configs = False
    #: the TVM-FFI functions a CUTLASS SM90 module must export for this generation's Python
    cutlass_module_exports: tuple[str, ...] = ("init",)
    #: TVM-FFI functions that mark a CUTLASS module as built for another generation
    cutlass_module_foreign: tuple[str, ...] = ()

    def __init__(self, version: str):
        self.version = version

    def __repr__(self) -> str:
        return f"<fp4moe-diag FlashInfer API {self.name} for flashinfer {self.version}>"

    # -- entry points ------------------------------------------------------------------
    def routed_kwargs(self, canonical: dict) -> dict:
        """Our canonical routed-MoE kwargs, as this generation's entry point names them."""
        kw = {k: v for k, v in canonical.items() if k not in self.routed_dropped}
        for k, v in self.routed_added.items():
            kw.setdefault(k, v)
        return kw

    def call(self, fn: Callable, kwargs: dict) -> Any:
        """``fn(**kwargs)``; an argument ``fn`` does not take is a ValueError (none is mapped here)."""
        return fn(**checked_kwargs(fn, kwargs))

    # -- CUTLASS tactics -----------------------------------------------------------------
    def cutlass_tactic_ids(self, gemm1_call: Any, gemm2_call: Any) -> tuple[list, list]:
        """(gemm1 tactic ids, gemm2 tactic ids) as this generation's tuner hands them to ``run_moe``."""
        raise NotImplementedError

    def cutlass_gemm2_index(self, gemm2_call: Any, tactic: int) -> int:
        """The gemm2 tactic's position among the gemm2 configs (comparable across versions)."""
        return tactic

    def cutlass_forced_kwargs(self, kwargs: dict, g1: int, g2: int) -> Optional[dict]:
        """kwargs that force (g1, g2) through the public API, or None (then the tuner is patched)."""
        return None

    def tuner_snapshot(self) -> Any:
        """What :meth:`commit` changes in FlashInfer's AutoTuner, to give back to :meth:`tuner_restore` (a launcher
        that commits its tactic takes one first)."""
        raise NotImplementedError(f"flashinfer {self.version} ({self.name}): no tuner snapshot")

    def tuner_restore(self, snapshot: Any) -> None:
        raise NotImplementedError(f"flashinfer {self.version} ({self.name}): no tuner snapshot to restore")

    # -- committing to FlashInfer's AutoTuner ---------------------------------------------
    def commit(self, calls_and_tactics: list[tuple[Any, Any]]) -> list:
        """Make FlashInfer's AutoTuner answer each recorded call's op and shape bucket with its tactic;
        a plain ``autotune(False)`` call then runs it.  Returns the cache keys."""
        raise NotImplementedError

    def tuner_config_entry(self, call: Any, tactic: Any) -> tuple[str, list]:
        """(file key, value) of FlashInfer's tuner-config JSON for one call and tactic."""
        raise NotImplementedError(f"flashinfer {self.version} ({self.name}) has no AutoTuner.save_configs format")

    def tuner_config_metadata(self) -> dict:
        raise NotImplementedError(f"flashinfer {self.version} ({self.name}) has no AutoTuner.save_configs format")
