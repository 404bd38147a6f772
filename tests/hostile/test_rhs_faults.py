"""Right-hand sides that are hostile themselves. Those that reach the kernel (NaN in a region,
blow-up, 1/t at t0 = 0, overflow to Inf) run in a child process and must end with the right
status; those that cannot be compiled (a Python exception while tracing, the wrong shape or
dtype, untranslatable functions) must raise a clear error before anything runs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import solve
from shoal.ode._codegen.tracing import ModelTraceError


@pytest.mark.parametrize("case", ["nan_region", "blow_up", "division_at_start", "overflow"])
def test_faults_in_the_kernel_end_with_a_status(child, case):
    report = child(f"hostile_rhs_cases:{case}")
    assert sum(report["examples"].values()) >= 2


def _user_bug(y, t, p):
    raise RuntimeError("a bug in the user's f")


TRACE_FAULTS = {
    "raises": (RuntimeError, "a bug in the user's f", _user_bug),
    "python if on y": (TypeError, "boolean conversion",
                       lambda y, t, p: y if y[0] > 0 else -y),
    "numpy on a tracer": (TypeError, "__array__",
                          lambda y, t, p: jnp.asarray(np.asarray(y))),
    "wrong signature": (TypeError, "positional argument", lambda y: y),
    "returns None": (ModelTraceError, "returned 0 values", lambda y, t, p: None),
    "wrong shape": (ModelTraceError, r"must return shape \(1,\) like y; it returned shape \(2,\)",
                    lambda y, t, p: jnp.concatenate([y, y])),
    "python scalar": (ModelTraceError, r"it returned shape \(\)", lambda y, t, p: 0.0),
    "int dtype": (ModelTraceError, "must return dtype float64 like y; it returned int32",
                  lambda y, t, p: y.astype(jnp.int32)),
    "float32 dtype": (ModelTraceError, "it returned float32",
                      lambda y, t, p: y.astype(jnp.float32)),
    "complex dtype": (ModelTraceError, "it returned complex128", lambda y, t, p: y * 1j),
    "eigh": (NotImplementedError, "cannot translate primitive 'eigh'",
             lambda y, t, p: jnp.linalg.eigh(jnp.outer(y, y))[0]),
    "igamma": (NotImplementedError, "cannot translate primitive 'igamma'",
               lambda y, t, p: jax.scipy.special.gammainc(2.0, y)),
    "random numbers": (NotImplementedError, "cannot translate random numbers",
                       lambda y, t, p: y * jax.random.normal(jax.random.PRNGKey(0), y.shape)),
    "callback": (NotImplementedError, "cannot translate primitive 'pure_callback'",
                 lambda y, t, p: jax.pure_callback(
                     lambda x: x, jax.ShapeDtypeStruct(y.shape, y.dtype), y)),
}


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
@pytest.mark.parametrize("fault", list(TRACE_FAULTS))
def test_faults_while_tracing_are_clear_errors(fault, method):
    error, match, f = TRACE_FAULTS[fault]
    with pytest.raises(error, match=match) as info:
        solve(f, np.ones(1), [0.0, 1.0], np.ones(1), method=method)
    if not isinstance(info.value, (ModelTraceError, NotImplementedError)):
        # the user's own exception keeps its type; the note says where it came from
        assert any("raised while tracing f(y, t, p) with y float64[1]" in note
                   for note in getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("kind", ["jump_fn", "save_fn"])
def test_faults_in_the_other_user_functions_name_them(kind):
    kwargs = {kind: _user_bug}
    if kind == "jump_fn":
        kwargs["tstops"] = [0.5]
    with pytest.raises(RuntimeError) as info:
        solve(lambda y, t, p: -y, np.ones(1), [0.0, 1.0], method="tsit5", **kwargs)
    assert any(f"while tracing {kind}(y, t, p)" in n for n in info.value.__notes__)
