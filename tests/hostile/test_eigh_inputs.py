"""shoal.linalg.eigh / eigh_gen under hostile input: matrices of random shapes and dtypes
holding NaN/±Inf/huge/subnormal entries, non-arrays, and hostile values for every keyword.
Each call raises a ValueError/TypeError naming the argument, a LinAlgError exactly when the
matrix as read is non-finite (or b is not positive definite), or returns a solution with a
small residual and orthonormal vectors; inside jit a hostile batch element is NaN and leaves
the others bit for bit. Run in a child process (conftest.run_child): the values reach LAPACK.
The bugs those runs found are pinned below, in process."""

import jax
import numpy as np
import pytest
import scipy.linalg

from shoal.linalg import eigh


def test_matrix_arguments(child):
    report = child("hostile_eigh_cases:matrix_arguments")
    assert report["examples"]["eigh a"] >= 50 and report["examples"]["eigh b"] >= 50
    assert min(report["outcomes"].get(k, 0) for k in ("solved", "clear error", "LinAlgError")) >= 5


def test_keyword_arguments(child):
    report = child("hostile_eigh_cases:option_arguments")
    assert len(report["examples"]) == 10
    assert report["outcomes"]["solved"] >= 20 and report["outcomes"]["clear error"] >= 20


# The bugs the hostile runs found, pinned one by one (input: what it did before the fix).
A = np.array([[2.0, 1.0], [1.0, 3.0]])
BAD_INPUT = [
    # reported as a shape () problem, or a raw NumPy/JAX error not naming the argument
    (lambda: eigh(None), TypeError, "a must be an array of numbers; got NoneType"),
    (lambda: eigh("ab"), TypeError, "a must be an array of numbers; got str"),
    (lambda: eigh(np.array([[object()]])), TypeError, "a must be an array of numbers"),
    (lambda: eigh([[1.0], [1.0, 2.0]]), ValueError, "a must be an array of numbers"),
    (lambda: eigh(A, "x"), TypeError, "b must be an array of numbers"),
    # silently truthy flags, or numpy's ambiguous truth value
    (lambda: eigh(A, lower="no"), TypeError, "lower must be True or False; got 'no'"),
    (lambda: eigh(A, lower=np.array([1, 0])), TypeError, "lower must be True or False"),
    (lambda: eigh(A, eigvals_only=None), TypeError, "eigvals_only must be True or False"),
    (lambda: eigh(A, A, type=np.array([])), ValueError, "type must be 1, 2 or 3"),
    (lambda: eigh(A, method=np.array(["a", "b"])), ValueError, "method must be 'lapack'"),
    (lambda: eigh(A, subset_by_index=(False, True)), ValueError, "subset_by_index must be two"),
    (lambda: eigh(A, deg_thresh="x"), TypeError, "deg_thresh must be a real number"),
    (lambda: eigh(A, deg_thresh=np.ones(2)), TypeError, "deg_thresh must be a real number"),
    (lambda: eigh(A, broadening=("lorentzian", "x")), TypeError, "Lorentzian width must be"),
    # a subnormal bound, read as 0 by the kernel: was a JaxRuntimeError "need vl < vu"
    (lambda: eigh(A, subset_by_value=(0.0, 5e-324)), ValueError, "subnormal bounds"),
]


@pytest.mark.parametrize(("call", "error", "match"), BAD_INPUT)
def test_found_bad_input_is_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("jit", [False, True])
def test_entries_near_the_largest_float_do_not_overflow_the_symmetrization(jit):
    # (a + aᵀ)/2 overflows at 1e308 (jnp.linalg.eigh returns NaN here); under jit XLA factored
    # a/2 + aᵀ/2 back into it: NaN eigenvalues for a finite, symmetric matrix
    a = np.array([[1e308, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, -1.0]])
    w = (jax.jit(eigh) if jit else eigh)(a)[0]
    ref = scipy.linalg.eigh(a, eigvals_only=True)
    np.testing.assert_allclose(w, ref, rtol=1e-12, atol=1e-16 * 1e308)
