"""Checkers for the exercises of the chapter *Lazy training and the neural tangent kernel*
(``chapters/lazy_training.md``)."""

from __future__ import annotations

import jax
import numpy as np

from . import CheckFailed, register


def _rng(key):
    """A numpy generator seeded from the checker's key (numpy avoids compiling tiny kernels)."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())


def _random_psd(rng, n, rank=None):
    A = rng.standard_normal((n, rank or n))
    return A @ A.T


@register("lazy_training/kernel-distance")
def _kernel_distance(answer, key):
    """``answer(K0, K1)``: 1 - <K0, K1>_F / (||K0||_F ||K1||_F)."""
    rng = _rng(key)
    K0 = _random_psd(rng, 6)
    K1 = K0 + 0.3 * _random_psd(rng, 6, rank=2)
    K2 = _random_psd(rng, 6)
    for A, B, what in ((K0, K1, "two nearby kernels"), (K0, K2, "two unrelated kernels")):
        want = 1.0 - float(np.sum(A * B)) / float(np.linalg.norm(A) * np.linalg.norm(B))
        got = answer(A, B)
        if np.ndim(got) != 0:
            raise CheckFailed(f"return a scalar, got shape {np.shape(got)}")
        got = float(got)
        if not np.isfinite(got):
            raise CheckFailed("the distance is NaN or inf")
        rel = float(np.linalg.norm(B - A) / np.linalg.norm(A))
        if np.isclose(got, rel, rtol=1e-6):
            raise CheckFailed("you returned the relative change ||K1 - K0|| / ||K0||; the kernel "
                              "distance uses the cosine between the matrices")
        if np.isclose(got, 1.0 - want, rtol=1e-6):
            raise CheckFailed("you returned the cosine similarity; the distance is 1 minus it")
        if not np.isclose(got, want, rtol=1e-7, atol=1e-12):
            raise CheckFailed(f"for {what} expected {want:.6f}, got {got:.6f}")
    got = float(answer(K0, 5.0 * K0))
    if abs(got) > 1e-10:
        raise CheckFailed(f"a kernel and a positive multiple of it should be at distance 0, got "
                          f"{got:.3e}: normalize by both Frobenius norms")


@register("lazy_training/linear-ntk-limit")
def _linear_ntk_limit(answer, key):
    """``answer(x1, x2, kappa)``: infinite-width tangent kernel of the two-layer *linear*
    network f(x) = (1/sqrt(m)) sum_j a_j b_j^T x, b_j uniform on the sphere, |a_j| = kappa:
    K(x, x') = (1/d + kappa^2) <x, x'>."""
    rng = _rng(key)
    d = 4
    x1 = rng.standard_normal((5, d))
    x2 = rng.standard_normal((3, d))
    for kappa in (0.5, 2.0):
        want = (1.0 / d + kappa ** 2) * (x1 @ x2.T)
        got = np.asarray(answer(x1, x2, kappa), dtype=np.float64)
        if got.shape == (3, 5):
            raise CheckFailed("the kernel is transposed: rows should index x1, columns x2")
        if got.shape != want.shape:
            raise CheckFailed(f"expected shape {want.shape}, got {got.shape}")
        G = x1 @ x2.T
        if np.allclose(got, kappa ** 2 * G, rtol=1e-8):
            raise CheckFailed("only the input-layer term: add the output-layer term "
                              "E[(b^T x)(b^T x')] = <x, x'> / d")
        if np.allclose(got, G / d, rtol=1e-8):
            raise CheckFailed("only the output-layer term: add the input-layer term "
                              "kappa^2 <x, x'>")
        if np.allclose(got, (1.0 + kappa ** 2) * G, rtol=1e-8):
            raise CheckFailed("E[b b^T] for b uniform on the unit sphere of R^d is I / d, not I")
        if not np.allclose(got, want, rtol=1e-8, atol=1e-12):
            err = np.max(np.abs(got - want)) / np.max(np.abs(want))
            raise CheckFailed(f"off by a relative {err:.2e} at kappa = {kappa}")
