"""Derivatives of shoal.linalg.eigh: check_grads (orders 1 and 2, forward and reverse) for every
type and complex input w.r.t. a and b; degenerate generalized spectra against central finite
differences of scipy.linalg.eigh; subset semantics; the pure-JAX path; transformations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from jax.test_util import check_grads

from shoal.linalg import eigh

jax.config.update("jax_enable_x64", True)


def rand_herm(rng, n, complex_=False, batch=()):
    x = rng.normal(size=batch + (n, n))
    if complex_:
        x = x + 1j * rng.normal(size=batch + (n, n))
    return x + np.conj(np.swapaxes(x, -1, -2))


def rand_spd(rng, n, complex_=False, batch=()):
    x = rng.normal(size=batch + (n, n))
    if complex_:
        x = x + 1j * rng.normal(size=batch + (n, n))
    return x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)


def gauge_free(v, w):
    """Functions of the eigenvectors that do not depend on their phases."""
    g = jnp.arange(1.0, v.shape[-1] + 1)
    spectral = (v * g) @ jnp.conj(jnp.swapaxes(v, -1, -2))  # Σ g_i v_i v_iᴴ
    return jnp.abs(v) ** 2, spectral, w


def herm_jnp(x):
    return 0.5 * (x + jnp.conj(x.T))


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("method", ["lapack", "jax"])
def test_check_grads(itype, complex_, method):
    rng = np.random.default_rng(10 * itype + complex_)
    n = 4
    a = rand_herm(rng, n, complex_)
    b = rand_spd(rng, n, complex_)
    if itype == 0:

        def f(a):
            w, v = eigh(herm_jnp(a), method=method)
            return gauge_free(v, w)

        args = (a,)
    else:

        def f(a, b):
            w, v = eigh(herm_jnp(a), herm_jnp(b), type=itype, method=method)
            return gauge_free(v, w)

        args = (a, b)
    order = 2 if method == "lapack" else 1
    check_grads(f, args, order=order, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


def test_real_eigenvectors_directly():
    """Real case: the raw eigenvectors (sign fixed by continuity) have the right derivative."""
    rng = np.random.default_rng(11)
    a, b = rand_herm(rng, 5), rand_spd(rng, 5)
    for it in (1, 2, 3):
        check_grads(
            lambda a, b, it=it: eigh(herm_jnp(a), herm_jnp(b), type=it)[1],
            (a, b),
            order=1,
            modes=("fwd", "rev"),
            atol=1e-6,
            rtol=1e-6,
        )


def _fd(fun, x, dx, h=1e-6):
    return (fun(x + h * dx) - fun(x - h * dx)) / (2 * h)


def test_generalized_gradient_against_scipy_fd():
    """The case an earlier package got ~100x wrong: B far from the identity, loss using vectors."""
    rng = np.random.default_rng(12)
    n = 6
    a = rand_herm(rng, n)
    x = rng.normal(size=(n, n)) * 3
    b = x @ x.T + 0.5 * np.eye(n)
    g = rng.normal(size=(n, n))

    def loss_np(a, b):
        w, v = sl.eigh(a, b)
        return np.sum(w**2) + np.sum(g * (v @ np.diag(w) @ v.T))

    def loss(a, b):
        w, v = eigh(a, b, symmetrize_input=False)
        return jnp.sum(w**2) + jnp.sum(g * (v @ jnp.diag(w) @ v.T))

    ga, gb = jax.grad(loss, argnums=(0, 1))(a, b)
    # only the lower triangle is read: directions in the lower triangle
    for _ in range(3):
        da = np.tril(rng.normal(size=(n, n)))
        db = np.tril(rng.normal(size=(n, n)))
        fd_a = _fd(lambda t: loss_np(t, b), a, da)
        fd_b = _fd(lambda t: loss_np(a, t), b, db)
        np.testing.assert_allclose(np.sum(ga * da), fd_a, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(np.sum(gb * db), fd_b, rtol=1e-6, atol=1e-7)
    # nothing flows to the triangle that is never read
    assert np.all(np.triu(np.asarray(ga), 1) == 0) and np.all(np.triu(np.asarray(gb), 1) == 0)


def degenerate_pencil(rng, itype, lam, complex_=False):
    """(A, B) whose *generalized* eigenvalues are lam (with repeats), B random SPD."""
    n = len(lam)
    b = rand_spd(rng, n, complex_)
    low = np.linalg.cholesky(b)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)) + (1j * rng.normal(size=(n, n)) if complex_ else 0))
    lam = np.diag(lam)
    if itype == 1:
        v = np.linalg.solve(low.conj().T, q)  # Vᴴ B V = I
        a = b @ v @ lam @ v.conj().T @ b
    elif itype == 2:
        v = np.linalg.solve(low.conj().T, q)
        a = v @ lam @ v.conj().T
    else:
        v = low @ q  # Vᴴ B⁻¹ V = I
        binv_v = np.linalg.solve(b, v)
        a = binv_v @ lam @ binv_v.conj().T
    return 0.5 * (a + a.conj().T), b


@pytest.mark.parametrize("itype", [1, 2, 3])
@pytest.mark.parametrize("split", [0.0, 1e-11])
@pytest.mark.parametrize("method", ["lapack", "jax"])
def test_degenerate_generalized_invariant_losses(itype, split, method):
    rng = np.random.default_rng(20 + itype)
    lam = np.array([1.0, 1.0 + split, 1.0 + 2 * split, 2.5, 4.0])
    n = len(lam)
    a, b = degenerate_pencil(rng, itype, lam)
    got = sl.eigh(a, b, type=itype, eigvals_only=True)
    assert np.ptp(got[:3]) < 1e-9  # the generalized eigenvalues really are (nearly) degenerate
    g = rng.normal(size=(n, n))
    metric = (lambda b: np.linalg.inv(b)) if itype == 3 else (lambda b: b)

    def losses_np(a, b):
        w, v = sl.eigh(a, b, type=itype)
        vs = v[:, :3]
        proj = vs @ vs.T @ metric(b)  # the spectral projector of the degenerate cluster
        return np.array([w.sum(), (w**2).sum(), np.sum(g * proj)])

    def losses(a, b):
        w, v = eigh(a, b, type=itype, method=method, symmetrize_input=False)
        vs = v[:, :3]
        m = jnp.linalg.inv(b) if itype == 3 else b
        proj = vs @ vs.T @ m
        return jnp.stack([w.sum(), (w**2).sum(), jnp.sum(g * proj)])

    jac_a, jac_b = jax.jacrev(losses, argnums=(0, 1))(a, b)
    assert np.all(np.isfinite(jac_a)) and np.all(np.isfinite(jac_b))
    for _ in range(2):
        da = np.tril(rng.normal(size=(n, n)))
        db = np.tril(rng.normal(size=(n, n)))
        fd_a = _fd(lambda t: losses_np(t, b), a, da, h=1e-5)
        fd_b = _fd(lambda t: losses_np(a, t), b, db, h=1e-5)
        np.testing.assert_allclose(np.einsum("kij,ij->k", jac_a, da), fd_a, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.einsum("kij,ij->k", jac_b, db), fd_b, rtol=1e-5, atol=1e-6)
    # forward mode agrees with reverse mode
    da = np.tril(rng.normal(size=(n, n)))
    _, t = jax.jvp(losses, (a, b), (da, np.zeros_like(b)))
    np.testing.assert_allclose(t, np.einsum("kij,ij->k", jac_a, da), rtol=1e-8, atol=1e-10)


def test_degenerate_complex_generalized_is_finite():
    rng = np.random.default_rng(30)
    a, b = degenerate_pencil(rng, 1, np.array([1.0, 1.0, 3.0, 3.0]), complex_=True)

    def loss(a, b):
        w, v = eigh(a, b)
        return jnp.sum(w**2) + jnp.real(jnp.sum(jnp.abs(v[:, :2] @ jnp.conj(v[:, :2].T)) ** 2))

    ga, gb = jax.grad(loss, argnums=(0, 1))(a, b)
    assert np.all(np.isfinite(ga)) and np.all(np.isfinite(gb))
    h = jax.hessian(lambda a: jnp.sum(eigh(a, b, eigvals_only=True) ** 2))(a.real)
    assert np.all(np.isfinite(h))


def test_default_threshold_is_relative():
    """A split far below 1e-9 in absolute terms but on a 1e-12 scale spectrum is not masked."""
    rng = np.random.default_rng(31)
    scale = 1e-12
    lam = scale * np.array([1.0, 1.5, 3.0, 4.0])
    a, b = degenerate_pencil(rng, 1, lam)
    da = np.tril(rng.normal(size=(4, 4))) * scale
    (_, v), (dw, dv) = jax.jvp(lambda a: eigh(a, b, symmetrize_input=False), (a,), (da,))

    def v_np(t):
        w, v = sl.eigh(t, b)
        return v * np.sign(v[0])

    ref = _fd(v_np, a, da, h=1e-4)
    # dv belongs to the jvp's own eigenvectors v, whose signs LAPACK chooses: bring them to the
    # reference's (a separate eigh call may choose other signs; that made this test flaky).
    np.testing.assert_allclose(
        np.asarray(dv) * np.sign(np.asarray(v)[0]),
        ref,
        rtol=1e-5,
        atol=1e-5 * np.abs(ref).max(),
    )


def test_lorentzian_broadening():
    rng = np.random.default_rng(32)
    a, b = rand_herm(rng, 5), rand_spd(rng, 5)

    def loss(a, **kw):
        w, v = eigh(a, b, **kw)
        return jnp.sum(jnp.abs(v[:, :2]) ** 2 * jnp.arange(5.0)[:, None])

    exact = jax.grad(loss)(a)
    near = jax.grad(lambda a: loss(a, broadening=("lorentzian", 1e-8)))(a)
    np.testing.assert_allclose(near, exact, rtol=1e-6, atol=1e-9)
    # degenerate: finite, and between masked (width 0 limit) and nothing
    ad, bd = degenerate_pencil(rng, 1, np.array([1.0, 1.0, 2.0, 3.0, 3.0]))
    g = jax.grad(lambda a: jnp.sum(eigh(a, bd, broadening="lorentzian")[1] ** 2))(ad)
    assert np.all(np.isfinite(g))


@pytest.mark.parametrize("itype", [0, 1, 3])
def test_subset_derivatives(itype):
    """Eigenvalue and eigenvector derivatives of an index subset are those of the full
    decomposition, coupling to the eigenvectors outside the subset included."""
    rng = np.random.default_rng(40 + itype)
    n = 6
    a = rand_herm(rng, n)
    b = None if itype == 0 else rand_spd(rng, n)
    kw = dict(type=max(itype, 1))
    lower_only = dict(symmetrize_input=False)  # tril directions, compared with SciPy's reading
    da = np.tril(rng.normal(size=(n, n)))
    db = None if b is None else np.tril(rng.normal(size=(n, n)))
    lo, hi = 1, 3

    def sol(t, s=0.0):
        bb = None if b is None else b + s * db
        w, v = sl.eigh(t, bb, **kw)
        return w, v * np.sign(v[0])

    h = 1e-6
    wp, vp = sol(a + h * da, h)
    wm, vm = sol(a - h * da, -h)
    w0, v0 = sol(a)
    dw_ref = (wp - wm) / (2 * h)
    dv_full = (vp - vm) / (2 * h)
    dv_ref = dv_full[:, lo : hi + 1]

    if b is None:
        fun = lambda a: eigh(a, subset_by_index=(lo, hi), **lower_only)  # noqa: E731
        _, (dw, dv) = jax.jvp(fun, (a,), (da,))
        w, v = fun(a)
    else:
        fun = lambda a, b: eigh(a, b, subset_by_index=(lo, hi), **kw, **lower_only)  # noqa: E731
        _, (dw, dv) = jax.jvp(fun, (a, b), (da, db))
        w, v = fun(a, b)
    sign = np.sign(np.asarray(v)[0])
    np.testing.assert_allclose(dw, dw_ref[lo : hi + 1], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(dv) * sign, dv_ref, rtol=1e-5, atol=1e-7)
    # eigenvalue-only subsets: reverse mode
    g = jax.grad(
        lambda a: jnp.sum(
            eigh(a, b, eigvals_only=True, subset_by_index=(lo, hi), **kw, **lower_only) ** 2
        )
    )(a)
    dw_a = (sol(a + h * da)[0] - sol(a - h * da)[0]) / (2 * h)  # b held fixed
    np.testing.assert_allclose(
        np.sum(g * da), np.sum(2 * w0[lo : hi + 1] * dw_a[lo : hi + 1]), rtol=1e-6
    )


def test_subset_by_value_padding_has_zero_gradient():
    rng = np.random.default_rng(50)
    a, b = rand_herm(rng, 5), rand_spd(rng, 5)

    def loss(a):
        w = eigh(a, b, subset_by_value=(-0.5, 0.5), eigvals_only=True)
        return jnp.sum(jnp.where(jnp.isnan(w), 0.0, w) ** 2)

    g = jax.grad(loss)(a)
    assert np.all(np.isfinite(g))
    check_grads(loss, (a,), order=1, modes=("rev",), atol=1e-6, rtol=1e-6)


def test_transformations_agree():
    rng = np.random.default_rng(60)
    a = rand_herm(rng, 4, batch=(3,))
    b = rand_spd(rng, 4, batch=(3,))

    def f(a, b):
        w, v = eigh(a, b, type=2)
        return jnp.sum(w * jnp.arange(1.0, 5.0)) + jnp.sum(jnp.abs(v[:, 0]) ** 2)

    g_loop = np.stack([np.asarray(jax.grad(f)(a[i], b[i])) for i in range(3)])
    g_vmap = jax.jit(jax.vmap(jax.grad(f)))(a, b)
    np.testing.assert_allclose(g_vmap, g_loop, rtol=1e-10, atol=1e-12)
    jf = jax.jacfwd(f, argnums=1)(a[0], b[0])
    jr = jax.jacrev(f, argnums=1)(a[0], b[0])
    np.testing.assert_allclose(jf, jr, rtol=1e-9, atol=1e-11)

    def cubic(b):
        return jnp.sum(eigh(a[0], b, type=3, eigvals_only=True) ** 3)

    hess = jax.jit(jax.hessian(cubic))(b[0])
    e10 = np.zeros((4, 4))
    e10[1, 0] = 1.0  # a lower-triangle entry: the upper one is never read
    fd = _fd(lambda t: np.asarray(jax.grad(cubic)(t)), b[0], e10)
    np.testing.assert_allclose(hess[:, :, 1, 0], fd, rtol=1e-5, atol=1e-6)
    # single kernel call for a vmapped gradient as well
    hlo = jax.jit(jax.vmap(jax.grad(f))).lower(a, b).as_text()
    assert hlo.count("shoal_linalg_eigh_gen_cpu") == 1


def test_jax_method_gradients_agree_with_lapack():
    rng = np.random.default_rng(70)
    for complex_ in (False, True):
        a, b = rand_herm(rng, 5, complex_), rand_spd(rng, 5, complex_)
        for it in (1, 2, 3):

            def loss(a, b, method, it=it):
                w, v = eigh(a, b, type=it, method=method)
                return jnp.sum(w**2) + jnp.sum(jnp.abs(v[:, 1:3]) ** 4)

            g1 = jax.grad(loss, argnums=(0, 1))(a, b, "lapack")
            g2 = jax.grad(loss, argnums=(0, 1))(a, b, "jax")
            for x, y in zip(g1, g2, strict=True):
                np.testing.assert_allclose(x, y, rtol=1e-8, atol=1e-10)


def test_float32_gradients():
    rng = np.random.default_rng(80)
    a = rand_herm(rng, 4).astype(np.float32)
    b = rand_spd(rng, 4).astype(np.float32)
    g = jax.grad(lambda a, b: jnp.sum(eigh(a, b)[0] ** 2), argnums=(0, 1))(a, b)
    assert g[0].dtype == np.float32 and g[1].dtype == np.float32
    g64 = jax.grad(lambda a, b: jnp.sum(eigh(a, b)[0] ** 2), argnums=(0, 1))(
        a.astype(np.float64), b.astype(np.float64)
    )
    for x, y in zip(g, g64, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("complex_", [False, True])
def test_upper_triangle_gradients(complex_):
    """lower=False, symmetrize_input=False: derivatives w.r.t. the upper triangle, nothing to
    the lower one."""
    upper = dict(lower=False, symmetrize_input=False)
    rng = np.random.default_rng(90)
    a, b = rand_herm(rng, 4, complex_), rand_spd(rng, 4, complex_)
    for it in (1, 3):

        def f(a, b, it=it):
            w, v = eigh(a, b, type=it, **upper)
            return gauge_free(v, w)

        check_grads(f, (a, b), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)
        ga, gb = jax.grad(
            lambda a, b, it=it: jnp.real(
                jnp.sum(gauge_free(*eigh(a, b, type=it, **upper)[::-1])[1])
            ),
            argnums=(0, 1),
        )(a, b)
        assert np.all(np.tril(np.asarray(ga), -1) == 0) and np.all(np.tril(np.asarray(gb), -1) == 0)
