"""Exercise checks of the F1/F2 chapter: correct answers pass, wrong ones fail with a hint,
stubs are "not attempted". Reference answers are written here independently."""

import jax.numpy as jnp
import numpy as np
from checker_contract import checker_contract


def _smoothed(z, beta):
    z = np.asarray(z, dtype=np.float64)
    zmin = z.min()
    return zmin - np.log(np.mean(np.exp(-beta * (z - zmin)))) / beta


def _picture(a, B):
    P = np.abs(np.asarray(a))[:, None] * np.asarray(B)
    r = np.linalg.norm(P, axis=1, keepdims=True)
    out = np.zeros_like(P)
    nz = r[:, 0] > 0
    out[nz] = np.tanh(r[nz]) * P[nz] / r[nz]
    return out


def _f2(K, y):
    return float(np.sqrt(np.asarray(y) @ np.linalg.solve(np.asarray(K), np.asarray(y))))


CORRECT = {
    "f1_f2/smoothed-margin": _smoothed,
    "f1_f2/neuron-picture": _picture,
    "f1_f2/f2-norm": _f2,
}
WRONG = {
    "f1_f2/smoothed-margin": [
        lambda z, beta: -np.log(np.mean(np.exp(-beta * np.asarray(z)))) / beta,  # underflows
        lambda z, beta: -np.log(np.sum(np.exp(-beta * np.asarray(z)))) / beta,   # no 1/n
        lambda z, beta: np.min(z),
    ],
    "f1_f2/neuron-picture": [
        lambda a, B: np.tanh(np.abs(np.asarray(a))[:, None] * np.asarray(B)),   # per coordinate
        lambda a, B: _picture(np.ones_like(a), np.asarray(a)[:, None] * np.asarray(B)),  # signed
        lambda a, B: np.abs(np.asarray(a))[:, None] * np.asarray(B),
    ],
    "f1_f2/f2-norm": [
        lambda K, y: float(np.asarray(y) @ np.linalg.solve(np.asarray(K), np.asarray(y))),
        lambda K, y: float(np.sqrt(np.asarray(y) @ np.asarray(K) @ np.asarray(y))),
        lambda K, y: jnp.linalg.solve(K, y),
    ],
}


(test_every_exercise_is_covered, test_correct_passes, test_wrong_fails_with_hint,
 test_stub_is_not_attempted) = checker_contract("f1_f2", CORRECT, WRONG)
