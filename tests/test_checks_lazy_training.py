"""Checkers of the lazy-training chapter: correct answers pass, wrong ones fail with a hint,
stubs are "not attempted". References here are written independently of the checkers."""

import numpy as np
from checker_contract import checker_contract


def _distance(K0, K1):
    a, b = np.ravel(K0), np.ravel(K1)
    return 1.0 - a @ b / np.sqrt((a @ a) * (b @ b))


def _linear_ntk(x1, x2, kappa):
    # Monte-Carlo-free: E[b b^T] = I/d on the sphere, plus kappa^2 from the input layer
    x1, x2 = np.asarray(x1), np.asarray(x2)
    return np.einsum("id,jd->ij", x1, x2) * (1.0 / x1.shape[1] + kappa * kappa)


CORRECT = {
    "lazy_training/kernel-distance": _distance,
    "lazy_training/linear-ntk-limit": _linear_ntk,
}
WRONG = {
    "lazy_training/kernel-distance": [
        lambda K0, K1: np.linalg.norm(np.asarray(K1) - K0) / np.linalg.norm(K0),
        lambda K0, K1: 1.0 - _distance(K0, K1),
        lambda K0, K1: 1.0 - np.sum(np.asarray(K0) * K1) / np.linalg.norm(K0) ** 2,
    ],
    "lazy_training/linear-ntk-limit": [
        lambda x1, x2, k: k**2 * np.asarray(x1) @ np.asarray(x2).T,
        lambda x1, x2, k: np.asarray(x1) @ np.asarray(x2).T / np.shape(x1)[1],
        lambda x1, x2, k: (1 + k**2) * np.asarray(x1) @ np.asarray(x2).T,
        lambda x1, x2, k: _linear_ntk(x2, x1, k),
    ],
}


(test_every_exercise_is_covered, test_correct_passes, test_wrong_fails_with_hint,
 test_stub_is_not_attempted) = checker_contract("lazy_training", CORRECT, WRONG)
