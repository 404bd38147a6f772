"""scipy.linalg.eigh's remaining keywords (check_finite, overwrite_a/b, driver, turbo): accepted,
refused where SciPy refuses them, and without effect on the result (which matches SciPy's with
the same keywords)."""

import jax
import numpy as np
import pytest
import scipy.linalg as sl

from shoal.linalg import eigh

jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(0)
N = 6
X = rng.normal(size=(N, N))
A = X + X.T
Y = rng.normal(size=(N, N))
B = Y @ Y.T + N * np.eye(N)


@pytest.mark.parametrize(
    "b, driver, subset",
    [(None, d, None) for d in ("ev", "evd", "evr", "evx")]
    + [(B, d, None) for d in ("gv", "gvd", "gvx")]
    + [(None, d, (1, 3)) for d in ("evr", "evx")]
    + [(B, "gvx", (1, 3))],
)
def test_drivers_match_scipy(b, driver, subset):
    kw = dict(driver=driver, subset_by_index=subset, check_finite=False, overwrite_a=True,
              overwrite_b=True)  # fmt: skip
    w, v = eigh(A, b, **kw)
    w_ref, v_ref = sl.eigh(A, b, **kw)
    np.testing.assert_allclose(w, w_ref, rtol=1e-12, atol=1e-12)
    v, v_ref = np.asarray(v), v_ref * np.sign(v_ref[0]) * np.sign(np.asarray(v)[0])
    np.testing.assert_allclose(v, v_ref, rtol=1e-9, atol=1e-10)


def test_nothing_is_overwritten_and_turbo_is_accepted():
    a, b = A.copy(), B.copy()
    w = eigh(a, b, overwrite_a=True, overwrite_b=True, turbo=False, eigvals_only=True)
    assert np.array_equal(a, A) and np.array_equal(b, B)
    np.testing.assert_allclose(w, sl.eigh(A, B, eigvals_only=True), rtol=1e-12)


def test_check_finite_false_still_checks():
    bad = A.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        sl.eigh(bad)  # SciPy's default check
    with pytest.raises(np.linalg.LinAlgError, match="NaN or Inf"):
        eigh(bad, check_finite=False)


@pytest.mark.parametrize(
    "kw, b, message",
    [
        (dict(driver="evz"), None, "driver must be None or one of"),
        (dict(driver=3), None, "driver must be None or one of"),
        (dict(driver="gvd"), None, "needs b"),
        (dict(driver="evd"), B, "but b was given"),
        (dict(driver="evd", subset_by_index=(0, 1)), None, "cannot compute subsets"),
        (dict(driver="gvd", subset_by_value=(0, 1)), B, "cannot compute subsets"),
    ],
)
def test_drivers_refused_where_scipy_refuses(kw, b, message):
    with pytest.raises(ValueError, match=message):
        eigh(A, b, **kw)
    if not isinstance(kw["driver"], int):
        with pytest.raises(ValueError):
            sl.eigh(A, b, **kw)


@pytest.mark.parametrize("name", ["check_finite", "overwrite_a", "overwrite_b", "turbo"])
def test_flags_must_be_booleans(name):
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        eigh(A, **{name: "yes"})
