"""Solvers for the course *Kernel and Rich Regimes*.

Importing ``lib`` switches JAX to float64 before any array exists; every module computes in
double precision. Public functions are re-exported here:

* :mod:`lib.flows`: gradient descent and gradient flow over pytrees.
* :mod:`lib.ntk`: empirical tangent kernels and linearized models.
* :mod:`lib.convex`: minimum-norm and maximum-margin references (cvxpy).
* :mod:`lib.twolayer`: two-layer ReLU networks (init, forward).
* :mod:`lib.kernels`: kernel regression, RKHS norms and distances between kernels.
* :mod:`lib.lazy`: training a scaled model and measuring how lazy the run was.
* :mod:`lib.margins`: smoothed and F1 margins, kernel/simplex/F1 max-margin references.
* :mod:`lib.parity`: biased sparse and leaky parities, exact population quantities, the
  selected-parity models (Malach et al. 2021).
* :mod:`lib.diagonal`: diagonal linear networks, their implicit bias Q and its exact limit in
  regression.
* :mod:`lib.diagonal_classification`: the same networks on the exponential loss, their margin
  limits (Moroshko et al. 2020).
* :mod:`lib.plotting`: the figure style.
* :func:`lib.check`: the chapters' self-check cells (the checkers themselves live with the
  instructors' grader, the repository's ``homework`` package, not in ``lib``).
* :mod:`lib.claims`: the claims ledger (record a checked claim where it is asserted).
* :mod:`lib.config`: the run's size (``KRR_FULL``) and seed (``KRR_SEED``), and the keys
  derived from it.
"""

import jax

jax.config.update("jax_enable_x64", True)

from . import (  # noqa: E402
    claims,
    config,
    convex,
    diagonal,
    diagonal_classification,
    flows,
    kernels,
    lazy,
    margins,
    ntk,
    parity,
    plotting,
    twolayer,
)
from ._check import check  # noqa: E402
from .convex import max_margin, min_norm_interpolant  # noqa: E402
from .diagonal import Q, gradient_flow_path, implicit_bias_limit  # noqa: E402
from .diagonal_classification import exponential_loss_path, margin_limit  # noqa: E402
from .flows import (  # noqa: E402
    DivergenceError,
    Trajectory,
    gradient_descent,
    gradient_descent_sweep,
    gradient_flow,
    snapshot_steps,
)
from .kernels import (  # noqa: E402
    kernel_distance,
    kernel_regression,
    relative_kernel_change,
    rkhs_norm,
)
from .lazy import Laziness, laziness, relative_movement, scaled_square_loss  # noqa: E402
from .margins import (  # noqa: E402
    compress_radius,
    dictionary_f1_max_margin,
    f1_normalized_margin,
    f1_path_norm,
    kernel_max_margin,
    neuron_positions,
    simplex_max_margin,
    smoothed_margin,
)
from .ntk import empirical_ntk, linearize, relu_ntk  # noqa: E402
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
    "parity",
    "best_feature_loss",
    "biased_sparse_parity",
    "bsp_best_linear_loss",
    "bsp_correlations",
    "leaky_parity",
    "parity_atoms",
    "population_loss",
    "selected_parity",
    "diagonal",
    "diagonal_classification",
    "Q",
    "exponential_loss_path",
    "gradient_flow_path",
    "implicit_bias_limit",
    "margin_limit",
    "DivergenceError",
    "Trajectory",
    "check",
    "claims",
    "config",
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
    "kernels",
    "lazy",
    "kernel_distance",
    "kernel_regression",
    "relative_kernel_change",
    "rkhs_norm",
    "Laziness",
    "laziness",
    "relative_movement",
    "scaled_square_loss",
    "relu_ntk",
    "margins",
    "compress_radius",
    "dictionary_f1_max_margin",
    "f1_normalized_margin",
    "f1_path_norm",
    "kernel_max_margin",
    "neuron_positions",
    "simplex_max_margin",
    "smoothed_margin",
]
