"""Rodas5P (Rosenbrock 5(4), stiff) ensemble solver: ``shoal.ode.solve(method="rodas5p")``."""

import functools

from shoal.ode._solve import solve as _solve

solve = functools.partial(_solve, method="rodas5p")
solve.__doc__ = _solve.__doc__

__all__ = ["solve"]
