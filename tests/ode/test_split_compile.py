"""Dual-number evaluations compiled apart (``SHOAL_SPLIT_COMPILE``): faster compiles, same bits.

A host library whose model is large enough compiles its evaluations on dual numbers (Jacobian
sweeps, a joint system's second-order sweeps, sensitivity columns) in translation units of their
own, beside the steppers (include/shoal/ad/evaluations_apart.hpp, shoal/ode/_build.py). These
tests hold split and whole builds to the same bytes for each kind of library that has such
evaluations, check that each split build really holds its units' functions, that the automatic
choice follows its size threshold on both sides, and that a unit left out fails the build loudly.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal import _jit
from shoal.ode import _build, solve

from ode_problems import lorenz
from stiff_problems import robertson

jax.config.update("jax_enable_x64", True)

UNIT_SYMBOL = "apply_reading_in_unit{}"


@pytest.fixture
def split_as(monkeypatch):
    """``split_as(setting, run)``: ``run()`` with ``SHOAL_SPLIT_COMPILE=setting``;
    ``split_as.units[setting]`` maps each library path built to its evaluation units."""
    units = {}

    def call(setting, run):
        host_library = _build._host_library

        def recording(build, optimization):
            path = host_library(build, optimization)
            units.setdefault(setting, {})[path] = _build.evaluation_units(build)
            return path

        with monkeypatch.context() as mp:
            mp.setenv("SHOAL_SPLIT_COMPILE", setting)
            mp.setattr(_build, "_host_library", recording)
            host_library.cache_clear()  # its key does not hold the setting
            jax.clear_caches()
            out = jax.tree_util.tree_map(np.asarray, run())
        host_library.cache_clear()
        jax.clear_caches()
        return out

    call.units = units
    return call


def assert_split_gives_the_same_bits(split_as, run, expected_units):
    """run() whole and split: the same bytes, from different libraries, the split ones holding
    exactly the functions of ``expected_units`` (one set per library)."""
    whole, split = split_as("0", run), split_as("1", run)
    for got, want in zip(jax.tree_util.tree_leaves(split), jax.tree_util.tree_leaves(whole),
                         strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    assert set(split_as.units["0"].values()) == {()}
    assert not set(split_as.units["0"]) & {p for p, units in split_as.units["1"].items() if units}
    assert sorted(set(split_as.units["1"].values())) == sorted(expected_units)
    for path, units in split_as.units["1"].items():
        binary = open(path, "rb").read()
        for unit in (1, 2, 3):
            assert (UNIT_SYMBOL.format(unit).encode() in binary) == (unit in units), (path, unit)
    for path in split_as.units["0"]:
        assert b"apply_reading_in_unit" not in open(path, "rb").read()


K = np.array([0.04, 3e7, 1e4]) * np.linspace(0.95, 1.05, 11)[:, None]
T_SPAN = np.array([0.0, 1e-3, 1.0, 1e2, 1e4])
Y0 = jnp.array([1.0, 0.0, 0.0])


@pytest.mark.parametrize("sparsity", [None, "auto"])
def test_rosenbrock_jacobian_sweeps_scalar_and_lanes(split_as, sparsity):
    def run():
        return [solve(robertson, Y0, T_SPAN, K, rtol=1e-8, atol=1e-12, sparsity=sparsity,
                      lanes=lanes) for lanes in (1, 0)]

    assert_split_gives_the_same_bits(split_as, run, [(1,)])


def test_joint_rosenbrock_systems_use_all_three_units(split_as):
    """Forward sensitivities (jacfwd) and a JVP along given directions: Jacobian sweeps,
    second-order sweeps and columns."""
    def final(k):
        return solve(robertson, Y0, T_SPAN, k, rtol=1e-8, atol=1e-12)[:, -1]

    def run():
        k = jnp.asarray(K)
        _, tangent = jax.jvp(lambda k: final(k).sum(), (k,), (jnp.ones_like(k),))
        return jax.jacfwd(lambda k: final(k).sum(0))(k), tangent

    assert_split_gives_the_same_bits(split_as, run, [(1, 2, 3)])


def test_adjoint_gradient_of_a_rosenbrock_solve(split_as):
    def run():
        return jax.grad(lambda k: solve(robertson, Y0, T_SPAN, k, rtol=1e-8, atol=1e-12,
                                        adjoint=True)[:, -1, 0].sum())(jnp.asarray(K))

    assert_split_gives_the_same_bits(split_as, run, [(1,)])


def test_explicit_method_columns_only(split_as):
    """Tsit5's forward solve has no dual-number evaluation, so it is never split; its joint
    system's columns are unit 3."""
    p = np.stack([np.full(9, 10.0), np.linspace(0.0, 28.0, 9), np.full(9, 8 / 3)], 1)
    t_span = np.linspace(0.0, 1.0, 5)

    def final(p):
        return solve(lorenz, jnp.ones(3), t_span, p, method="tsit5", rtol=1e-8, atol=1e-8)[:, -1]

    def run():
        return final(jnp.asarray(p)), jax.jacfwd(lambda p: final(p).sum(0))(jnp.asarray(p))

    assert_split_gives_the_same_bits(split_as, run, [(), (3,)])


def chain(y, t, p):
    """A 24-species cascade with Arrhenius-like rates: over 100 lines of generated C++."""
    rates = p[0] * jnp.exp(-p[1] / (1.0 + 0.1 * jnp.arange(24.0) + t)) * y
    inflow = jnp.concatenate([jnp.array([p[2]]), rates[:-1]])
    return inflow - rates - 0.01 * y ** 2


def test_automatic_choice_splits_a_large_model_with_the_same_bits(split_as):
    p = jnp.array([2.0, 0.5, 1.0]) * jnp.linspace(0.9, 1.1, 3)[:, None]

    def run():
        return solve(chain, jnp.ones(24), jnp.array([0.0, 0.5, 2.0]), p, rtol=1e-8, atol=1e-10,
                     sparsity="dense")

    whole, auto = split_as("0", run), split_as("auto", run)
    assert auto.tobytes() == whole.tobytes()
    assert set(split_as.units["auto"].values()) == {(1,)}


def _build_of(f, n_vars, n_params, method="rodas5p", joint=False):
    from shoal.ode import _codegen
    from shoal.ode._kernel_source import Variant
    from shoal.ode._options import LuPrecision, Method, Ordering

    model = _codegen.generate_model(f, n_vars, n_params, jnp.float64)
    sens = (False, True) if joint else None
    variant = Variant.of(Method(method), LuPrecision.FP64, None, Ordering.AMD, sens=sens)
    return _build.ModelBuild(model, variant)


def test_threshold_both_sides_and_the_settings(monkeypatch):
    build = _build_of(chain, 24, 3)
    lines = _build.model_lines(build.model)
    assert lines >= _build.EVALUATIONS_APART_MIN_LINES  # the model above is split by default
    monkeypatch.setattr(_build, "EVALUATIONS_APART_MIN_LINES", lines)
    monkeypatch.setattr(_build, "usable_cpus", lambda: 2)
    monkeypatch.delenv("SHOAL_SPLIT_COMPILE", raising=False)
    assert _build.evaluation_units(build) == (1,)
    monkeypatch.setattr(_build, "EVALUATIONS_APART_MIN_LINES", lines + 1)
    assert _build.evaluation_units(build) == ()
    monkeypatch.setenv("SHOAL_SPLIT_COMPILE", "1")
    assert _build.evaluation_units(build) == (1,)
    assert _build.evaluation_units(_build_of(chain, 24, 3, joint=True)) == (1, 2, 3)
    assert _build.evaluation_units(_build_of(chain, 24, 3, "tsit5", joint=True)) == (3,)
    assert _build.evaluation_units(_build_of(chain, 24, 3, "tsit5")) == ()
    monkeypatch.setenv("SHOAL_SPLIT_COMPILE", "auto")
    monkeypatch.setattr(_build, "EVALUATIONS_APART_MIN_LINES", lines)
    monkeypatch.setattr(_build, "usable_cpus", lambda: 1)
    assert _build.evaluation_units(build) == ()  # one CPU: nothing to run beside
    monkeypatch.setenv("SHOAL_SPLIT_COMPILE", "0")
    monkeypatch.setattr(_build, "usable_cpus", lambda: 2)
    assert _build.evaluation_units(build) == ()
    monkeypatch.setenv("SHOAL_SPLIT_COMPILE", "yes")
    with pytest.raises(ValueError, match="SHOAL_SPLIT_COMPILE must be auto, 1 or 0, got 'yes'"):
        _build.evaluation_units(build)


def test_a_unit_left_out_fails_the_link_naming_its_function(monkeypatch):
    """The joint Rosenbrock system needs units 1, 2 and 3; built with unit 1 only, the link
    (-z defs) stops with the missing functions named. (A model of its own: no cache entry of a
    good build can stand in; a failed build leaves none.)"""
    def kinetics(y, t, p):
        return jnp.stack([-p[0] * y[0] + 0.5 * y[1], p[0] * y[0] - 0.5 * y[1] - y[1] ** 2])

    monkeypatch.setattr(_build, "evaluation_units",
                        lambda build: (1,) if build.variant.joint else ())
    _build._host_library.cache_clear()
    jax.clear_caches()
    try:
        with pytest.raises(_jit.CompileError, match="apply_reading_in_unit2"):
            jax.jacfwd(lambda k: solve(kinetics, jnp.ones(2), T_SPAN, k)[-1].sum())(
                jnp.array([0.7]))
    finally:
        _build._host_library.cache_clear()
        jax.clear_caches()


def test_a_failing_unit_stops_the_others_at_once(tmp_path, monkeypatch):
    """One unit's compiler fails while the main unit's would run a minute: the build raises the
    failure within seconds and the main unit's compiler (a child holding the pipes, as cc1plus
    does under the driver) is killed, not waited for."""
    import os
    import textwrap
    import time

    sleeper = tmp_path / "sleeper.pid"
    cxx = tmp_path / "cxx"
    cxx.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in
          *SHOAL_EVALUATIONS_PART=1*) sleep 0.5; echo 'unit 1: error: broken' >&2; exit 1 ;;
        esac
        sleep 60 & echo $! > {sleeper}; wait
        """))
    cxx.chmod(0o755)
    monkeypatch.setattr(_jit, "find_compiler", lambda: (str(cxx), "fake"))
    monkeypatch.setattr(_jit, "uses_precompiled_prelude", lambda: False)
    monkeypatch.setattr(_jit, "compiler_flags", lambda optimization=None: ("-O1",))
    src = tmp_path / "model.cc"
    src.write_text("// a generated library\n")
    start = time.perf_counter()
    with pytest.raises(_jit.CompileError, match="exit status 1") as info:
        _jit._build_library(src, tmp_path / "model.so", "-O1", evaluation_units=(1,))
    assert time.perf_counter() - start < 20
    assert "unit 1: error: broken" in str(info.value)
    pid = int(sleeper.read_text())
    for _ in range(50):  # the killed group's sleep is reaped by init shortly
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the main unit's compiler (pid {pid}) is still running")
    assert not list(tmp_path.glob("*.o"))
