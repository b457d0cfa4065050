"""fp4moe_diag.release: the one version parser behind FlashInfer's adapter choice, the Triton release of tactics and
defaults, and the order of versions in tables."""

from __future__ import annotations

import pandas as pd
import pytest

from fp4moe_diag.release import release_tuple


def test_release_tuple_reads_the_leading_numbers():
    assert release_tuple("0.7.4") == (0, 7, 4) and release_tuple("3.7.1+git") == (3, 7, 1)
    assert release_tuple("3.9") == (3, 9, 0) and release_tuple(" 0.6.8rc1") == (0, 6, 8)
    assert release_tuple("3.10.1", 2) == (3, 10) and release_tuple("2.11.0+cu130", 1) == (2,)
    assert [release_tuple(v) for v in (None, "", "not importable", "v1.2", "7")] == [None] * 5
    with pytest.raises(ValueError, match="^parts: expected 1, 2 or 3"):
        release_tuple("1.2.3", 4)


def test_its_three_users_agree():
    from fp4moe_diag.analysis.versions import versions_in
    from fp4moe_diag.backends.flashinfer.api import UnsupportedFlashInferVersion, parse_version
    from fp4moe_diag.backends.triton.configs_regcap import triton_release

    assert parse_version("0.6.10") == (0, 6, 10) and triton_release("3.10.0") == (3, 10)
    assert triton_release("not importable") == (0, 0)
    with pytest.raises(UnsupportedFlashInferVersion, match="cannot parse it as X.Y.Z"):
        parse_version("main")
    df = pd.DataFrame({"status": "ok", "flashinfer_version": ["0.7.4", "0.10.0", "0.6.8", "", "dev", "0.5.2"]})
    assert versions_in(df) == ["dev", "0.5.2", "0.6.8", "0.7.4", "0.10.0"]  # by number, not by text
