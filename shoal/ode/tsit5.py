"""Tsit5 (Tsitouras 5(4)) ensemble solver: ``shoal.ode.solve`` with ``method="tsit5"``."""

import functools

from shoal.ode._solve import solve as _solve

solve = functools.partial(_solve, method="tsit5")
solve.__doc__ = _solve.__doc__

__all__ = ["solve"]
