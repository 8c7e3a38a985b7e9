"""The seed and paper-size sweeps (scripts/sweeps.py) and how the ledger shows them."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))
sys.path.insert(0, str(ROOT / "scripts"))
import claims_ledger  # noqa: E402
import sweeps  # noqa: E402


def rec(claim, seed, passed, value):
    return {"claim": claim, "chapter": claim.split("/")[0], "seed": seed, "passed": passed,
            "value": value, "run": f"r{seed}", "status": "reduced size" if passed else "failed"}


def test_summary_counts_seeds_and_value_range():
    by_seed = {0: [rec("a/x", 0, True, 1.0), rec("a/y", 0, True, [2.0, 5.0])],
               1: [rec("a/x", 1, True, 3.0), rec("a/y", 1, False, 7.0)],
               2: [rec("a/x", 2, True, -1.0)]}                 # a/y missing: chapter failed
    rows, ok = sweeps.summarize(by_seed, {2: ["a"]})
    got = {r["claim"]: r for r in rows}
    assert sorted(got["a/x"]["passed"]) == [0, 1, 2] and got["a/x"]["range"] == [-1.0, 3.0]
    assert sorted(got["a/y"]["failed"]) == [1, 2] and got["a/y"]["n"] == 3
    assert got["a/y"]["range"] == [2.0, 7.0]
    assert not ok


def test_summary_all_passed():
    rows, ok = sweeps.summarize({0: [rec("a/x", 0, True, 1.0)], 1: [rec("a/x", 1, True, 2.0)]},
                                {})
    assert ok and rows[0]["n"] == 2


def test_latest_records_keep_the_last_run(tmp_path):
    lines = [dict(rec("c/x", 1, False, 1.0), run="old"), dict(rec("c/x", 1, True, 2.0), run="new")]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert [r["value"] for r in sweeps.latest_records(tmp_path)] == [2.0]


def test_seed_zero_records_ignore_runs_by_hand_at_another_seed_or_size(tmp_path):
    # make seeds takes seed 0 from _build/claims, which also receives a chapter run by hand
    # under KRR_SEED=3 or KRR_FULL=1 after the default build
    lines = [dict(rec("c/x", 0, True, 1.0), run="r0", full=False),
             dict(rec("c/x", 3, True, 3.0), run="r3", full=False),
             dict(rec("c/x", 0, True, 9.0), run="rf", full=True)]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert [r["value"] for r in sweeps.latest_records(tmp_path, default_run=True)] == [1.0]


def _repo(tmp_path):
    def git(*a):
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.py").write_text("x = 1\n")
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "c.md").write_text("# c\n")
    (tmp_path / "chapters" / "d.md").write_text("# d\n")
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True,
                          text=True).stdout.strip()
    return head


def test_stale_when_chapter_or_lib_changed(tmp_path):
    head = _repo(tmp_path)
    meta = {"commit": head, "dirty": False}
    assert not claims_ledger.is_stale(tmp_path, meta, "c")
    (tmp_path / "chapters" / "d.md").write_text("# d changed\n")
    assert not claims_ledger.is_stale(tmp_path, meta, "c")   # another chapter changed
    assert claims_ledger.is_stale(tmp_path, meta, "d")
    (tmp_path / "lib" / "m.py").write_text("x = 2\n")
    assert claims_ledger.is_stale(tmp_path, meta, "c")        # lib changed: every chapter


def test_stale_when_run_on_uncommitted_changes_or_unknown(tmp_path):
    head = _repo(tmp_path)
    assert claims_ledger.is_stale(tmp_path, {"commit": head, "dirty": True}, "c")
    assert claims_ledger.is_stale(tmp_path, {"commit": None, "dirty": False}, "c")
    assert claims_ledger.is_stale(tmp_path, {"commit": "0" * 40, "dirty": False}, "c")


def test_load_results_and_seed_cell(tmp_path):
    head = _repo(tmp_path)
    folder = tmp_path / "results" / "seeds"
    (folder / "claims").mkdir(parents=True)
    meta = {"chapters": {"c": {"commit": head, "dirty": False, "seeds": [1, 2, 3, 4],
                               "failed_seeds": [4], "date": "2026-11-30T00:00:00+00:00"}}}
    (folder / "run.json").write_text(json.dumps(meta))
    recs = [rec("c/x", 1, True, 1.0), rec("c/x", 2, True, 1.0), rec("c/x", 3, False, 9.0)]
    (folder / "claims" / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    got_meta, by_claim = claims_ledger.load_results(tmp_path, "seeds")
    assert got_meta["chapters"]["c"]["seeds"] == [1, 2, 3, 4] and len(by_claim["c/x"]) == 3
    cell = claims_ledger._seeds_cell(tmp_path, got_meta, by_claim["c/x"], "c", True)
    assert cell.astext() == "3/5"            # seeds 0, 1, 2 passed; 3 failed; 4: chapter failed
    cell = claims_ledger._seeds_cell(tmp_path, got_meta, by_claim["c/x"], "c", False)
    assert cell.astext() == "2/5"
    assert claims_ledger.load_results(tmp_path, "full") == ({}, {})


def test_full_run_is_per_chapter(tmp_path):
    """``results/full/run.json`` keeps one run per chapter; a chapter re-recorded alone does not
    make the others' rows stale, and a chapter recorded at an old commit is stale."""
    head = _repo(tmp_path)
    meta = {"chapters": {"c": {"commit": head, "dirty": False, "date": "2026-11-30T00:00:00"},
                         "d": {"commit": "0" * 40, "dirty": False, "date": "2026-11-29T00:00:00"}}}
    recs = [rec("c/x", 0, True, 1.0)]
    assert "stale" not in claims_ledger._full_cell(tmp_path, meta, recs, "c").astext()
    assert "stale" in claims_ledger._full_cell(tmp_path, meta, recs, "d").astext()
    assert "2026-11-29" in claims_ledger._full_cell(tmp_path, meta, recs, "d").astext()
    missing = claims_ledger._full_cell(tmp_path, meta, [], "e").astext()
    assert missing == "no paper-size run recorded"


def test_seed_runs_are_per_chapter(tmp_path):
    head = _repo(tmp_path)
    meta = {"chapters": {"c": {"commit": head, "dirty": False, "seeds": [1, 2, 3, 4],
                               "failed_seeds": [4]}}}
    recs = [rec("c/x", 1, True, 1.0), rec("c/x", 2, True, 1.0), rec("c/x", 3, False, 9.0)]
    assert claims_ledger._seeds_cell(tmp_path, meta, recs, "c", True).astext() == "3/5"
    assert claims_ledger._seeds_cell(tmp_path, meta, [], "d", True).astext() == "1/1"


def test_record_runs_replaces_only_the_recorded_chapters(tmp_path, monkeypatch):
    """What ``make full|seeds CHAPTER=name RECORD=1`` writes: the named chapter's entry is
    replaced at the current commit, the others are kept; a whole-book run starts afresh."""
    head = _repo(tmp_path)
    monkeypatch.setattr(sweeps, "ROOT", tmp_path)
    run_file = tmp_path / "run.json"
    c, d = tmp_path / "chapters" / "c.md", tmp_path / "chapters" / "d.md"
    run_file.write_text(json.dumps({"chapters": {
        "c": {"commit": "0" * 40, "dirty": False, "seconds": 9.0},
        "e": {"commit": "1" * 40, "dirty": False, "seconds": 5.0}}}))
    meta = sweeps.record_runs(run_file, [c], lambda name: {"seconds": 1.5})
    assert json.loads(run_file.read_text()) == meta
    assert meta["chapters"]["c"]["commit"] == head and meta["chapters"]["c"]["seconds"] == 1.5
    assert meta["chapters"]["c"]["dirty"] is False
    assert meta["chapters"]["e"] == {"commit": "1" * 40, "dirty": False, "seconds": 5.0}
    d.write_text("# d edited, not committed\n")
    meta = sweeps.record_runs(run_file, [c, d], lambda name: {"seconds": len(name)},
                              replace_all=True, whole_build_seconds=3.0)
    assert sorted(meta["chapters"]) == ["c", "d"] and meta["whole_build_seconds"] == 3.0
    assert meta["chapters"]["d"]["dirty"] is True       # recorded on uncommitted changes
    assert claims_ledger.is_stale(tmp_path, meta["chapters"]["d"], "d")
    assert not claims_ledger.is_stale(tmp_path, {"commit": head, "dirty": False}, "c")
