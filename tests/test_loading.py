"""Reading results back: a file missing schema columns or holding values its columns cannot is refused at load
time, naming the file and the column; older runs without the columns added later still load; one load_runs."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from fp4moe_diag import results, run_folder
from fp4moe_diag.results import ADDED_LATER, COLUMNS, to_frame
from fp4moe_diag.run_folder import load_run, load_runs, save_run


def rows(n: int = 3) -> pd.DataFrame:
    return to_frame([dict(run_id="r", model="m", num_tokens=4 * (i + 1), backend="reference", tactic=str(i),
                          status="ok", is_best=i == 0, time_median_us=1.5 + i, git_commit="abc") for i in range(n)])


def write_csv_run(root, df: pd.DataFrame, name: str = "r"):
    (root / name).mkdir(parents=True)
    df.to_csv(root / name / "results.csv", index=False)
    return root / name / "results.csv"


def test_a_csv_missing_schema_columns_is_refused_naming_the_file_and_columns(tmp_path):
    path = write_csv_run(tmp_path, rows()[["run_id", "model", "num_tokens", "backend"]])
    with pytest.raises(ValueError, match=re.escape(f"{path}: missing schema column(s) ['timestamp', 'git_commit'")):
        load_runs(tmp_path, pattern="*/results.csv")  # it used to return a 4-column frame
    with pytest.raises(ValueError, match=re.escape(str(path))):
        load_run(tmp_path / "r")


def test_a_parquet_missing_one_column_is_refused(tmp_path):
    save_run(rows(), tmp_path / "r")
    rows().drop(columns=["backend"]).to_parquet(tmp_path / "r" / "results.parquet")
    (tmp_path / "r" / "manifest.json").unlink()
    (tmp_path / "r" / "results.csv").unlink()
    with pytest.raises(ValueError, match=r"results\.parquet: missing schema column\(s\) \['backend'\]"):
        load_runs(tmp_path)


@pytest.mark.parametrize("column,value,dtype,shown", [("num_tokens", "abc", "Int64", "['abc']"),
                                                      ("num_tokens", "2.5", "Int64", "[2.5]"),
                                                      ("time_median_us", "fast", "float64", "['fast']"),
                                                      ("is_best", "maybe", "boolean", "['maybe']")])
def test_a_bad_value_in_a_csv_is_refused_naming_file_column_and_value(tmp_path, column, value, dtype, shown):
    df = rows().astype({column: object})
    df.loc[1, column] = value
    path = write_csv_run(tmp_path, df)
    with pytest.raises(ValueError, match=re.escape(f"{path}: column '{column}' ({dtype}) holds {shown} at row(s) "
                                                   "[1]")):
        load_runs(tmp_path)


def test_a_bad_value_in_a_parquet_or_a_part_file_is_refused(tmp_path):
    df = rows().astype({"num_tokens": "string"})
    df.loc[2, "num_tokens"] = "abc"
    (tmp_path / "a").mkdir()
    df.to_parquet(tmp_path / "a" / "results.parquet")
    with pytest.raises(ValueError, match=r"a/results\.parquet: column 'num_tokens' \(Int64\) holds \['abc'\]"):
        load_run(tmp_path / "a")
    (tmp_path / "b" / "parts").mkdir(parents=True)
    df.to_parquet(tmp_path / "b" / "parts" / "T1@x.parquet")
    with pytest.raises(ValueError, match=r"parts/T1@x\.parquet: column 'num_tokens'"):
        load_run(tmp_path / "b")


def test_an_unknown_status_is_refused(tmp_path):
    path = write_csv_run(tmp_path, rows().assign(status=["ok", "bogus", "ok"]))
    with pytest.raises(ValueError, match=re.escape(f"{path}: column 'status' holds ['bogus']")):
        load_run(tmp_path / "r")


def test_a_run_older_than_the_columns_added_later_loads_with_them_empty(tmp_path):
    older = rows().drop(columns=[c for c in ADDED_LATER if c != "run_id"])
    write_csv_run(tmp_path, older.assign(is_best=["True", "False", ""]))
    got = load_run(tmp_path / "r")
    assert list(got.columns) == COLUMNS
    assert got["num_tokens"].tolist() == [4, 8, 12] and got["time_median_us"].tolist() == [1.5, 2.5, 3.5]
    assert got["is_best"].tolist()[:2] == [True, False] and got["is_best"].isna().tolist() == [False, False, True]
    assert got["ceiling_read_GBps"].isna().all() and got["timing_pass"].isna().all()


def test_one_load_runs_strict_about_an_empty_root_unless_asked(tmp_path):
    assert run_folder.load_runs is run_folder.load_runs
    with pytest.raises(ValueError, match=f"root: no run folders under {re.escape(str(tmp_path))}"):
        load_runs(tmp_path)
    with pytest.raises(ValueError, match="matching '\\*/results.csv'"):
        load_runs(tmp_path, pattern="*/results.csv")
    empty = load_runs(tmp_path, allow_empty=True)
    assert empty.empty and list(empty.columns) == COLUMNS


def test_every_committed_run_loads_with_the_schema_of_today():
    """The committed GPU runs (data/runs) were written by older commits: each must load under the current schema (a
    column added to SCHEMA without ADDED_LATER broke notebooks 02, 03 and 05 once, with every unit test green)."""
    from pathlib import Path

    roots = sorted(p for p in (Path(__file__).resolve().parents[1] / "data" / "runs").iterdir()
                   if (p / "results.parquet").exists() or (p / "results.csv").exists())
    assert len(roots) >= 20  # the committed H200 and H100 runs
    for root in roots:
        df = load_run(root)
        assert list(df.columns) == COLUMNS and len(df) > 0, root.name
