"""Tests of lib.claims: the verdict is recomputed here by hand, and the file is read back."""

import json
import math

import jax.numpy as jnp
import numpy as np
import pytest

from lib import claims

BASE = dict(source="Paper (2020), Theorem 1", statement="a number is checked")


def read(folder, chapter="ch"):
    return [json.loads(line) for line in (folder / f"{chapter}.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("value, expected, tol, ok", [
    (2.0, 2.0, 0.0, True),
    (2.0 + 1e-12, 2.0, 1e-10, True),
    (2.1, 2.0, 0.05, False),
    (np.float32(1.5), 1.5, 1e-7, True),
    (jnp.array([1.0, 2.0]), [1.0, 2.0 + 1e-9], 1e-8, True),
    (jnp.array([1.0, 2.0]), [1.0, 2.5], 0.1, False),
])
def test_close_check_matches_hand_verdict(tmp_path, value, expected, tol, ok):
    if ok:
        rec = claims.record("ch/close", value=value, expected=expected, tolerance=tol,
                            directory=tmp_path, **BASE)
    else:
        with pytest.raises(claims.ClaimFailed, match="ch/close"):
            claims.record("ch/close", value=value, expected=expected, tolerance=tol,
                          directory=tmp_path, **BASE)
        rec = read(tmp_path)[-1]
    hand = bool(np.all(np.abs(np.asarray(value, dtype=float) - np.asarray(expected)) <= tol))
    assert rec["passed"] is hand is ok
    assert rec["status"] == ("reduced size" if ok else "failed")
    assert read(tmp_path)[-1] == rec  # written before raising, and identical


@pytest.mark.parametrize("value, bounds, ok", [
    (0.5, (0.0, 1.0), True), (1.5, (0.0, 1.0), False), (1.5, (1.0, None), True),
    (-3.0, (None, -2.0), True), ([0.1, 0.9], (0.0, 1.0), True), ([0.1, 1.9], (0.0, 1.0), False),
])
def test_bounds(tmp_path, value, bounds, ok):
    rec = claims.record("ch/bounds", value=value, bounds=bounds, directory=tmp_path,
                        raise_on_failure=False, **BASE)
    lo = -math.inf if bounds[0] is None else bounds[0]
    hi = math.inf if bounds[1] is None else bounds[1]
    assert rec["passed"] is all(lo <= v <= hi for v in np.atleast_1d(value)) is ok


@pytest.mark.parametrize("size, status", [("paper", "reproduced"), ("reduced", "reduced size"),
                                          ("unspecified", "no size in source")])
def test_size_sets_status_only_when_passed(tmp_path, size, status):
    assert claims.record("ch/a", value=1.0, passed=True, size=size, directory=tmp_path,
                         **BASE)["status"] == status
    failed = claims.record("ch/b", value=1.0, passed=False, size=size, directory=tmp_path,
                           raise_on_failure=False, **BASE)
    assert failed["status"] == "failed"  # never "reproduced"


def test_nan_never_passes(tmp_path):
    with pytest.raises(ValueError, match="not finite"):
        claims.record("ch/nan", value=float("nan"), passed=True, directory=tmp_path, **BASE)
    rec = claims.record("ch/nan", value=float("nan"), bounds=(None, 1.0), directory=tmp_path,
                        raise_on_failure=False, **BASE)
    assert rec["passed"] is False and rec["value"] is None


@pytest.mark.parametrize("kwargs, match", [
    (dict(claim_id="NoSlash"), "claim_id"),
    (dict(source=" "), "source"),
    (dict(statement=""), "statement"),
    (dict(size="full"), "size"),
    (dict(expected=1.0), "expected and tolerance"),
    (dict(expected=1.0, tolerance=-1.0), "tolerance"),
    (dict(expected=1.0, tolerance=float("inf")), "tolerance"),
    (dict(expected=float("nan"), tolerance=1.0), "expected"),
    (dict(expected=1.0, tolerance=True), "tolerance"),
    (dict(value=[], expected=1.0, tolerance=0.0), "value is empty"),
    (dict(value=1 + 2j, expected=1.0, tolerance=0.0), "real"),
    (dict(value=None, expected=1.0, tolerance=0.0), "value"),
    (dict(value="1.0", expected=1.0, tolerance=0.0), "value"),
    (dict(value=[1.0, 2.0], expected=[1.0, 2.0, 3.0], tolerance=0.0), "broadcast"),
    (dict(bounds=(None, None)), "checks nothing"),
    (dict(bounds=(-float("inf"), float("inf"))), "checks nothing"),
    (dict(bounds=(2.0, 0.0)), "lo <= hi"),
    (dict(passed=np.float64(0.5)), "boolean"),
    (dict(passed=np.float64("nan")), "boolean"),
    (dict(claim_id="ch/x\n"), "claim_id"),
    (dict(size=[]), "size"),
    (dict(directory="", passed=True), "directory"),
    (dict(expected=1.0, tolerance=0.1, passed=True), "exactly one"),
    (dict(), "exactly one"),
    (dict(bounds=(1.0,)), "bounds"),
    (dict(passed="yes"), "passed"),
    (dict(value="abc", passed=True), "value"),
])
def test_bad_input_names_the_argument(tmp_path, kwargs, match):
    args = dict(claim_id="ch/x", value=1.0, directory=tmp_path, **BASE)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        claims.record(args.pop("claim_id"), **args)


def test_claims_dir_finds_repository_root(tmp_path, monkeypatch):
    monkeypatch.delenv("KRR_CLAIMS_DIR", raising=False)
    (tmp_path / "_toc.yml").write_text("root: intro\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "chapters").mkdir()
    assert claims.claims_dir(tmp_path / "chapters") == tmp_path / "_build" / "claims"
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    assert claims.claims_dir(outside) is None
    monkeypatch.setenv("KRR_CLAIMS_DIR", str(outside))
    assert claims.claims_dir(tmp_path / "chapters") == outside


def test_records_append_with_run_id(tmp_path):
    before = len(claims.records)
    claims.record("ch/one", value=1, expected=1, tolerance=0, directory=tmp_path, **BASE)
    claims.record("ch/two", value=[1, 2], passed=True, directory=tmp_path, **BASE)
    lines = read(tmp_path)
    assert [r["claim"] for r in lines] == ["ch/one", "ch/two"]
    assert {r["run"] for r in lines} == {claims.RUN_ID}
    assert lines[1]["value"] == [1, 2] and len(claims.records) == before + 2


@pytest.mark.parametrize("full, status", [("1", "reproduced"), ("0", "reduced size")])
def test_default_size_follows_krr_full(tmp_path, monkeypatch, full, status):
    """Without ``size``, a record made at the papers' size (KRR_FULL=1) is *reproduced* and one
    at the default size *reduced size*; an explicit ``size="reduced"`` wins at paper size."""
    monkeypatch.setenv("KRR_FULL", full)
    rec = claims.record("ch/a", source="s", statement="t", value=1.0, passed=True,
                        directory=tmp_path)
    assert rec["status"] == status
    rec = claims.record("ch/b", source="s", statement="t", value=1.0, passed=True,
                        size="reduced", directory=tmp_path)
    assert rec["status"] == "reduced size"
