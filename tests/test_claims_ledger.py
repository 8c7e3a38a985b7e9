"""Tests of the ledger extension's reading of claims files (_ext/claims_ledger.py)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))
import claims_ledger  # noqa: E402

from lib import claims  # noqa: E402

BASE = dict(source="Paper (2020), Theorem 1", statement="a number is checked")


def test_only_latest_run_and_last_record_per_claim(tmp_path, monkeypatch):
    lines = [
        {"claim": "ch/a", "run": "old", "value": 1.0, "passed": True, "status": "reproduced"},
        {"claim": "ch/stale", "run": "old", "value": 5.0, "passed": True, "status": "reproduced"},
        {"claim": "ch/a", "run": "new", "value": 2.0, "passed": False, "status": "failed"},
        {"claim": "ch/a", "run": "new", "value": 3.0, "passed": True, "status": "reproduced"},
    ]
    (tmp_path / "ch.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    got = claims_ledger.load_records(tmp_path)
    assert list(got) == ["ch"]
    assert [(r["claim"], r["value"]) for r in got["ch"]] == [("ch/a", 3.0)]


def test_records_written_by_lib_are_read_back(tmp_path):
    claims.record("ch/one", value=2.0, expected=2.0, tolerance=0.0, size="paper",
                  directory=tmp_path, **BASE)
    claims.record("ch/two", value=[0.5, 0.7, 0.9], bounds=(0, 1), directory=tmp_path, **BASE)
    claims.record("ch/bad", value=3.0, bounds=(0, 1), directory=tmp_path,
                  raise_on_failure=False, **BASE)
    got = {r["claim"]: r for r in claims_ledger.load_records(tmp_path)["ch"]}
    assert got["ch/one"]["status"] == "reproduced"
    assert got["ch/two"]["status"] == "reduced size"
    assert got["ch/bad"]["status"] == "failed" and got["ch/bad"]["passed"] is False


def test_runs_at_another_seed_or_size_do_not_replace_this_build(tmp_path):
    # a chapter run by hand with KRR_SEED=3 (or KRR_FULL=1) after the default build appends
    # its records to the same file: the ledger of a default build still shows seed 0's values
    lines = [
        {"claim": "ch/a", "run": "r0", "value": 1.0, "seed": 0, "full": False},
        {"claim": "ch/a", "run": "r3", "value": 3.0, "seed": 3, "full": False},
        {"claim": "ch/a", "run": "rf", "value": 9.0, "seed": 0, "full": True},
    ]
    (tmp_path / "ch.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    value = {run: claims_ledger.load_records(tmp_path, run)["ch"][0]["value"]
             for run in [(0, False), (3, False), (0, True)]}
    assert value == {(0, False): 1.0, (3, False): 3.0, (0, True): 9.0}
    assert claims_ledger.load_records(tmp_path)["ch"][0]["value"] == 9.0   # unfiltered: latest
    assert claims_ledger.load_records(tmp_path, (5, False)) == {}


def test_build_run_reads_the_switches(monkeypatch):
    monkeypatch.delenv("KRR_SEED", raising=False)
    monkeypatch.delenv("KRR_FULL", raising=False)
    assert claims_ledger.build_run() == (0, False)
    monkeypatch.setenv("KRR_SEED", "4")
    monkeypatch.setenv("KRR_FULL", "1")
    assert claims_ledger.build_run() == (4, True)


def test_missing_folder_is_empty(tmp_path):
    assert claims_ledger.load_records(tmp_path / "absent") == {}


@pytest.mark.parametrize("value, text", [
    (2.0, "2"), (1.0246, "1.025"), (2.976e-16, "2.976e-16"), (3, "3"), (True, "True"),
    (None, "not finite"), ([0.5, 0.7], "0.5, 0.7"), ([2.341, 2.335, 2.34], "3 values in "
                                                    "[2.335, 2.341]"),
])
def test_value_format(value, text):
    assert claims_ledger._fmt(value) == text


@pytest.mark.parametrize("check, text", [
    ({"kind": "close", "expected": 2, "tolerance": 1e-10}, "2 ± 1e-10"),
    ({"kind": "bounds", "lo": 0.95, "hi": 1.1}, "in [0.95, 1.1]"),
    ({"kind": "bounds", "lo": None, "hi": 1e-14}, "≤ 1e-14"),
    ({"kind": "verdict"}, "checked in the chapter"),
])
def test_check_format(check, text):
    assert claims_ledger._check_text(check) == text
