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


def test_reproduce_refuses_an_mxfp8_log_naming_log(tmp_path, capsys):
    import pytest
    import test_vllm_log as T

    from fp4moe_diag.cli import main

    (hs,) = [ln for ln in T.SEED_LOG.splitlines() if " hidden_states : " in ln]
    log = tmp_path / "mxfp8.log"
    log.write_text(T.SEED_LOG.replace(hs, hs.replace("torch.bfloat16", "torch.float8_e4m3fn")))
    assert "torch.bfloat16" in hs
    for extra in ([], ["--static"]):
        with pytest.raises(SystemExit) as info:
            main(["reproduce", "--log", str(log), *extra])
        assert info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err == (f"fp4moe-diag: error: argument --log: {log}: its hidden_states are mxfp8 activations "
                       "(float8_e4m3fn); reproduce builds bf16 hidden states only: pass the log of a bf16-activation "
                       "call")
