"""Products with a block of one array (a neural network's weights in ``p``) print as loops.

Above ``DOT_ARRAY_THRESHOLD`` multiply-adds, a ``dot_general`` one of whose operands is a block of
one C++ array at affine indices (``p`` in any layout: ``W @ h``, ``h @ W``, ``W.T @ h``, batched;
or an earlier loop's result) reads the array in a C++ loop instead of printing one statement per
term, so the source grows with the network's width, not with its number of weights. The loop adds
in the scalarised path's order: both must give the same bits, on both sides of the threshold, in
double and float, through dual numbers and in the SIMD lanes.
"""

import ctypes

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_codegen import assert_compiles_for_the_device

from shoal import _jit
from shoal.ode import solve
from shoal.ode._codegen import contractions, generate_model
from shoal.ode._codegen.contractions import DOT_ARRAY_THRESHOLD

jax.config.update("jax_enable_x64", True)

_HARNESS = """
#define SHOAL_TEST_EXPORT extern "C" __attribute__((visibility("default"), used))
SHOAL_TEST_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;
SHOAL_TEST_EXPORT void eval(const T_SCALAR* y, T_SCALAR t, const T_SCALAR* p, T_SCALAR* dy) {
  shoal_generated::Model::rhs<T_SCALAR>(y, t, p, dy);
}
"""


class CompiledModel:
    """``f`` printed by the code generator, compiled alone, callable on NumPy inputs."""

    def __init__(self, f, n_vars, n_params, dtype):
        self.dtype, self.n_vars = np.dtype(dtype), n_vars
        self.model = generate_model(f, n_vars, n_params, self.dtype)
        scalar = "double" if self.dtype == np.float64 else "float"
        self.ctype = ctypes.c_double if self.dtype == np.float64 else ctypes.c_float
        lib = ctypes.CDLL(str(_jit.compile_library(
            self.model.source + _HARNESS.replace("T_SCALAR", scalar))))
        self.fn = lib.eval

    def __call__(self, y, t, p):
        ptr = ctypes.POINTER(self.ctype)
        y = np.ascontiguousarray(y, dtype=self.dtype)
        p = np.ascontiguousarray(p, dtype=self.dtype)
        dy = np.full(self.n_vars, np.nan, dtype=self.dtype)
        self.fn(y.ctypes.data_as(ptr), self.ctype(t), p.ctypes.data_as(ptr),
                dy.ctypes.data_as(ptr))
        return dy

_RNG = np.random.default_rng(20261202)


def _mlp(width):
    """f(y, t, p) of an MLP 2-width-width-2 (tanh) whose weights are p, and a p for it."""
    shapes = [(width, 2), (width,), (width, width), (width,), (2, width)]

    def unpack(p):
        out, k = [], 0
        for s in shapes:
            n = int(np.prod(s))
            out.append(p[k:k + n].reshape(s))
            k += n
        return out

    def f(y, t, p):
        w1, b1, w2, b2, w3 = unpack(p)
        h = jnp.tanh(w1 @ y + b1)
        h = jnp.tanh(w2 @ h + b2)
        return w3 @ h

    n = sum(int(np.prod(s)) for s in shapes)
    return f, _RNG.normal(size=n) / np.sqrt(width)


def _loops(source: str) -> int:
    return source.count("for (int j = 1;")


def _unrolled_bits(f, n_vars, p, y, dtype, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(contractions, "DOT_ARRAY_THRESHOLD", 10**9)
        model = CompiledModel(f, n_vars, p.size, dtype)
        assert _loops(model.model.source) == 0
        return model(y, 0.3, p)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mlp_loop_gives_the_unrolled_bits_and_jax_values(dtype, monkeypatch):
    f, p = _mlp(40)
    y = np.array([0.4, -1.1])
    model = CompiledModel(f, 2, p.size, dtype)
    assert _loops(model.model.source) == 1  # w2 (1 600 terms); w1 and w3 (80) stay unrolled
    got = model(y, 0.3, p)
    assert got.tobytes() == _unrolled_bits(f, 2, p, y, dtype, monkeypatch).tobytes()
    want = np.asarray(f(jnp.asarray(y, dtype), 0.3, jnp.asarray(p, dtype)))
    np.testing.assert_allclose(got, want, rtol=1e-13 if dtype == np.float64 else 1e-5)


def test_source_grows_with_width_not_with_weights():
    lines = {w: generate_model(_mlp(w)[0], 2, _mlp(w)[1].size, np.float64).source.count("\n")
             for w in (32, 128)}
    # 16x the weights (1 024 -> 16 384 in the middle layer), 4x the width: the source ~4x.
    assert lines[128] < 5 * lines[32]
    assert lines[128] < 2000


# Each layout of a weight block in p, and the other operand: (f, n_vars, n_params). The first
# sits exactly on the threshold (scalarised), every other one above it.
_SIDE = 8
_ABOVE = DOT_ARRAY_THRESHOLD // _SIDE + 1


def _w(p, rows, cols, start=0):
    return p[start:start + rows * cols].reshape(rows, cols)


LAYOUTS = {
    "on_threshold": (lambda y, t, p: _w(p, DOT_ARRAY_THRESHOLD // _SIDE, _SIDE) @ y, _SIDE,
                     DOT_ARRAY_THRESHOLD),
    "matvec": (lambda y, t, p: _w(p, _ABOVE, _SIDE) @ y, _SIDE, _ABOVE * _SIDE),
    "vecmat": (lambda y, t, p: y @ _w(p, _SIDE, _ABOVE, start=3), _SIDE, _ABOVE * _SIDE + 3),
    "transposed": (lambda y, t, p: _w(p, _SIDE, _ABOVE).T @ jnp.sin(y), _SIDE, _ABOVE * _SIDE),
    "matmat": (lambda y, t, p: (_w(p, _ABOVE, 4) @ y.reshape(4, 2)).ravel()[:_SIDE], _SIDE,
               _ABOVE * 4),
    "batched": (lambda y, t, p: jnp.einsum("bij,bj->bi", p[:2 * _ABOVE * 4].reshape(2, _ABOVE, 4),
                                           y.reshape(2, 4)).ravel()[:_SIDE], _SIDE,
                2 * _ABOVE * 4),
    # A block computed by an elementwise loop (stoichiometry = products - reactants).
    "computed": (lambda y, t, p: (p[:_ABOVE * _SIDE] - 2.0 * p[_ABOVE * _SIDE:])
                 .reshape(_SIDE, _ABOVE) @ jnp.cos(jnp.tile(y, 3)[:_ABOVE]),
                 _SIDE, 2 * _ABOVE * _SIDE),
    # Fewer rows than one block of sums (contractions.ROW_BLOCK): only the one-row loop.
    # "matvec" (17 rows) takes blocks and one leftover row, _mlp's 40 rows only blocks.
    "few_rows": (lambda y, t, p: jnp.concatenate([_w(p, 5, 30) @ jnp.tile(y, 4)[:30], y[:3]]),
                 _SIDE, 150),
    # Not affine in p (a permutation): scalarised, still right.
    "permuted": (lambda y, t, p: p[np.argsort(np.cos(np.arange(_ABOVE * _SIDE)))]
                 .reshape(_ABOVE, _SIDE) @ y, _SIDE, _ABOVE * _SIDE),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_layouts(layout, monkeypatch):
    assert _ABOVE % contractions.ROW_BLOCK and 5 < contractions.ROW_BLOCK <= _ABOVE
    f, n_vars, n_params = LAYOUTS[layout]
    p = _RNG.normal(size=n_params)
    y = _RNG.normal(size=n_vars)
    model = CompiledModel(lambda y, t, p: f(y, t, p)[:n_vars], n_vars, n_params, np.float64)
    expect_loop = layout not in ("on_threshold", "permuted")
    assert (_loops(model.model.source) > 0) == expect_loop
    got = model(y, 0.3, p)
    want = np.asarray(f(jnp.asarray(y), 0.3, jnp.asarray(p)))[:n_vars]
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
    unrolled = _unrolled_bits(lambda y, t, p: f(y, t, p)[:n_vars], n_vars, p, y, np.float64,
                              monkeypatch)
    assert got.tobytes() == unrolled.tobytes()


def _shared_mlp(width):
    f, flat = _mlp(width)
    return (lambda y, t, p: f(y, t, p["w"])), {"w": jnp.asarray(flat)}


def test_neural_ode_in_the_lanes_is_bit_identical_and_right():
    f, params = _shared_mlp(24)  # 576 terms in the middle layer: the loop
    model = generate_model(lambda y, t, p: f(y, t, {"w": p}), 2, params["w"].size, np.float64)
    assert _loops(model.source) == 1 and model.lane_arithmetic
    y0 = _RNG.normal(size=(13, 2))
    ts = jnp.linspace(0.0, 1.0, 5)

    def run(lanes, method="tsit5"):
        return solve(f, y0, ts, params, method=method, rtol=1e-10, atol=1e-12, lanes=lanes)

    for method in ("tsit5", "rodas5p"):
        scalar = np.asarray(run(1, method))
        for lanes in (0, 4):
            assert np.asarray(run(lanes, method)).tobytes() == scalar.tobytes()
    # Against SciPy on one member.
    from scipy.integrate import solve_ivp
    ref = solve_ivp(lambda t, y: np.asarray(f(jnp.asarray(y), t, params)), (0.0, 1.0), y0[3],
                    t_eval=np.asarray(ts), method="DOP853", rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(np.asarray(run(0))[3], ref.y.T, rtol=1e-7, atol=1e-9)


def test_directional_derivative_through_the_loop():
    """jax.jvp along the weights (dual numbers through the loop) against central differences."""
    f, params = _shared_mlp(24)
    y0 = jnp.asarray(_RNG.normal(size=(3, 2)))
    ts = jnp.linspace(0.0, 0.5, 3)
    direction = {"w": jnp.asarray(_RNG.normal(size=params["w"].size))}

    def out(prm):
        return solve(f, y0, ts, prm, method="tsit5", rtol=1e-11, atol=1e-12)

    _, tangent = jax.jvp(out, (params,), (direction,))
    eps = 1e-5
    plus = out({"w": params["w"] + eps * direction["w"]})
    minus = out({"w": params["w"] - eps * direction["w"]})
    np.testing.assert_allclose(tangent, (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-7)


def _kinetics(y, t, p):
    """Rates from the columns of a parameter table (strided reads in elementwise loops) mixed by
    a parameter matrix (a loop over its block)."""
    w = p["w"]
    rates = w[:, 0] * jnp.exp(-w[:, 1] / (1.0 + y**2))
    return p["s"] @ rates - w[:, 2] * y


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_kinetics_with_parameter_tables_in_the_lanes(method):
    n = 32
    params = {"w": jnp.asarray(_RNG.uniform(0.5, 1.5, (n, 3))),
              "s": jnp.asarray(_RNG.normal(size=(n, n)) / n)}
    model = generate_model(lambda y, t, p: _kinetics(y, t, {"w": p[:3 * n].reshape(n, 3),
                                                           "s": p[3 * n:].reshape(n, n)}),
                           n, 3 * n + n * n, np.float64)
    assert model.lane_arithmetic and "p[1 + i * 3]" in model.source
    assert "for (int j = 1;" in model.source
    # Its Jacobian sweeps read the parameters in place (ad/param_reads.hpp), not a dual copy.
    assert "static constexpr bool params_in_place = true;" in model.source
    y0 = _RNG.normal(size=(9, n))
    ts = jnp.linspace(0.0, 2.0, 4)

    def run(lanes):
        return np.asarray(solve(_kinetics, y0, ts, params, method=method, rtol=1e-10,
                                atol=1e-12, lanes=lanes))

    scalar = run(1)
    for lanes in (0, 4):
        assert run(lanes).tobytes() == scalar.tobytes()
    from scipy.integrate import solve_ivp
    ref = solve_ivp(lambda t, y: np.asarray(_kinetics(jnp.asarray(y), t, params)), (0.0, 2.0),
                    y0[5], t_eval=np.asarray(ts), method="DOP853", rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(scalar[5], ref.y.T, rtol=1e-7, atol=1e-9)


def _shared_layout(n_params: int, dtype=np.float64):
    """A bare array ``(n_params,)`` shared by the ensemble (as a params leaf without the
    ensemble axis is)."""
    from shoal.ode._params import LeafSlot, ParamLayout

    treedef = jax.tree_util.tree_structure(0)
    return ParamLayout(treedef, (LeafSlot((n_params,), np.dtype(dtype), False, 0),), 0, n_params)


def test_shared_weights_are_read_as_scalars_in_the_lanes_only_where_shared():
    """A block of shared parameters gets the scalar-row branch (lane_traits.hpp:
    shared_param_row) beside the lanes' own copy; per-trajectory weights do not, and the model
    still runs in the lanes."""
    f, flat = _mlp(24)
    shared = generate_model(f, 2, _shared_layout(flat.size), np.float64)
    own = generate_model(f, 2, flat.size, np.float64)
    assert shared.lane_arithmetic and own.lane_arithmetic
    assert shared.source.count("shoal::shared_param_row<Model, T>()") == 1
    assert _loops(shared.source) == 2  # the scalar-row loop and the lanes' one
    assert "shared_param_row" not in own.source and _loops(own.source) == 1
    # Row-relative indices: the middle layer starts at 24 * 2 + 24 in p, and in the row.
    assert "T(ps[72 + i * 24])" in shared.source and "p[72 + i * 24]" in shared.source


def test_shared_weights_compile_for_the_device():
    """The scalar-row branch (null on the device) compiles under NVRTC; without sensitivities,
    which for 720 shared weights would be 720 columns."""
    f, flat = _mlp(24)
    model = generate_model(f, 2, _shared_layout(flat.size), np.float64)
    assert_compiles_for_the_device(model, sensitivities=False)


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_lanes_over_several_rows_of_shared_weights_are_bit_identical(method):
    """vmap over three networks makes three rows of shared weights, each serving 7 consecutive
    trajectories: lane groups of 4 or of the host's width hold one row, then two rows at a row's
    end (where the lanes read their own copies), then one again. Every byte equals the scalar
    path's, and each network's trajectories equal a solve of that network alone."""
    f, params = _shared_mlp(24)
    batched = {"w": jnp.stack([params["w"], 1.3 * params["w"], -0.7 * params["w"]])}
    y0 = jnp.asarray(_RNG.normal(size=(7, 2)))
    ts = jnp.linspace(0.0, 1.0, 5)

    def run(lanes):
        def one(prm):
            return solve(f, y0, ts, prm, method=method, rtol=1e-9, atol=1e-11, lanes=lanes)
        return np.asarray(jax.vmap(one)(batched))

    scalar = run(1)
    for lanes in (0, 4):
        assert run(lanes).tobytes() == scalar.tobytes(), lanes
    alone = np.asarray(solve(f, y0, ts, {"w": batched["w"][1]}, method=method, rtol=1e-9,
                             atol=1e-11, lanes=1))
    assert scalar[1].tobytes() == alone.tobytes()
