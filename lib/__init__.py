"""Solvers for the course *Kernel and Rich Regimes*.

Importing ``lib`` switches JAX to float64 before any array exists; every module computes in
double precision. Public functions are re-exported here:

* :mod:`lib.flows`: gradient descent and gradient flow over pytrees.
* :mod:`lib.ntk`: empirical tangent kernels and linearized models.
* :mod:`lib.convex`: minimum-norm and maximum-margin references (cvxpy).
* :mod:`lib.twolayer`: two-layer ReLU networks (init, forward).
* :mod:`lib.parity`: biased sparse and leaky parities, exact population quantities, the
  selected-parity models (Malach et al. 2021).
* :mod:`lib.plotting`: the figure style.
* :mod:`lib.checks`: self-checks for the exercises.
"""

import jax

jax.config.update("jax_enable_x64", True)

from . import checks, convex, flows, ntk, parity, plotting, twolayer  # noqa: E402
from .checks import check  # noqa: E402
from .convex import max_margin, min_norm_interpolant  # noqa: E402
from .flows import (  # noqa: E402
    DivergenceError,
    Trajectory,
    gradient_descent,
    gradient_descent_sweep,
    gradient_flow,
    snapshot_steps,
)
from .ntk import empirical_ntk, linearize  # noqa: E402
from .parity import (  # noqa: E402
    best_feature_loss,
    biased_sparse_parity,
    bsp_best_linear_loss,
    bsp_correlations,
    leaky_parity,
    parity_atoms,
    population_loss,
    selected_parity,
)
from .twolayer import init_two_layer, two_layer, two_layer_batch  # noqa: E402

__all__ = [
    "DivergenceError",
    "Trajectory",
    "check",
    "checks",
    "convex",
    "empirical_ntk",
    "flows",
    "gradient_descent",
    "gradient_descent_sweep",
    "gradient_flow",
    "linearize",
    "max_margin",
    "min_norm_interpolant",
    "ntk",
    "plotting",
    "snapshot_steps",
    "init_two_layer",
    "two_layer",
    "two_layer_batch",
    "twolayer",
    "parity",
    "best_feature_loss",
    "biased_sparse_parity",
    "bsp_best_linear_loss",
    "bsp_correlations",
    "leaky_parity",
    "parity_atoms",
    "population_loss",
    "selected_parity",
]
