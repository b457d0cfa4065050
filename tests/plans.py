"""Shared by the tests of the device plans (tools/device/plans/*.sh): what a plan's sweeps select."""

from __future__ import annotations

import re
from pathlib import Path

PLANS = Path(__file__).resolve().parents[1] / "tools" / "device" / "plans"


def headline_triton_filters() -> tuple[re.Pattern, re.Pattern]:
    """headline.sh's ``--tactics 'triton=...'`` regexes of backend triton: (decode sweep, prefill sweep)."""
    found = re.findall(r"'triton=(\^[^']+\$)'", (PLANS / "headline.sh").read_text())
    if len(found) != 2:
        raise ValueError(f"headline.sh: expected 2 triton filters (decode, prefill), found {len(found)}")
    decode, prefill = (re.compile(m) for m in found)
    return decode, prefill
