"""Solvers for the course *Kernel and Rich Regimes*.

Importing ``lib`` switches JAX to float64 before any array exists; every module computes in
double precision. Public functions are re-exported here:

* :mod:`lib.flows`: gradient descent and gradient flow over pytrees.
* :mod:`lib.ntk`: empirical tangent kernels and linearized models.
* :mod:`lib.convex`: minimum-norm and maximum-margin references (cvxpy).
* :mod:`lib.twolayer`: two-layer ReLU networks (init, forward).
* :mod:`lib.diagonal`: diagonal linear networks, their implicit bias Q and its exact limit.
* :mod:`lib.plotting`: the figure style.
* :mod:`lib.checks`: self-checks for the exercises.
"""

import jax

jax.config.update("jax_enable_x64", True)

from . import (  # noqa: E402
    checks,
    convex,
    diagonal,  # noqa: E402
    flows,
    ntk,
    plotting,
    twolayer,
)
from .checks import check  # noqa: E402
from .convex import max_margin, min_norm_interpolant  # noqa: E402
from .diagonal import (  # noqa: E402
    Q,
    exponential_loss_path,
    gradient_flow_path,
    implicit_bias_limit,
    margin_limit,
)
from .flows import (  # noqa: E402
    DivergenceError,
    Trajectory,
    gradient_descent,
    gradient_descent_sweep,
    gradient_flow,
    snapshot_steps,
)
from .ntk import empirical_ntk, linearize  # noqa: E402
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
    "diagonal",
    "Q",
    "gradient_flow_path",
    "implicit_bias_limit",
    "exponential_loss_path",
    "margin_limit",
]
