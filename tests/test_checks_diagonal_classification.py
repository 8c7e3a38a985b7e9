"""The checkers of the classification chapter: a correct answer passes, a wrong one fails with a
hint, a stub is "not attempted"."""

import numpy as np
import pytest

from lib import check, diagonal


def _dual(lam, X, y, mu):
    return mu * float(np.sum(np.asarray(diagonal.H_D((y[:, None] * X).T @ lam, 2)))) - lam.sum()


def _dual_no_labels(lam, X, y, mu):
    return mu * float(np.sum(np.asarray(diagonal.H_D(X.T @ lam, 2)))) - lam.sum()


def _stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("name, good, bad", [
    ("diagonal_classification/margin-dual", _dual, _dual_no_labels),
])
def test_checker(name, good, bad):
    assert check(name, good, quiet=True).status == "passes"
    res = check(name, bad, quiet=True)
    assert res.status == "fails" and res.message
    assert check(name, _stub, quiet=True).status == "not attempted"
