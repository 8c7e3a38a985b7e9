"""Test configuration: float64 (through ``import lib``) and no silent rank promotion."""

import jax
import pytest

import lib  # noqa: F401  (switches on float64)


@pytest.fixture(autouse=True)
def _strict_ranks():
    """A silent broadcast between arrays of different rank becomes an error in tests."""
    with jax.numpy_rank_promotion("raise"):
        yield
