"""shoal: differentiable numerical kernels for JAX.

``shoal.ode``: ensemble ODE solvers compiled from a ``jax.numpy`` right-hand side.
"""

__version__ = "0.1.0"

from shoal import linalg, ode  # noqa: E402

__all__ = ["ode", "linalg", "__version__"]
