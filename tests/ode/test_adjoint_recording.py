"""A gradient by the adjoint solves forward once (shoal/ode/_adjoint.py: ``record``): the value's
solve writes each trajectory's recording to a row of bytes, and the adjoint sweeps back from it
instead of solving forward again, except where a row was too small for it.

The gradients must be the same bits either way (tests/cpp/test_recording_row.cc checks the
kernels; here the whole path: the FFI targets, the rows carried through the directional
primitive, vmap and jacrev), and a row must serve only where it holds its trajectory.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Event, _adjoint, solve

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def budget(monkeypatch):
    """Sets the recording budget (total bytes, and a row's most); solve's own jit caches do not
    see it, so JAX's caches are cleared on both sides."""
    def set_budget(total, row_max=_adjoint.RECORDING_ROW_MAX):
        monkeypatch.setattr(_adjoint, "RECORDING_BYTES", total)
        monkeypatch.setattr(_adjoint, "RECORDING_ROW_MAX", row_max)
        jax.clear_caches()
    yield set_budget
    jax.clear_caches()


@pytest.fixture
def solved_again(monkeypatch):
    """The trajectories each adjoint call solved forward again (its step counts: 0 where it
    swept back from a row), one array per call."""
    calls = []
    bind = _adjoint.adjoint_p.bind

    def counting(*args, **kwargs):
        out = bind(*args, **kwargs)
        jax.debug.callback(lambda accepted: calls.append(np.asarray(accepted) > 0), out[1])
        return out

    monkeypatch.setattr(_adjoint.adjoint_p, "bind", counting)
    return calls


def _dosed(y, t, p):
    return jnp.array([-p["ka"] * y[0], p["ka"] * y[0] - p["ke"] * y[1] ** 2])


def _dosed_problem(n=11, failing=True):
    """Doses at stops (jumps), a save_fn, a terminal event, one member that blows up (NaN), own
    and shared leaves: everything a row carries besides the steps."""
    ka = jnp.linspace(0.6, 1.6, n)
    if failing:
        ka = ka.at[7].set(-40.0)  # member 7: y0 grows like e^{40 t}
    params = {"ka": ka, "ke": jnp.array(0.3), "dose": jnp.array(0.5), "scale": jnp.array(2.0)}
    y0 = jnp.stack([jnp.linspace(0.5, 1.5, n), jnp.zeros(n)], axis=1)
    return params, y0


def _dosed_loss(method, lanes, **options):
    axes = {"ka": 0, "ke": None, "dose": None, "scale": None}
    ts = jnp.array([0.0, 0.5, 1.0, 2.0, 3.0])
    event = Event(lambda y, t, p: y[1] - 0.45, terminal=True, direction=1)

    def loss(params, y0):
        ys, stats = solve(_dosed, y0, ts, params, params_axes=axes, tstops=jnp.array([0.7, 1.4]),
                          jump_fn=lambda y, t, p: y.at[0].add(p["dose"]),
                          save_fn=lambda y, t, p: jnp.array([y[1] * p["scale"], y[0] * y[1]]),
                          event=event, method=method, rtol=1e-8, atol=1e-8, max_steps=400,
                          lanes=lanes, adjoint=True, return_stats=True, **options)
        ys = jnp.where(jnp.isnan(ys), 0.0, ys)
        return jnp.sum(ys * jnp.arange(1.0, 3.0)) + jnp.sum(
            jnp.where(jnp.isnan(stats["event_time"]), 0.0, stats["event_time"]))
    return loss


def _assert_same_bits(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("method", ("tsit5", "rodas5p"))
@pytest.mark.parametrize("lanes", (1, 8))
def test_sweeping_back_from_the_rows_gives_the_bits_of_solving_again(method, lanes, budget,
                                                                    solved_again):
    params, y0 = _dosed_problem()
    loss = _dosed_loss(method, lanes)
    value, recorded = jax.value_and_grad(loss, (0, 1))(params, y0)
    # Every trajectory swept back from its row, the one that fails as well (its status travels
    # in the row): none was solved again.
    assert len(solved_again) == 1 and not solved_again[0].any()
    budget(0)
    plain_value, again = jax.value_and_grad(loss, (0, 1))(params, y0)
    assert len(solved_again) == 2 and solved_again[1][np.arange(11) != 7].all()
    assert value == plain_value  # the value's solve is the plain solve's, bit for bit
    _assert_same_bits(recorded, again)
    assert np.isnan(recorded[0]["ka"][7]) and np.isfinite(recorded[0]["ka"][:7]).all()


@pytest.mark.parametrize("method", ("tsit5", "rodas5p"))
@pytest.mark.parametrize("lanes", (1, 8))
def test_checkpoints_thinned_to_the_least_give_the_bits_of_every_state(method, lanes, budget,
                                                                       solved_again):
    # adjoint_memory=1: two checkpoints kept, every other step taken again on the way back
    # (tests/cpp/test_adjoint_checkpoints.cc checks the thinning itself); through the rows and
    # solving forward again, across jumps, an event and a failing member.
    params, y0 = _dosed_problem()
    want = jax.value_and_grad(_dosed_loss(method, lanes), (0, 1))(params, y0)
    thinned = _dosed_loss(method, lanes, adjoint_memory=1)
    _assert_same_bits(jax.value_and_grad(thinned, (0, 1))(params, y0), want)
    assert not solved_again[1].any()  # swept back from its rows
    budget(0)
    _assert_same_bits(jax.value_and_grad(thinned, (0, 1))(params, y0), want)
    assert solved_again[2][np.arange(11) != 7].all()


@pytest.mark.parametrize("method", ("tsit5", "rodas5p"))
@pytest.mark.parametrize("adjoint_memory", (4 << 20, 1))  # every state kept; two checkpoints
def test_grad_jacrev_and_jacfwd_agree_on_both_sides_of_the_checkpoint_budget(method,
                                                                           adjoint_memory):
    # On the plain solve's steps (sens_error_control off, a given first step) the adjoint (grad,
    # jacrev), whether it kept every state or took the steps again from two checkpoints, agrees
    # with forward columns (jacfwd) to 1e-10: y0 differentiated and not, a per-member and a
    # shared leaf, stops where the stepper restarts.
    def f(y, t, p):
        return jnp.stack([-p["k"] * y[0] + p["c"] * y[1] * jnp.sin(t),
                          p["k"] * y[0] - p["c"] * y[1] + 0.1 * jnp.where(t > 1.3, 1.0, 0.0)])

    y0 = jnp.array([[1.0, 0.2], [0.6, 0.9], [1.4, 0.1]])
    k, c = jnp.array([0.7, 1.3, 2.1]), jnp.array(0.8)
    ts = jnp.array([0.0, 0.45, 1.6, 3.0])

    def saves(k, c, y0):
        return solve(f, y0, ts, {"k": k, "c": c}, params_axes={"k": 0, "c": None},
                     method=method, rtol=1e-8, atol=1e-10, sens_error_control=False,
                     first_step=1e-6, tstops=jnp.array([1.3, 2.2]), adjoint=True,
                     adjoint_memory=adjoint_memory)[:, 1:].ravel()

    for argnums in ((0,), (0, 1), (0, 1, 2)):
        reverse = jax.jacrev(saves, argnums)(k, c, y0)
        forward = jax.jacfwd(saves, argnums)(k, c, y0)
        grad = jax.grad(lambda *a: jnp.sum(saves(*a)), argnums)(k, c, y0)
        for r, fw, g in zip(reverse, forward, grad, strict=True):
            scale = float(jnp.max(jnp.abs(fw)))
            np.testing.assert_allclose(r, fw, rtol=1e-10, atol=1e-12 * scale)
            np.testing.assert_allclose(g, jnp.sum(fw, axis=0), rtol=1e-10, atol=1e-12 * scale)


def test_adjoint_memory_is_a_positive_number_of_bytes():
    def f(y, t, p):
        return -p * y

    for bad, error in ((0, ValueError), (-5, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="adjoint_memory"):
            solve(f, jnp.ones(1), jnp.linspace(0.0, 1.0, 3), 1.0, adjoint=True,
                  adjoint_memory=bad)


@pytest.mark.parametrize("lanes", (1, 4))
def test_a_trajectory_too_long_for_its_row_is_solved_again(lanes, budget, solved_again):
    # Member 2 is stiff for Tsit5 (k = 400: hundreds of steps, bound by stability), the others
    # take a few dozen: 8 KiB rows hold theirs and not member 2's.
    def decay(y, t, k):
        return -k * y

    k = jnp.array([[0.5], [1.0], [400.0], [2.0], [1.5]])
    y0 = jnp.ones((5, 1))
    ts = jnp.linspace(0.0, 2.0, 5)

    def loss(k):
        ys = solve(decay, y0, ts, k, method="tsit5", rtol=1e-8, atol=1e-8, lanes=lanes,
                   adjoint=True)
        return jnp.sum(ys[:, 1:] ** 2)

    budget(1 << 20, row_max=8 << 10)
    assert _adjoint.recording_row_bytes(5) == 8 << 10
    recorded = jax.grad(loss)(k)
    np.testing.assert_array_equal(solved_again[0], [False, False, True, False, False])
    budget(0)
    _assert_same_bits(recorded, jax.grad(loss)(k))
    # y = e^{-k t}: d/dk sum y(t)^2 = sum -2 t e^{-2 k t}
    t = np.asarray(ts[1:])
    want = [np.sum(-2 * t * np.exp(-2 * float(kk) * t)) for kk in k[:, 0]]
    np.testing.assert_allclose(recorded[:, 0], want, rtol=1e-6, atol=1e-9)


def test_vmap_of_grad_and_jacrev_give_the_bits_of_solving_again(budget, solved_again):
    params, y0 = _dosed_problem(5, failing=False)
    loss = _dosed_loss("tsit5", 0)
    batch = jnp.stack([y0, 1.3 * y0])

    def per_member(params, y0):
        return jax.vmap(lambda y: loss(params, y[None]))(y0)

    vmapped = jax.vmap(jax.grad(loss), (None, 0))(params, batch)
    assert solved_again and not any(c.any() for c in solved_again)  # swept back from its rows
    seen = len(solved_again)
    jacobians = jax.jacrev(per_member, (0, 1))(params, y0)
    # jacrev's five cotangents solve forward again: one recording is not copied for each.
    assert len(solved_again) > seen and all(c.all() for c in solved_again[seen:])
    recorded = (vmapped, jacobians)
    budget(0)
    again = (jax.vmap(jax.grad(loss), (None, 0))(params, batch),
             jax.jacrev(per_member, (0, 1))(params, y0))
    _assert_same_bits(recorded, again)


def test_the_rows_share_a_budget_within_the_memory_available():
    mib = 1 << 20
    total, row_max, row_min = (_adjoint.RECORDING_BYTES, _adjoint.RECORDING_ROW_MAX,
                               _adjoint.RECORDING_ROW_MIN)
    assert total // 1000 < row_max
    plenty = 1 << 40
    assert _adjoint.recording_row_bytes(1, plenty) == row_max  # one trajectory: a row's most
    assert _adjoint.recording_row_bytes(1000, plenty) == total // 1000 // 64 * 64
    assert _adjoint.recording_row_bytes(10 ** 9, plenty) == 0  # rows below the least: none
    # A quarter of the memory available at most.
    assert _adjoint.recording_row_bytes(1000, 40 * mib) == 10 * mib // 1000 // 64 * 64
    assert _adjoint.recording_row_bytes(1000, 4 * row_min * 1000 - 1) == 0
    for n in (1, 7, 1000, 12345):
        assert _adjoint.recording_row_bytes(n, plenty) % 64 == 0


def test_where_the_memory_available_is_not_known_the_budget_is_the_whole(monkeypatch):
    monkeypatch.setattr(_adjoint._memory, "available_bytes", lambda: None)
    assert _adjoint.recording_row_bytes(1000) == _adjoint.RECORDING_BYTES // 1000 // 64 * 64
