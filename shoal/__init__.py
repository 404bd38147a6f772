"""shoal: differentiable numerical kernels for JAX.

``shoal.ode``: ensemble ODE solvers (Rodas5P, Tsit5) compiled from a ``jax.numpy`` right-hand
side, differentiable by forward sensitivities, with an in-kernel sparse direct solver.
``shoal.linalg``: differentiable standard and generalized symmetric/Hermitian eigensolvers.
"""

__version__ = "0.1.0"

from shoal import linalg, ode  # noqa: E402

__all__ = ["ode", "linalg", "__version__"]
