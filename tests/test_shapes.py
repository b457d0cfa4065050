"""Tests for fp4moe_diag.problem.shapes and data/vllm_shapes.csv."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fp4moe_diag.problem.case import GatedActivation, MoECase, RoutingMethod, WeightFormat
from fp4moe_diag.problem.shapes import (
    REQUIRED_COLUMNS,
    TOKEN_COUNTS,
    default_case,
    default_table_path,
    load_shape_table,
    load_vllm_cases,
    parse_token_counts,
)

ROWS_PER_MODEL = {
    "gpt-oss-20b": [1, 2, 4, 8],
    "gpt-oss-120b": [1, 2, 4, 8],
    "DeepSeek-R1-FP4": [1, 8],
    "Qwen3-30B-A3B-FP4": [1, 2],
    "Qwen3-235B-A22B-FP4": [1, 4, 8],
    "Llama-4-Scout-17B-16E-FP4": [1],
    "Llama-4-Maverick-17B-128E-FP4": [1, 8],
}


def test_token_counts_constant() -> None:
    assert TOKEN_COUNTS == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


def test_table_structure() -> None:
    df = load_shape_table()
    assert list(df.columns) == list(REQUIRED_COLUMNS)
    assert len(df) == 18
    assert not df.duplicated(["model", "ep_size"]).any()
    assert (df["local_expert_offset"] == 0).all()
    assert (df["local_num_experts"] * df["ep_size"] == df["num_experts"]).all()
    assert (df["token_counts"] == "1-16384 pow2").all()
    assert df["source"].str.contains("config.json").all()
    assert {m: sorted(g["ep_size"]) for m, g in df.groupby("model")} == ROWS_PER_MODEL


def test_every_row_loads_into_valid_cases() -> None:
    cases = load_vllm_cases()
    assert len(cases) == 18 * 15
    assert all(isinstance(c, MoECase) for c in cases)
    assert len({c.label for c in cases}) == len(cases)
    for c in cases:
        assert all(type(getattr(c, f)) is int for f in ("num_tokens", "hidden_size", "intermediate_size",
                                                        "num_experts", "top_k", "local_num_experts"))
        assert MoECase.from_record(c.to_record()) == c


def test_cases_per_model() -> None:
    cases = load_vllm_cases()
    counts: dict[str, int] = {}
    for c in cases:
        counts[c.model] = counts.get(c.model, 0) + 1
    assert counts == {m: 15 * len(eps) for m, eps in ROWS_PER_MODEL.items()}
    first = [c for c in cases if c.model == "gpt-oss-20b"][:15]
    assert [c.num_tokens for c in first] == TOKEN_COUNTS and all(c.ep_size == 1 for c in first)


def test_gpt_oss_20b_ep2_t16_matches_the_seed() -> None:
    c = default_case()
    assert c == load_vllm_cases(models=["gpt-oss-20b"], ep_sizes=[2], token_counts=[16])[0]
    assert (c.model, c.num_tokens, c.hidden_size, c.intermediate_size) == ("gpt-oss-20b", 16, 3072, 3072)
    assert (c.num_experts, c.local_num_experts, c.local_expert_offset, c.top_k) == (32, 16, 0, 4)
    assert c.routing_method is RoutingMethod.Renormalize
    assert c.weight_format is WeightFormat.MXFP4 and c.block_size == 32
    assert c.activation is GatedActivation.SWIGLU_OAI and c.has_bias
    assert (c.swiglu_alpha, c.swiglu_beta, c.swiglu_limit) == (1.702, 1.0, 7.0)
    # Seed log: gemm1_weights [16, 6144, 1536], gemm1_weights_scale [16, 6144, 96],
    # gemm2_weights [16, 3072, 1536], gemm2_weights_scale [16, 3072, 96].
    L, H, I = c.local_num_experts, c.hidden_size, c.intermediate_size
    assert (L, 2 * I, H // 2) == (16, 6144, 1536)
    assert (L, 2 * I, H // c.block_size) == (16, 6144, 96)
    assert (L, H, I // 2) == (16, 3072, 1536)
    assert (L, H, I // c.block_size) == (16, 3072, 96)


def test_model_specific_rows() -> None:
    ds = default_case("DeepSeek-R1-FP4", ep_size=8, num_tokens=1)
    assert (ds.hidden_size, ds.intermediate_size, ds.num_experts, ds.local_num_experts, ds.top_k) == (
        7168, 2048, 256, 32, 8)
    assert ds.routing_method is RoutingMethod.DeepSeekV3
    assert (ds.n_group, ds.topk_group, ds.routed_scaling_factor) == (8, 4, 2.5)
    assert ds.weight_format is WeightFormat.NVFP4 and not ds.has_bias
    assert ds.activation is GatedActivation.SWIGLU and ds.swiglu_alpha is None

    q = default_case("Qwen3-30B-A3B-FP4", ep_size=2)
    assert (q.hidden_size, q.intermediate_size, q.num_experts, q.local_num_experts, q.top_k) == (2048, 768, 128, 64, 8)
    assert q.routing_method is RoutingMethod.RenormalizeNaive
    q2 = default_case("Qwen3-235B-A22B-FP4", ep_size=4)
    assert (q2.hidden_size, q2.intermediate_size, q2.local_num_experts) == (4096, 1536, 32)

    scout = default_case("Llama-4-Scout-17B-16E-FP4", ep_size=1)
    mav = default_case("Llama-4-Maverick-17B-128E-FP4", ep_size=8)
    for c, e, loc in ((scout, 16, 16), (mav, 128, 16)):
        assert (c.hidden_size, c.intermediate_size, c.num_experts, c.local_num_experts, c.top_k) == (5120, 8192, e, loc, 1)
        assert c.routing_method is RoutingMethod.Llama4 and c.weight_format is WeightFormat.NVFP4

    big = default_case("gpt-oss-120b", ep_size=8)
    assert (big.num_experts, big.local_num_experts, big.hidden_size) == (128, 16, 3072)


def test_nan_columns_become_none() -> None:
    c = default_case("gpt-oss-20b", ep_size=1)
    assert c.n_group is None and c.topk_group is None and c.routed_scaling_factor is None
    q = default_case("Qwen3-30B-A3B-FP4", ep_size=1)
    assert (q.swiglu_alpha, q.swiglu_beta, q.swiglu_limit) == (None, None, None)


def test_filtering() -> None:
    oss = load_vllm_cases(models=["gpt-oss-20b"])
    assert {c.model for c in oss} == {"gpt-oss-20b"} and len(oss) == 4 * 15
    assert load_vllm_cases(models="gpt-oss-20b") == oss
    ep8 = load_vllm_cases(ep_sizes=[8])
    assert len(ep8) == 5 * 15 and all(c.ep_size == 8 for c in ep8)
    small = load_vllm_cases(max_tokens=100)
    assert len(small) == 18 * 7 and max(c.num_tokens for c in small) == 64
    both = load_vllm_cases(models=["DeepSeek-R1-FP4", "Qwen3-30B-A3B-FP4"], ep_sizes=[1], max_tokens=2)
    assert [(c.model, c.num_tokens) for c in both] == [
        ("DeepSeek-R1-FP4", 1), ("DeepSeek-R1-FP4", 2), ("Qwen3-30B-A3B-FP4", 1), ("Qwen3-30B-A3B-FP4", 2)]
    odd = load_vllm_cases(models=["gpt-oss-20b"], ep_sizes=[2], token_counts=[3, 1000, 3], max_tokens=999)
    assert [c.num_tokens for c in odd] == [3]
    assert load_vllm_cases(ep_sizes=[3]) == []


def test_unknown_model_raises() -> None:
    with pytest.raises(ValueError, match="gpt-oss-21b"):
        load_vllm_cases(models=["gpt-oss-21b"])
    with pytest.raises(ValueError, match="ep_size=3"):
        default_case("gpt-oss-20b", ep_size=3)


def test_missing_column_raises_naming_it(tmp_path: Path) -> None:
    df = load_shape_table().drop(columns=["top_k", "source"])
    p = tmp_path / "shapes.csv"
    df.to_csv(p, index=False)
    with pytest.raises(ValueError, match="top_k, source"):
        load_shape_table(p)
    with pytest.raises(ValueError, match="missing required column"):
        load_vllm_cases(p)


def test_custom_table_and_bad_rows(tmp_path: Path) -> None:
    df = load_shape_table().iloc[[1]].copy()
    df["token_counts"] = "8;32"
    df["has_bias"] = "false"
    p = tmp_path / "one.csv"
    df.to_csv(p, index=False)
    cases = load_vllm_cases(p)
    assert [c.num_tokens for c in cases] == [8, 32] and not cases[0].has_bias
    df["ep_size"] = 4  # disagrees with 32 / 16
    df.to_csv(p, index=False)
    with pytest.raises(ValueError, match="ep_size"):
        load_vllm_cases(p)


def test_default_path_is_package_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_table_path().is_file()
    assert default_table_path() == Path(__file__).resolve().parent.parent / "data" / "vllm_shapes.csv"
    assert len(load_shape_table()) == 18
    with pytest.raises(FileNotFoundError):
        load_shape_table(tmp_path / "nope.csv")


@pytest.mark.parametrize(
    "spec, want",
    [
        ("1-16384 pow2", TOKEN_COUNTS),
        ("3-40 pow2", [4, 8, 16, 32]),
        ("1;8;64", [1, 8, 64]),
        ("5 7", [5, 7]),
        (float("nan"), TOKEN_COUNTS),
    ],
)
def test_parse_token_counts(spec: object, want: list[int]) -> None:
    assert parse_token_counts(spec) == want


def test_parse_token_counts_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="token_counts"):
        parse_token_counts("lots")
    with pytest.raises(ValueError, match="token_counts"):
        parse_token_counts("64-8 pow2")


def test_table_is_readable_by_plain_pandas() -> None:
    df = pd.read_csv(default_table_path())
    assert df.loc[df["model"] == "gpt-oss-20b", "has_bias"].all()


def test_readme_schema_table_is_generated_from_the_schema():
    from pathlib import Path

    from fp4moe_diag.results import schema_markdown

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert schema_markdown() in readme, "README's results table is stale: regenerate it from results.schema_markdown()"
