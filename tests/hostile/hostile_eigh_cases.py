"""Hostile values for every argument of shoal.linalg.eigh and eigh_gen, run in a child process
by test_eigh_inputs.py (the values reach LAPACK). Each case returns {"examples": {...}}.

Documented behaviour checked: a clear ValueError/TypeError naming the argument; or, outside
jit, numpy.linalg.LinAlgError exactly when the matrix as read holds NaN/Inf (or b is not
positive definite), inside jit NaN for exactly those batch elements; otherwise ascending
eigenvalues with a small residual ‖A V − B V Λ‖ and (B-)orthonormal vectors.
"""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np
from hostile_values import anything, scalars
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from shoal.linalg import eigh, eigh_gen

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

SPECIAL64 = [np.nan, np.inf, -np.inf, 1e308, -1e308, 5e-324, 1e-310, 0.0, -0.0, 1e300]
SPECIAL32 = [np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-45, 0.0, -0.0, 1e30]


def _elements(dtype):
    special = SPECIAL32 if np.dtype(dtype) in (np.float32, np.complex64) else SPECIAL64
    return st.one_of(st.floats(-10, 10, width=32), st.sampled_from(special))


@st.composite
def matrices(draw, square=True):
    """(..., n, n) arrays of the supported dtypes (and int/bool), many with special values."""
    dtype = draw(st.sampled_from([np.float64, np.float32, np.complex128, np.complex64,
                                  np.int32, np.bool_]))
    n = draw(st.integers(0, 4))
    batch = draw(st.sampled_from([(), (2,), (1, 2)]))
    shape = batch + (n, n if square else draw(st.integers(0, 4)))
    if np.dtype(dtype).kind in "ib":
        return draw(hnp.arrays(dtype, shape))
    base = np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64
    real = draw(hnp.arrays(base, shape, elements=_elements(base)))
    if np.dtype(dtype).kind == "c":
        real = real + 1j * draw(hnp.arrays(base, shape, elements=_elements(base)))
    return real.astype(dtype)


def expect_clear_error(err, names):
    text = str(err)
    assert isinstance(err, (ValueError, TypeError)) and any(n in text for n in names), (
        f"unclear error for {names}: {type(err).__name__}: {text[:300]}")


def _as_read(x, lower, symmetrize):
    """The Hermitian matrix eigh solves for input x (in float64/complex128)."""
    x = np.asarray(x)
    x = x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)
    xh = np.conj(np.swapaxes(x, -1, -2))
    if symmetrize:
        return 0.5 * x + 0.5 * xh
    tri = np.tril(x, -1) if lower else np.triu(x, 1)
    diag = np.real(np.diagonal(x, axis1=-2, axis2=-1))
    return tri + np.conj(np.swapaxes(tri, -1, -2)) + diag[..., None] * np.eye(x.shape[-1])


def _tol(dtype):
    return 1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9


def check_solution(a, b, w, v, itype=1):
    """Ascending w; residual and (B-)orthonormality scaled by the matrices' size, per element."""
    w, v = np.asarray(w), np.asarray(v)
    tol = _tol(v.dtype)
    batch = w.shape[:-1]
    for idx in np.ndindex(*batch):
        ai = a[idx] if a.ndim > 2 else a
        wi, vi = w[idx], v[idx]
        found = np.isfinite(wi)
        wi, vi = wi[found], vi[:, found].astype(ai.dtype if ai.dtype.kind == "c" else float)
        if wi.size == 0:
            continue
        assert np.all(np.diff(wi) >= 0), wi
        scale = max(np.abs(ai).max(), np.abs(wi).max(), np.finfo(float).tiny)
        n = ai.shape[-1]
        if b is None:
            res = (ai / scale) @ vi - vi * (wi / scale)
            gram = np.conj(vi.T) @ vi
            bound = 1.0
        else:
            bi = b[idx] if b.ndim > 2 else b
            bscale = np.abs(bi).max()
            if itype == 1:
                res = (ai / scale) @ vi - (bi / bscale) @ vi * (wi * bscale / scale)
            elif itype == 2:
                res = (ai / scale) @ ((bi / bscale) @ vi) - vi * (wi / (scale * bscale))
            else:
                res = (bi / bscale) @ ((ai / scale) @ vi) - vi * (wi / (scale * bscale))
            metric = np.linalg.inv(bi) if itype == 3 else bi
            gram = np.conj(vi.T) @ metric @ vi
            bound = np.linalg.cond(bi) * max(1.0, np.abs(vi).max() ** 2)
        assert np.abs(res).max() <= 100 * n * tol * bound * max(1.0, np.abs(vi).max()), idx
        assert np.abs(gram - np.eye(wi.size)).max() <= 100 * n * tol * bound, idx


OUTCOMES = collections.Counter()  # what the examples ended in: a test that never solves fails


def _may_overflow(a, b, dtype):
    """Whether the spectrum (|λ| ≤ n max|a| ‖b⁻¹‖) or the reduction may reach the largest
    float, within a margin for rounding in LAPACK's scaling."""
    if a.size == 0:
        return False
    bound = a.shape[-1] * np.abs(a).max()
    if b is not None:
        with np.errstate(all="ignore"):
            bound *= np.max(1.0 / np.linalg.eigvalsh(b).clip(min=np.finfo(float).tiny))
    return not bound < np.finfo(dtype).max / 1e3


def matrix_arguments(per_argument: int = 50):
    counts = collections.Counter()
    for name in ("a", "b"):  # square matrices (solved or LinAlgError), then anything else
        _one_matrix(name, per_argument, counts, matrices())
        _one_matrix(name, per_argument // 2, counts,
                    st.one_of(matrices(square=False), anything(max_dims=4)))
    _in_jit(per_argument // 2, counts)
    return {"examples": dict(counts), "outcomes": dict(OUTCOMES)}


def _spd(n, dtype):
    x = np.arange(1.0, n * n + 1).reshape(n, n) / (n * n)
    return (x @ x.T + n * np.eye(n)).astype(dtype)


def _herm(n, dtype):
    x = np.cos(np.arange(n * n).reshape(n, n))
    return (x + x.T).astype(dtype)


def _one_matrix(name, max_examples, counts, values):
    @settings(max_examples=max_examples, **SETTINGS)
    @given(value=values,
           symmetrize=st.booleans(), lower=st.booleans(), eigvals_only=st.booleans(),
           generalized=st.booleans())
    def run(value, symmetrize, lower, eigvals_only, generalized):
        counts[f"eigh {name}"] += 1
        shape = np.shape(value) if hasattr(value, "shape") else None
        n = shape[-1] if shape and len(shape) >= 2 and shape[-1] == shape[-2] else 3
        if name == "a":
            a, other = value, (_spd(n, np.float64) if generalized else None)
            b = other
        else:
            a, b = _herm(n, np.float64), value
        kw = dict(symmetrize_input=symmetrize, lower=lower, eigvals_only=eigvals_only)
        try:
            out = eigh(a, b, **kw)
        except np.linalg.LinAlgError as err:
            read = _as_read(value, lower, symmetrize)
            if "NaN or Inf" in str(err):
                assert not np.all(np.isfinite(read)), err
            else:
                assert name == "b" and "positive definite" in str(err), err
            OUTCOMES["LinAlgError"] += 1
            return
        except Exception as err:  # noqa: BLE001
            expect_clear_error(err, (name, "dtype"))
            OUTCOMES["clear error"] += 1
            return
        OUTCOMES["solved"] += 1
        w = out if eigvals_only else out[0]
        a_read = _as_read(a, lower, symmetrize)
        b_read = None if b is None else _as_read(b, lower, symmetrize)
        if _may_overflow(a_read, b_read, np.asarray(w).dtype):
            return  # the eigenvalues themselves may exceed the largest float: Inf is honest
        assert np.all(np.isfinite(np.asarray(w))), w
        if not eigvals_only:
            check_solution(a_read, b_read, out[0], out[1])

    run()


def _in_jit(max_examples, counts):
    """Inside jit a hostile element of a batch is NaN; the others are bit for bit the same as
    solved without it."""
    solve = jax.jit(lambda a: eigh(a))

    @settings(max_examples=max_examples, **SETTINGS)
    @given(entry=st.sampled_from(SPECIAL64), where=st.integers(0, 8), bad=st.integers(0, 2))
    def run(entry, where, bad):
        counts["eigh a (batch element, under jit)"] += 1
        a = np.stack([_herm(3, np.float64) + k for k in range(3)])
        a[bad].flat[where] = entry
        w, v = solve(a)
        w, v = np.asarray(w), np.asarray(v)
        finite = np.all(np.isfinite(_as_read(a[bad], True, True)))
        assert np.all(np.isfinite(w[bad])) == finite
        if not finite:
            assert np.all(np.isnan(w[bad])) and np.all(np.isnan(v[bad]))
        others = [k for k in range(3) if k != bad]
        w_alone, v_alone = solve(a[others])
        np.testing.assert_array_equal(w[others], w_alone)
        np.testing.assert_array_equal(v[others], v_alone)

    run()


OPTIONS = {
    "lower": st.one_of(st.booleans(), scalars),
    "symmetrize_input": st.one_of(st.booleans(), scalars),
    "eigvals_only": st.one_of(st.booleans(), scalars),
    "type": st.one_of(st.sampled_from([1, 2, 3, 0, 4, 1.0, True, "1", np.int64(2)]), scalars),
    "itype": st.one_of(st.sampled_from([1, 2, 3, -1, None, 2.5]), scalars),
    "subset_by_index": st.one_of(
        st.tuples(st.integers(-2, 5), st.integers(-2, 5)),
        st.sampled_from([(0, 1, 2), "01", (0.0, 1.0), (False, True), np.array([0, 2]), ()]),
        scalars),
    "subset_by_value": st.one_of(
        st.tuples(st.sampled_from(SPECIAL64 + [-1.0, 1.0, 2.5]),
                  st.sampled_from(SPECIAL64 + [-1.0, 1.0, 2.5])),
        st.sampled_from([(1.0,), "ab", (None, 1.0), (0, 5e-324)]),
        scalars),
    "deg_thresh": st.one_of(st.sampled_from(SPECIAL64), scalars),
    "broadening": st.one_of(
        st.sampled_from([None, "lorentzian", "Lorentzian", "gaussian", ["lorentzian", 1.0]]),
        st.tuples(st.just("lorentzian"), st.one_of(st.sampled_from(SPECIAL64), scalars))),
    "method": st.one_of(st.sampled_from(["lapack", "jax", "cuda", "LAPACK", None]), scalars),
}


def option_arguments(per_argument: int = 16):
    counts = collections.Counter()
    for name in OPTIONS:
        _one_option(name, per_argument, counts)
    return {"examples": dict(counts), "outcomes": dict(OUTCOMES)}


def _one_option(name, max_examples, counts):
    @settings(max_examples=max_examples, **SETTINGS)
    @given(value=OPTIONS[name], generalized=st.booleans())
    def run(value, generalized):
        counts[f"eigh {name}"] += 1
        n = 4
        a = _herm(n, np.float64)
        b = _spd(n, np.float64) if generalized or name == "itype" else None
        kw = {name: value}
        try:
            if name == "itype":
                out = eigh_gen(a, b, **kw)
            else:
                out = eigh(a, b, **kw)
        except Exception as err:  # noqa: BLE001
            names = {"broadening": ("broadening", "Lorentzian width"),
                     "subset_by_value": ("subset_by_value",),
                     "subset_by_index": ("subset_by_index",)}.get(name, (name,))
            expect_clear_error(err, names)
            OUTCOMES["clear error"] += 1
            return
        OUTCOMES["solved"] += 1
        if name in ("lower", "symmetrize_input", "eigvals_only"):
            assert isinstance(value, (bool, np.bool_)), f"{name}={value!r} was taken as a flag"
        eigvals_only = name == "eigvals_only" and bool(value)
        w = np.asarray(out if eigvals_only else out[0])
        itype = int(value) if name in ("type", "itype") and b is not None else 1
        if not eigvals_only:
            check_solution(a, b, out[0], out[1], itype=itype)
        if name in ("deg_thresh", "broadening"):
            # sum(w²) = trace of (A B⁻¹)² for type 1: its gradient is exact whatever the
            # threshold or broadening (they touch eigenvector derivatives only)
            grad = jax.grad(lambda a: jnp.sum(eigh(a, b, **kw)[0] ** 2))(a)
            if b is None:
                np.testing.assert_allclose(grad, 2 * a, rtol=1e-9, atol=1e-9)
            else:
                binv = np.linalg.inv(b)
                np.testing.assert_allclose(grad, 2 * binv @ a @ binv, rtol=1e-8, atol=1e-8)
        assert w.dtype == np.float64

    run()
