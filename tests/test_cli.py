"""The command line (fp4moe_diag.cli)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")



REPO = Path(__file__).resolve().parent.parent


def test_cli_profile_on_cpu_says_why_not():
    from fp4moe_diag.cli import main

    assert main(["profile", "--tactics", "m16n64k128w4s3-ds-sk2", "--device", "cpu"]) == 2


def test_cli_profile_splits_labels_with_commas():
    from fp4moe_diag.cli import split_labels

    assert split_labels("default(-1,-1),g1:20, m16n64k128w4s3-ds-sk2") == ["default(-1,-1)", "g1:20",
                                                                           "m16n64k128w4s3-ds-sk2"]
