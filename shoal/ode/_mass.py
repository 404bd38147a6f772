"""A constant mass matrix: ``M y' = f(y, t, p)``, differential-algebraic where M is singular.

The Rosenbrock methods take M where the identity stood (``include/shoal/ode/mass.hpp``); this
module holds the matrix as a hashable record (:class:`MassMatrix`: it keys compiled kernels, and
C++ receives its nonzeros) and the initial conditions of the DAE.

With M singular of rank r, the k = n − r equations ``Nᵀ f(y, t, p) = 0`` (N: a basis of M's left
null space) are algebraic and must hold at t0. A Rosenbrock method started off them jumps to them
in its first step, so an inconsistent y0 would be silently replaced; shoal checks instead, as
one Newton correction of the algebraic components (Z: a basis of M's right null space)

    δy = −Z (Nᵀ J Z)⁻¹ Nᵀ f(y0, t0, p),

whose weighted RMS norm against ``atol + rtol |y0|`` must be at most 1 (the step controller's
notion of "within tolerance"). A singular ``Nᵀ J Z`` means the system is not index 1 at y0.
``dae_init="solve"`` instead iterates that correction to convergence (holding the differential
components, as the usual "BrownFullBasic" initialisation does) and differentiates the result by
the implicit-function theorem: one last Newton step taken from the converged point, with the
iteration itself outside differentiation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

NEWTON_ITERATIONS = 20  # dae_init="solve": at most this many corrections
NEWTON_CONVERGED = 1e-3  # ... stopping once one is this small in the tolerance's norm


class MassMatrix:
    """An immutable ``(n, n)`` float64 mass matrix, hashed and compared by value, with the bases
    of its null spaces (from the SVD; rank at the usual ``n · eps · σ_max`` threshold)."""

    __slots__ = ("matrix", "rank", "left_null", "right_null", "_hash")

    def __init__(self, matrix):
        if hasattr(matrix, "toarray"):  # a SciPy sparse matrix
            matrix = matrix.toarray()
        if isinstance(matrix, jax.core.Tracer):
            raise TypeError("mass must be a constant matrix (a NumPy array or nested lists), not "
                            "a traced JAX value: it is compiled into the kernel")
        try:
            m = np.array(matrix, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise TypeError(f"mass must be an (n, n) array of numbers; got {matrix!r}") from err
        if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
            raise ValueError(f"mass must be a square (n, n) matrix; got shape {m.shape}")
        if not np.all(np.isfinite(m)):
            where = [tuple(int(i) for i in ij) for ij in np.argwhere(~np.isfinite(m))[:5]]
            raise ValueError(f"mass must be finite; got non-finite entries at (row, col) = {where}")
        m.setflags(write=False)
        self.matrix = m
        u, s, vt = np.linalg.svd(m)
        tol = s.max(initial=0.0) * m.shape[0] * np.finfo(np.float64).eps
        self.rank = int(np.sum(s > tol))
        self.left_null = u[:, self.rank:]
        self.right_null = vt[self.rank:].T
        self._hash = hash((m.shape, m.tobytes()))

    @property
    def n(self) -> int:
        return self.matrix.shape[0]

    @property
    def singular(self) -> bool:
        return self.rank < self.n

    @property
    def pattern(self) -> np.ndarray:
        return self.matrix != 0

    def emit_cpp(self, name: str) -> str:
        """``struct name``: the nonzeros in row-major order, as ``mass.hpp`` reads them."""
        rows, cols = np.nonzero(self.matrix)
        values = self.matrix[rows, cols]
        nnz = len(rows)

        def accessor(kind, fn, items):
            body = ", ".join(items) if nnz else "0"
            return (f"  SHOAL_HD static {kind} {fn}(int k) {{\n"
                    f"    static constexpr {kind} v[{max(nnz, 1)}] = {{{body}}};\n"
                    "    return v[k];\n  }")

        return "\n".join([
            f"struct {name} {{",
            f"  static constexpr int nnz = {nnz};",
            accessor("int", "row", [str(int(i)) for i in rows]),
            accessor("int", "col", [str(int(j)) for j in cols]),
            accessor("double", "value", [repr(float(v)) for v in values]),
            "};",
        ])

    def __eq__(self, other) -> bool:
        return isinstance(other, MassMatrix) and np.array_equal(self.matrix, other.matrix)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"MassMatrix(n={self.n}, rank={self.rank}, nnz={int(self.pattern.sum())})"


def option(value) -> MassMatrix | None:
    """``solve``'s ``mass=``: None or a constant square matrix."""
    if value is None or isinstance(value, MassMatrix):
        return value
    return MassMatrix(value)


def dae_init_option(value) -> str:
    if not isinstance(value, str) or value not in ("check", "solve"):
        raise ValueError(f"dae_init must be 'check' or 'solve'; got {value!r}")
    return value


def initial_states(rhs, mass: MassMatrix, y0, t0, p, rtol: float, atol: float, solve: bool):
    """(y0 to integrate from (N, n), each member's correction norm (N,)).

    y0 (N, n), t0 (N,), p (N, n_params): each trajectory's full parameters; rhs(y, t, p) is f.
    The norm is that of the Newton correction still needed at the returned state (≤ 1:
    consistent; NaN where ``Nᵀ J Z`` is singular or f is not finite). Without ``solve``, y0 is
    returned unchanged.
    """
    dtype = y0.dtype
    left = jnp.asarray(mass.left_null, dtype)
    right = jnp.asarray(mass.right_null, dtype)

    def correction(y, t, p):
        """δy: the algebraic components' Newton step at y."""
        def residual(z):
            return left.T @ rhs(y + right @ z, t, p)

        z = jnp.zeros((right.shape[1],), dtype)
        return -right @ jnp.linalg.solve(jax.jacfwd(residual)(z), residual(z))

    def norm(delta, y):
        scale = atol + rtol * jnp.abs(y)
        return jnp.sqrt(jnp.mean((delta / scale) ** 2))

    def one(y, t, p):
        if solve:
            # The iteration outside differentiation; the derivative from the last step below.
            y_fixed, t_fixed, p_fixed = jax.lax.stop_gradient((y, t, p))

            def not_done(state):
                _, step, i = state
                return (i < NEWTON_ITERATIONS) & ~(step <= NEWTON_CONVERGED)

            def iterate(state):
                y_now, _, i = state
                delta = correction(y_now, t_fixed, p_fixed)
                return y_now + delta, norm(delta, y_now), i + 1

            converged, _, _ = jax.lax.while_loop(
                not_done, iterate, (y_fixed, jnp.asarray(jnp.inf, dtype), 0))
            # y's differential components and the converged algebraic ones; one more step at
            # the real (t, p) makes y's derivative the implicit function's.
            y = y + (converged - y_fixed)
            y = y + correction(y, t, p)
        delta = jax.lax.stop_gradient(correction(y, t, p))
        return y, norm(delta, jax.lax.stop_gradient(y))

    return jax.vmap(one)(y0, t0, p)


def check_supported(mass: MassMatrix, n: int, options) -> None:
    """A clear error for a mass matrix that does not fit y0 or the chosen method and mode."""
    if mass.n != n:
        raise ValueError(f"mass must have shape ({n}, {n}) to match y0's {n} components; got "
                         f"{mass.matrix.shape}")
    method = options.method.value
    if options.method.explicit and mass.singular:
        raise ValueError(
            f"method={method!r} is explicit and cannot solve M y' = f with a singular mass "
            f"matrix (rank {mass.rank} < {n}: a differential-algebraic system); use a "
            "Rosenbrock method: method='rodas5p', 'rodas4' or 'rosenbrock23'")
    if options.method.explicit:
        raise ValueError(
            f"method={method!r} is explicit and solves y' = f only; for M y' = f with this "
            "nonsingular M pass f = lambda y, t, p: jnp.linalg.solve(M, f(y, t, p)), or use a "
            "Rosenbrock method ('rodas5p', 'rodas4', 'rosenbrock23'), which takes mass= "
            "directly")


def consistent_start(rhs, mass: MassMatrix, y0, own, shared, t_rows, n_traj: int, options):
    """(y0 (N, n) to integrate from, the members to mark failed (N,) bool or None).

    Where the norms are concrete, an inconsistent member raises a ValueError instead; under a
    transformation they are marked (status INVALID_INPUT, NaN saves: ``mark_failed``).
    """
    from shoal.ode import _times  # imported here: _times is imported by the solve's rules

    n = y0.shape[-1]
    y_rows = jnp.broadcast_to(y0.reshape(-1, n), (n_traj, n))
    solving = options.dae_init == "solve"
    start, norms = initial_states(rhs, mass, y_rows, _times.rows(t_rows, n_traj)[:, 0],
                                  _times.parameters(own, shared, n_traj), options.rtol,
                                  options.atol, solving)
    failed = ~(norms <= 1)
    if isinstance(failed, jax.core.Tracer):
        return start, failed
    bad = np.flatnonzero(np.asarray(failed))
    if bad.size:
        shown = ", ".join(f"{i} ({float(norms[i]):.3g})" for i in bad[:5])
        more = f" and {bad.size - 5} more" if bad.size > 5 else ""
        what = ("dae_init='solve' did not converge to a consistent y0 within "
                f"{NEWTON_ITERATIONS} Newton iterations" if solving else
                "y0 does not satisfy the algebraic equations of the singular mass matrix")
        hint = ("check that the algebraic equations have a solution near y0" if solving else
                "correct y0, or pass dae_init='solve' to make it consistent")
        raise ValueError(
            f"{what}: member(s) {shown}{more} (the RMS norm, in units of atol + rtol |y0|, of "
            "the Newton correction of the algebraic components still needed; NaN: the "
            "algebraic equations' Jacobian in the algebraic components is singular, so the "
            f"system is not index 1 there, or f is not finite); {hint}")
    return start, None


def mark_failed(ys, status, failed):
    """Members in ``failed`` get NaN saves and status INVALID_INPUT."""
    from shoal.ode._status import Status

    ys = jnp.where(failed.reshape((-1,) + (1,) * (ys.ndim - 1)), jnp.nan, ys)
    return ys, jnp.where(failed, jnp.int32(Status.INVALID_INPUT), status)


def rate_function(rhs, mass: MassMatrix | None):
    """dy/dt(y, t, p) along a solution: f itself without a mass matrix, ``M⁻¹ f`` with an
    invertible one, and for an index-1 DAE the solution of
        Uᵀ M y' = Uᵀ f,   Nᵀ (J y' + ∂f/∂t) = 0
    (U: a basis of M's range; the second block is the algebraic equations differentiated along
    the solution). The rules for save times, the start time and event times use it."""
    if mass is None:
        return rhs
    m = mass.matrix
    u, _, _ = np.linalg.svd(m)
    range_basis, left = u[:, :mass.rank], mass.left_null

    def rate(y, t, p):
        f = rhs(y, t, p)
        if not mass.singular:
            return jnp.linalg.solve(jnp.asarray(m, f.dtype), f)
        jac, f_t = jax.jacfwd(rhs, argnums=(0, 1))(y, t, p)
        rows = jnp.concatenate([jnp.asarray(range_basis.T @ m, f.dtype),
                                jnp.asarray(left.T, f.dtype) @ jac])
        rhs_of = jnp.concatenate([jnp.asarray(range_basis.T, f.dtype) @ f,
                                  -jnp.asarray(left.T, f.dtype) @ f_t])
        return jnp.linalg.solve(rows, rhs_of)

    return rate
