"""shoal.linalg: differentiable standard and generalized Hermitian eigensolvers.

``eigh(a, b=None, ...)`` follows ``scipy.linalg.eigh``; ``eigh_gen(a, b, itype=...)`` is the
generalized solver. CPU kernels call SciPy's LAPACK through the XLA FFI, CUDA kernels cuSOLVER
(loaded at run time); ``method="jax"`` is a pure-JAX path with the same derivative rule.
"""

from shoal.linalg._api import eigh, eigh_gen

__all__ = ["eigh", "eigh_gen"]
