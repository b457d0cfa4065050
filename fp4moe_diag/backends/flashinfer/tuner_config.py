"""Export a sweep's best FlashInfer tactics as FlashInfer's own tuner-config JSON.

:func:`export_tuner_config` writes, per op and shape bucket, the best tactic of every ``cutlass`` /
``trtllm`` case of a sweep in the format of FlashInfer 0.7.x ``AutoTuner.save_configs``: ``_metadata``
(FlashInfer's ``_collect_metadata()``, with the sweep's GPU name), entries
``str((custom_op, runner class, nearest_profile, extras)) -> [runner class, tactic]`` and
``_generation``.  A serving process loads it with ``AutoTuner.get().load_configs(FILE)`` or
``with autotune(False, cache=FILE)``.  The keys are computed by running FlashInfer's own op wrapper up to
``AutoTuner.choose_one`` for each case (nothing is launched), so they are exactly what that FlashInfer
looks up.  FlashInfer 0.5.x has no such format: exporting there is a ValueError.

Entries carry no measurement policy: under ``autotune(True, cache=FILE)`` FlashInfer may re-profile them
with its own policy; under ``autotune(False, cache=FILE)`` they are used as they are.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from typing import Any, Callable, Optional

import pandas as pd

from ...problem.case import MoECase
from ...problem.inputs import build_inputs
from ..base import Tactic
from .api import get_api

EXPORTED_BACKENDS = ("cutlass", "trtllm")


def _default_backend(name: str) -> Any:
    if name == "cutlass":
        from .cutlass import CutlassBackend

        # the tuner's inputs (activations, weights, biases) do not depend on the scale layout, and
        # "raw" needs no GPU: the keys are the same as for the layout the sweep ran
        return CutlassBackend(scale_layout="raw")
    from .trtllm import TrtllmGenBackend

    return TrtllmGenBackend()


def _tactic_id(value: Any) -> Any:
    try:
        return ast.literal_eval(str(value))
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"tactic: cannot read {value!r} as a tactic id") from e


def best_rows(df: pd.DataFrame, backends=EXPORTED_BACKENDS) -> pd.DataFrame:
    """The ``is_best`` correct row of every case x FlashInfer backend."""
    need = {"backend", "is_best", "status", "tactic"}
    if missing := need - set(df.columns):
        raise ValueError(f"df_or_rows: missing column(s) {sorted(missing)}")
    sel = df[df["backend"].isin(backends) & (df["is_best"] == True) & (df["status"] == "ok")]  # noqa: E712
    return sel.reset_index(drop=True)


def export_tuner_config(
    df_or_rows: Any,
    path: str | os.PathLike,
    *,
    device: Any = "cpu",
    metadata: Optional[dict] = None,
    backend_factory: Callable[[str], Any] = _default_backend,
    call_kwargs: Optional[dict] = None,
) -> dict:
    """Write the best tactic per op and shape bucket of a sweep as FlashInfer tuner-config JSON.

    ``df_or_rows``: the sweep's results (DataFrame or list of row dicts).  ``device``: where the inputs
    used to compute the keys are built (nothing runs; ``cpu`` is enough).  ``metadata``: overrides of
    the file's ``_metadata`` (default: FlashInfer's, with ``gpu`` from the rows' ``gpu_name``).
    ``call_kwargs``: extra entry-point arguments for the key computation (e.g. ``enable_pdl=False`` on
    a CPU machine).  When several shapes fall into one bucket, the row whose ``num_tokens`` is the
    bucket's own value wins, else the first.  Returns the written dict.
    """
    api = get_api()
    if not api.has_tuner_configs:
        raise ValueError(f"flashinfer {api.version} ({api.name}) has no AutoTuner.save_configs format; "
                         f"tuner-config export needs flashinfer 0.7.x")
    df = df_or_rows if isinstance(df_or_rows, pd.DataFrame) else pd.DataFrame(list(df_or_rows))
    rows = best_rows(df)
    if "flashinfer_version" in rows:
        other = sorted({str(v) for v in rows["flashinfer_version"].dropna() if str(v) and str(v) != api.version})
        if other:
            raise ValueError(f"df_or_rows: rows measured with flashinfer {other}, but {api.version} is installed; "
                             "tuner-config keys are version-specific: export under the version that ran")
    entries: dict[str, tuple[list, bool]] = {}
    owners: dict[str, str] = {}  # file key -> the case label that wrote it
    backends: dict[str, Any] = {}
    for rec in rows.to_dict("records"):
        case = MoECase.from_record(rec)
        b = backends.setdefault(rec["backend"], backend_factory(rec["backend"]))
        prepared = b.prepare(build_inputs(case, device))
        if call_kwargs:
            prepared.kwargs.update(call_kwargs)
        tid = _tactic_id(rec["tactic"])
        for call, tactic in b.tactic_calls(prepared, Tactic(id=tid, label=str(rec.get("tactic_label", tid)))):
            key = api.cache_key(call)
            file_key, value = api.tuner_config_entry(call, tactic)
            exact = int(key.nearest_profile[0][0]) == int(case.num_tokens)
            if file_key in entries and exact and entries[file_key][1] and entries[file_key][0] != value:
                raise ValueError(f"df_or_rows: {case.label} and {owners[file_key]} map to the same FlashInfer tuner "
                                 f"key with different tactics ({value} vs {entries[file_key][0]}); FlashInfer can "
                                 "hold one of them: export them separately")
            if file_key not in entries or (exact and not entries[file_key][1]):
                entries[file_key] = (value, exact)
                owners[file_key] = case.label
    meta = api.tuner_config_metadata()
    gpus = sorted({str(g) for g in rows.get("gpu_name", pd.Series(dtype=str)).dropna() if str(g) not in ("", "cpu")})
    if len(gpus) == 1:
        meta["gpu"] = gpus[0]
    meta.update(metadata or {})
    ordered: dict[str, Any] = {"_metadata": meta}
    for k in sorted(entries):
        ordered[k] = entries[k][0]
    # the same generation stamp as AutoTuner.save_configs
    ordered["_generation"] = hashlib.sha256(
        json.dumps(ordered, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    with open(path, "w") as f:
        json.dump(ordered, f, indent=2)
    return ordered
