"""lib.config: the run's seed and size switches and the keys derived from them."""

import jax
import numpy as np
import pytest

from lib import config


@pytest.fixture
def env(monkeypatch):
    monkeypatch.delenv("KRR_SEED", raising=False)
    monkeypatch.delenv("KRR_FULL", raising=False)
    return monkeypatch


def _data(k):
    return np.asarray(jax.random.key_data(k))


def test_seed_zero_is_the_historical_draw(env):
    assert config.seed() == 0
    assert np.array_equal(_data(config.key(7)), _data(jax.random.key(7)))
    assert config.rng(7).random() == np.random.default_rng(7).random()


@pytest.mark.parametrize("s", [1, 2, 3, 4])
def test_other_seeds_change_every_stream_and_keep_streams_apart(env, s):
    env.setenv("KRR_SEED", str(s))
    assert config.seed() == s
    draws = [float(jax.random.normal(config.key(i))) for i in range(4)]
    base = [float(jax.random.normal(jax.random.key(i))) for i in range(4)]
    assert all(a != b for a, b in zip(draws, base, strict=True))
    assert len(set(draws)) == 4
    assert config.rng(0).random() != np.random.default_rng(0).random()
    assert config.rng(0).random() != config.rng(1).random()


def test_same_seed_same_numbers(env):
    env.setenv("KRR_SEED", "3")
    assert float(jax.random.normal(config.key(5))) == float(jax.random.normal(config.key(5)))


@pytest.mark.parametrize("raw", ["-1", "x", "1.5", str(2**31)])
def test_bad_seed_is_named(env, raw):
    env.setenv("KRR_SEED", raw)
    with pytest.raises(ValueError, match="KRR_SEED"):
        config.seed()


@pytest.mark.parametrize("raw,expected", [("", False), ("0", False), ("1", True)])
def test_full(env, raw, expected):
    env.setenv("KRR_FULL", raw)
    assert config.full() is expected


def test_bad_full_is_named(env):
    env.setenv("KRR_FULL", "yes")
    with pytest.raises(ValueError, match="KRR_FULL"):
        config.full()


@pytest.mark.parametrize("stream", [-1, 1.0, True, "3", None, 2**31])
def test_bad_stream_is_named(env, stream):
    with pytest.raises(ValueError, match="stream"):
        config.key(stream)
    with pytest.raises(ValueError, match="stream"):
        config.rng(stream)
