"""Ensemble ODE solvers compiled from a ``jax.numpy`` right-hand side.

>>> from shoal.ode import solve
>>> ys = solve(f, y0, t_span, params, method="tsit5")   # (N, n_save, n)
"""

from shoal._jit import CompileError
from shoal.ode._codegen import ModelTraceError
from shoal.ode._options import Event
from shoal.ode._solve import solve
from shoal.ode._status import Status
from shoal.ode._steady_state import steady_state

__all__ = ["solve", "steady_state", "Event", "Status", "ModelTraceError", "CompileError"]
