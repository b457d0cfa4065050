"""A library's version string as numbers: the one parser behind FlashInfer's adapter choice
(:func:`fp4moe_diag.backends.flashinfer.api.parse_version`), the Triton release a tactic set and default depend on
(:func:`fp4moe_diag.backends.triton.configs_regcap.triton_release`) and the order of versions in tables
(:func:`fp4moe_diag.analysis.versions.versions_in`).  Imports nothing."""

from __future__ import annotations

import re
from typing import Optional

_LEADING = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")


def release_tuple(version: object, parts: int = 3) -> Optional[tuple[int, ...]]:
    """``"0.7.4"`` -> (0, 7, 4); ``"3.7.1+git"`` -> (3, 7, 1); ``"3.9"`` -> (3, 9, 0); with ``parts=2`` the first two
    numbers only.  None when the string does not start with ``X.Y`` (``None``, ``""``, ``"not importable"``).  A
    ValueError for ``parts`` other than 1, 2 or 3."""
    if parts not in (1, 2, 3):
        raise ValueError(f"parts: expected 1, 2 or 3, got {parts!r}")
    m = _LEADING.match(str(version)) if version is not None else None
    if not m:
        return None
    return tuple(int(g or 0) for g in m.groups())[:parts]
