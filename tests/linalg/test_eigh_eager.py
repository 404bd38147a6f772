"""Eager calls (concrete inputs, outside jit) run one cached compiled pipeline: the same bits as
the jitted call, one trace per configuration and shape, and still the eager LinAlgError."""

import jax
import numpy as np
import pytest

from shoal.linalg import _api, eigh

jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(0)
N = 7
X = rng.normal(size=(3, N, N))
A = X + np.swapaxes(X, -1, -2)
Y = rng.normal(size=(N, N))
B = Y @ Y.T + N * np.eye(N)


@pytest.mark.parametrize(
    "kw",
    [dict(), dict(b=B), dict(b=B, type=3, subset_by_index=(1, 3)),
     dict(subset_by_value=(-1.0, 1.0)), dict(b=B, eigvals_only=True),
     dict(symmetrize_input=False, lower=False)],
)  # fmt: skip
def test_eager_equals_jitted_bitwise(kw):
    b = kw.pop("b", None)
    eager = eigh(A, b, **kw)
    jitted = jax.jit(lambda a, b: eigh(a, b, **kw))(A, b)
    for x, y in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_one_trace_per_configuration_and_shape(monkeypatch):
    traces = []
    original = _api._pipeline

    def counting(*args, **kwargs):
        traces.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_api, "_pipeline", counting)
    _api._eager_pipeline.cache_clear()
    for _ in range(3):
        eigh(A, B)
    assert len(traces) == 1
    eigh(A[0], B)  # another shape: one more trace of the same cached callable
    eigh(A, B, type=2)  # another configuration
    assert len(traces) == 3
    _api._eager_pipeline.cache_clear()  # drop the callables that hold the counting wrapper


def test_eager_errors_remain():
    bad = A.copy()
    bad[1, 2, 0] = np.inf
    with pytest.raises(np.linalg.LinAlgError, match=r"batch index \(1,\): the input contains NaN"):
        eigh(bad)
    with pytest.raises(np.linalg.LinAlgError, match="b is not positive definite"):
        eigh(A, -B)
