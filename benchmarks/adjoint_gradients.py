"""Gradients by the adjoint (``adjoint=True``) against forward sensitivities and diffrax, same run.

Eight cases on the CPU:
  table   a 2 000-entry shared table read by ``jnp.interp`` in f (N = 64 trajectories, 8 saves,
          stops at the knots, as the README asks for adjoint gradients of such entries):
          ``value_and_grad`` with respect to the table, adjoint against the value alone and
          against forward sensitivities (a column per entry; only with ``--forward``, minutes).
  stiff   a 20-species mass-action network with m = 10..100 rate constants (Rodas5P, N = 64,
          rtol 1e-8): ``value_and_grad`` with respect to the rates, adjoint against forward
          sensitivities, and the gradient errors against rtol 1e-11.
  crossover  m shared smooth parameters of a 4-variable model (N = 256, rtol 1e-8), m = 2..64:
          ``value_and_grad`` by the adjoint and by forward sensitivities, the ratio that sets
          ``adjoint="auto"``'s threshold (_adjoint.AUTO_ENTRIES).
  neural  diffrax's neural-ODE example (neural_ode.py's network),
          an MLP 2-64-64-2 with tanh, its 4 480 weights shared by
          N = 1 000 trajectories, 20 saves on [0, 1], loss the mean square of the saves:
          ``value_and_grad`` by shoal's adjoint, against the value alone and against diffrax's
          default (RecursiveCheckpointAdjoint) at the same tolerances.
  forced  the neural case's field times a 200-entry forcing table read by ``jnp.interp``
          (shared by the ensemble with the weights): the same three times.
  observed  gradients through observables (a ``save_fn``): the stiff network (25 rates)
          observing three species against a scale that is a rate, and the neural ODE observing
          a function of its state (diffrax on the same loss).
  boltzmann  the DISCO-EB-sized model of _boltzmann_like.py (72 variables, Rodas5P), 3 modes
          k in {1e-3, 1e-2, 1e-1}/Mpc, its three splines' 4 596 coefficients passed as shared
          parameters: ``value_and_grad`` of the modes' summed final density contrast with
          respect to the coefficients, dense and sparse, rtol 1e-4 and 1e-8, against the value;
          checked by a forward-mode directional derivative (one column) along a smooth
          direction: the coefficients of splines of smooth perturbations on the same knots,
          what a parameter that builds the tables contributes through the chain rule. (Along a
          random direction the gradient, per entry, is only as resolved as the steps that
          sample each knot interval: README, "Reverse mode by adjoint", Accuracy.)
  checkpoints  Lorenz-96 (40 variables, Tsit5, N = 64, t in [0, 20], rtol 1e-8: about 2 000
          steps a trajectory) with ``adjoint_memory`` from the default (every state kept) down
          to 8 KiB (a state every 128 steps, the steps between taken again on the way back):
          ``value_and_grad`` time and the states kept per recording; the gradients are checked
          to be the same bits.
The table and network cases also time the adjoint solving each trajectory forward again
instead of sweeping back from the value's recording (as before it recorded; the same gradient
bits). Each gradient's error is measured against a reference gradient at rtol 1e-11 (shoal's
adjoint; for the network, checked against diffrax at the same tolerance). Times are the best of
``--repeats`` warm calls; first calls (tracing and compiling into an empty cache) are printed.

    PYTHONPATH=. .venv/bin/python benchmarks/adjoint_gradients.py [--cases table,neural,boltzmann]
        [--forward] [--repeats 3] [--n 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from _common import best_of, header_lines
from neural_ode import field, make_params

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)



def best_without_recording(fn, arg, repeats):
    """best_of ``fn(arg)`` (a function to jit) compiled with the value's recording off
    (_adjoint.RECORDING_BYTES = 0): the adjoint solves each trajectory forward again, as it did
    before the value's solve recorded for it. JAX's caches are cleared on both sides of the
    compile, since solve's own jit does not see the setting. Returns (time, result)."""
    from shoal.ode import _adjoint

    kept = _adjoint.RECORDING_BYTES
    _adjoint.RECORDING_BYTES = 0
    jax.clear_caches()
    try:
        compiled = jax.jit(fn).lower(arg).compile()
    finally:
        _adjoint.RECORDING_BYTES = kept
        jax.clear_caches()
    t, out, _ = best_of(lambda: compiled(arg), repeats)
    return t, out


def relative_error(got, want):
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    num = max(float(jnp.max(jnp.abs(g - w))) for g, w in zip(got, want, strict=True))
    return num / max(float(jnp.max(jnp.abs(w))) for w in want)


def table_case(args):
    grid = jnp.linspace(0.0, 4.0, 2000)
    table = 1.0 + 0.5 * jnp.sin(3.0 * grid)

    def f(y, t, p):
        rate = jnp.interp(t, grid, p["table"])
        return jnp.array([-rate * y[0] + p["k"] * y[1], rate * y[0] - p["k"] * y[1]])

    y0 = jnp.stack([jnp.linspace(0.5, 1.5, 64), jnp.zeros(64)], axis=1)
    ts = jnp.linspace(0.0, 4.0, 8)
    k = jnp.full((64,), 0.3)

    def loss(table, rtol, adjoint):
        ys = solve(f, y0, ts, {"table": table, "k": k}, params_axes={"table": None, "k": 0},
                   method="tsit5", rtol=rtol, atol=rtol, tstops=grid[1:-1], adjoint=adjoint)
        return jnp.mean(ys[..., 1] ** 2)

    rtol = 1e-8
    value = jax.jit(lambda tb: loss(tb, rtol, True))
    vg = jax.jit(jax.value_and_grad(lambda tb: loss(tb, rtol, True)))
    reference = jax.jit(jax.grad(lambda tb: loss(tb, 1e-11, True)))(table)
    t_value, _, first_value = best_of(lambda: value(table), args.repeats)
    t_grad, (_, g), first_grad = best_of(lambda: vg(table), args.repeats)
    print(f"table (2 000 shared entries, N = 64, rtol {rtol:g})")
    print(f"  value                 {1e3 * t_value:9.2f} ms   first call {first_value:6.2f} s")
    print(f"  value_and_grad adjoint {1e3 * t_grad:8.2f} ms   first call {first_grad:6.2f} s   "
          f"{t_grad / t_value:5.2f}x the value   gradient error {relative_error(g, reference):.1e}")
    t_again, (_, g_again) = best_without_recording(
        jax.value_and_grad(lambda tb: loss(tb, rtol, True)), table, args.repeats)
    print(f"  ... solving forward again {1e3 * t_again:6.2f} ms                      "
          f"{t_again / t_value:5.2f}x the value   the same gradient bits: "
          f"{bool(jnp.all(g_again == g))}")
    if args.forward:
        fwd = jax.jit(jax.value_and_grad(lambda tb: loss(tb, rtol, False)))
        t_fwd, (_, g_fwd), first_fwd = best_of(lambda: fwd(table), 1)
        print(f"  value_and_grad forward {1e3 * t_fwd:8.1f} ms   first call {first_fwd:6.2f} s   "
              f"{t_fwd / t_grad:5.1f}x the adjoint   gradient error "
              f"{relative_error(g_fwd, reference):.1e}")


def crossover_case(args):
    n_traj = 256
    y0 = 0.5 + jax.random.uniform(jax.random.PRNGKey(2), (n_traj, 4))
    ts = jnp.linspace(0.0, 2.0, 5)
    print(f"crossover (4 variables, m shared parameters, N = {n_traj}, rtol 1e-8): "
          "value_and_grad time, ms")
    print(f"  {'m':>4} {'value':>9} {'adjoint':>9} {'forward':>9} {'forward/adjoint':>16}")
    for m in (2, 4, 8, 16, 32, 64):
        def f(y, t, p, m=m):
            i = jnp.arange(1, m + 1)
            rates = jnp.array([jnp.sum(p * jnp.cos(i * y[(j + 1) % 4])) / m for j in range(4)])
            return -rates * y + 0.1 * jnp.roll(y, 1)

        p = 1.0 + 0.1 * jnp.arange(m) / m

        def loss(p, adjoint, f=f):
            ys = solve(f, y0, ts, p, params_axes=None, method="tsit5", rtol=1e-8, atol=1e-8,
                       adjoint=adjoint)
            return jnp.sum(ys ** 2)

        t_value, _, _ = best_of(jax.jit(lambda p=p, loss=loss: loss(p, False)), args.repeats)
        times = []
        for adjoint in (True, False):
            fn = jax.jit(jax.value_and_grad(lambda p, adjoint=adjoint, loss=loss:
                                            loss(p, adjoint)))
            times.append(best_of(lambda fn=fn, p=p: fn(p), args.repeats)[0])
        print(f"  {m:>4} {1e3 * t_value:9.2f} {1e3 * times[0]:9.2f} {1e3 * times[1]:9.2f} "
              f"{times[1] / times[0]:16.2f}")


def mass_action_network(n_species=20, n_reactions=100, seed=3):
    """f(y, t, k) of random bimolecular and unimolecular mass-action reactions (fixed by the
    seed), rates spread over six decades (stiff), and y0 (N, n)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_species, n_reactions)
    b = rng.integers(0, n_species, n_reactions)
    c = rng.integers(0, n_species, n_reactions)
    bimolecular = rng.random(n_reactions) < 0.5

    def f(y, t, k):
        m = k.shape[0]
        flux = k * y[a[:m]] * jnp.where(bimolecular[:m], y[b[:m]], 1.0)
        dy = jnp.zeros(n_species)
        dy = dy.at[a[:m]].add(-flux).at[c[:m]].add(flux)
        dy = dy.at[b[:m]].add(jnp.where(bimolecular[:m], -flux, 0.0))
        return dy + 0.1 - 0.1 * y  # inflow and outflow keep it bounded

    rates = jnp.asarray(10.0 ** rng.uniform(-2, 4, n_reactions))
    y0 = jnp.asarray(rng.uniform(0.5, 1.5, (64, n_species)))
    return f, rates, y0


def stiff_case(args):
    ts = jnp.linspace(0.0, 5.0, 6)
    print("stiff (20-species mass-action network, m rates shared, N = 64, Rodas5P, rtol 1e-8): "
          "value_and_grad, ms (gradient error against rtol 1e-11)")
    print(f"  {'m':>4} {'value':>9} {'adjoint':>20} {'forward':>20} {'forward/adjoint':>16}")
    for m in (10, 25, 100):
        f, rates, y0 = mass_action_network()
        rates = rates[:m]

        def loss(k, adjoint, rtol, f=f, y0=y0):
            ys = solve(f, y0, ts, k, params_axes=None, method="rodas5p", rtol=rtol,
                       atol=1e-2 * rtol, sparsity="dense", adjoint=adjoint)
            return jnp.sum(ys[:, 1:, :5])

        reference = jax.jit(jax.grad(lambda k, loss=loss: loss(k, True, 1e-11)))(rates)
        t_value, _, _ = best_of(jax.jit(lambda loss=loss, k=rates: loss(k, False, 1e-8)),
                              args.repeats)
        cells = []
        for adjoint in (True, False):
            fn = jax.jit(jax.value_and_grad(lambda k, adjoint=adjoint, loss=loss:
                                            loss(k, adjoint, 1e-8)))
            t, (_, g), _ = best_of(lambda fn=fn, k=rates: fn(k), args.repeats)
            cells.append((t, relative_error(g, reference)))
        print(f"  {m:>4} {1e3 * t_value:9.1f} "
              + " ".join(f"{1e3 * t:10.1f} ({e:.0e})" for t, e in cells)
              + f" {cells[1][0] / cells[0][0]:16.2f}")


def diffrax_network_saves(params, rtol, y0, ts, f=field):
    """(N, len(ts), 2): the network ODE (or another f(y, t, p)) by diffrax's Tsit5 from each y0
    on [0, 1] (atol 1e-2 rtol), the same problem as shoal's in the neural cases."""
    import diffrax

    def one(y):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, p: f(y, t, p)), diffrax.Tsit5(), 0.0, 1.0, 0.01,
            y, args=params, saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=1e-2 * rtol)).ys
    return jax.vmap(one)(y0)


def network_against_diffrax(f, params, args, title):
    """value and value_and_grad of the mean square of f's 20 saves on [0, 1] from N random
    states (shoal's adjoint; all weights shared), against diffrax's value_and_grad, rtol 1e-6;
    errors against shoal's gradient at rtol 1e-11, which diffrax's is checked against."""
    n = args.n
    y0 = jax.random.normal(jax.random.PRNGKey(1), (n, 2))
    ts = jnp.linspace(0.0, 1.0, 20)

    def ours(params, rtol):
        ys = solve(f, y0, ts, params, params_axes=None, method="tsit5", rtol=rtol,
                   atol=1e-2 * rtol, adjoint=True)
        return jnp.mean(ys ** 2)

    def peer(params, rtol):
        return jnp.mean(diffrax_network_saves(params, rtol, y0, ts, f) ** 2)

    rtol = 1e-6
    reference = jax.jit(jax.grad(lambda p: ours(p, 1e-11)))(params)
    check = jax.jit(jax.grad(lambda p: peer(p, 1e-11)))(params)
    print(f"{title}, N = {n}, 20 saves, rtol {rtol:g}, atol {1e-2 * rtol:g}; reference "
          f"gradients at rtol 1e-11 agree to {relative_error(check, reference):.1e}")
    t_value, _, first_value = best_of(jax.jit(lambda: ours(params, rtol)), args.repeats)
    ours_vg = jax.jit(jax.value_and_grad(lambda p: ours(p, rtol)))
    t_grad, (_, g), first_grad = best_of(lambda: ours_vg(params), args.repeats)
    t_again, (_, g_again) = best_without_recording(
        jax.value_and_grad(lambda p: ours(p, rtol)), params, args.repeats)
    peer_vg = jax.jit(jax.value_and_grad(lambda p: peer(p, rtol)))
    t_peer, (_, g_peer), first_peer = best_of(lambda: peer_vg(params), args.repeats)
    print(f"  shoal value                  {1e3 * t_value:9.1f} ms   "
          f"first call {first_value:6.2f} s")
    print(f"  shoal value_and_grad adjoint {1e3 * t_grad:9.1f} ms   first call {first_grad:6.2f} s"
          f"   {t_grad / t_value:5.2f}x the value   gradient error "
          f"{relative_error(g, reference):.1e}")
    same = all(bool(jnp.all(a == b)) for a, b in zip(jax.tree_util.tree_leaves(g_again),
                                                     jax.tree_util.tree_leaves(g), strict=True))
    print(f"  ... solving forward again    {1e3 * t_again:9.1f} ms                      "
          f"{t_again / t_value:5.2f}x the value   the same gradient bits: {same}")
    print(f"  diffrax value_and_grad       {1e3 * t_peer:9.1f} ms   first call {first_peer:6.2f} s"
          f"   gradient error {relative_error(g_peer, reference):.1e}   "
          f"shoal {t_peer / t_grad:5.2f}x faster")


def neural_case(args):
    network_against_diffrax(field, make_params(64), args,
                            "neural ODE (MLP 2-64-64-2 tanh, 4 480 shared weights)")


def forced_case(args):
    # The neural ODE's field scaled by a tabulated forcing (a universal differential equation
    # with a measured input): its vjp adds the forcing's cotangent at run-time indices.
    grid = jnp.linspace(0.0, 1.0, 200)

    def forced(y, t, p):
        return jnp.interp(t, grid, p["forcing"]) * field(y, t, p["net"])

    params = {"net": make_params(64), "forcing": 1.0 + 0.3 * jnp.sin(6.0 * grid)}
    network_against_diffrax(forced, params, args, "forced neural ODE (the neural case's network "
                            "times a 200-entry forcing table)")


def observed_case(args):
    """Gradients through observables (a save_fn), whose products the backward sweeps add to
    each trajectory's lane of p̄: the stiff network observing three species against a scale
    (25 rates, Rodas5P), and the neural ODE observing a function of its state (diffrax on the
    same loss in the same run)."""
    f, rates, y0 = mass_action_network()
    rates, ts = rates[:25], jnp.linspace(0.0, 5.0, 6)

    def stiff(k, rtol):
        ys = solve(f, y0, ts, k, params_axes=None, method="rodas5p", rtol=rtol,
                   atol=1e-2 * rtol, adjoint=True, save_fn=lambda y, t, k: y[:3] * k[0] + y[3:6])
        return jnp.sum(jnp.log(ys))

    params = make_params(64)
    y_net = jax.random.normal(jax.random.PRNGKey(1), (args.n, 2))
    ts_net = jnp.linspace(0.0, 1.0, 20)

    def observe(y):
        return jnp.stack([y[..., 0] * y[..., 1], jnp.tanh(y[..., 1])], axis=-1)

    def neural(p, rtol):
        ys = solve(field, y_net, ts_net, p, params_axes=None, method="tsit5", rtol=rtol,
                   atol=1e-2 * rtol, adjoint=True, save_fn=lambda y, t, p: observe(y))
        return jnp.mean(ys ** 2)

    def peer(p, rtol):
        return jnp.mean(observe(diffrax_network_saves(p, rtol, y_net, ts_net)) ** 2)

    print("observed (a save_fn): value_and_grad by the adjoint, ms")
    for name, loss, theta, rtol in (("stiff network, 25 rates, 3 observables x k[0]", stiff,
                                     rates, 1e-8),
                                    (f"neural ODE, N = {args.n}, observables of the state",
                                     neural, params, 1e-6)):
        reference = jax.jit(jax.grad(lambda th, loss=loss: loss(th, 1e-11)))(theta)
        value = jax.jit(lambda th, loss=loss, rtol=rtol: loss(th, rtol))
        vg = jax.jit(jax.value_and_grad(lambda th, loss=loss, rtol=rtol: loss(th, rtol)))
        t_value, _, _ = best_of(lambda value=value, th=theta: value(th), args.repeats)
        t_grad, (_, g), _ = best_of(lambda vg=vg, th=theta: vg(th), args.repeats)
        line = (f"  {name:48} value {1e3 * t_value:7.1f}   value_and_grad {1e3 * t_grad:7.1f} "
                f"({t_grad / t_value:4.2f}x, gradient error {relative_error(g, reference):.1e})")
        if loss is neural:
            peer_vg = jax.jit(jax.value_and_grad(lambda p, rtol=rtol: peer(p, rtol)))
            t_peer, (_, g_peer), _ = best_of(lambda vg=peer_vg, th=theta: vg(th), args.repeats)
            line += (f"   diffrax {1e3 * t_peer:7.1f} (error "
                     f"{relative_error(g_peer, reference):.1e})")
        print(line)


def boltzmann_case(args):
    import _boltzmann_like as model
    from boltzmann_modes import K_TOY, TAU

    knots = [spline[0] for spline in (model.EXPANSION, model.OPACITY, model.SOUND_SPEED)]
    coeffs = tuple(tuple(jnp.asarray(c) for c in spline[1:])
                   for spline in (model.EXPANSION, model.OPACITY, model.SOUND_SPEED))
    y0 = jnp.tile(jnp.asarray(model.initial_state()), (K_TOY.size, 1))
    theta = jnp.tile(jnp.asarray(model.PARAMS), (K_TOY.size, 1)).at[:, 0].set(K_TOY)
    ts = jnp.asarray(TAU)

    def f(y, tau, p):
        splines = tuple((x, *c) for x, c in zip(knots, p["coeffs"], strict=True))
        return model.rhs(y, tau, p["theta"], splines)

    def loss(coeffs, rtol, sparsity, adjoint=True):
        ys = solve(f, y0, ts, {"theta": theta, "coeffs": coeffs},
                   params_axes={"theta": 0, "coeffs": None}, method="rodas5p", rtol=rtol,
                   atol=1e-4 * rtol, sparsity=sparsity, max_steps=200_000, adjoint=adjoint)
        return jnp.sum(ys[:, -1, 1])

    n_coeffs = sum(c.size for spline in coeffs for c in spline)
    direction = tuple(
        tuple(jnp.asarray(c)
              for c in model.natural_cubic_spline(x, 0.01 * np.sin(x / 2 + k))[1:])
        for k, x in enumerate(knots))
    print(f"boltzmann (72 variables, 3 modes, {n_coeffs} shared spline coefficients, Rodas5P): "
          "value_and_grad by the adjoint; check: forward-mode derivative along a smooth "
          "direction")
    print(f"  {'rtol':>6} {'sparsity':>8} {'value':>10} {'value_and_grad':>15} {'ratio':>6} "
          f"{'first call':>10} {'direction check':>16}")
    for rtol in (1e-4, 1e-8):
        for sparsity in ("dense", None):
            value = jax.jit(lambda c, rtol=rtol, sp=sparsity: loss(c, rtol, sp))
            vg = jax.jit(jax.value_and_grad(lambda c, rtol=rtol, sp=sparsity: loss(c, rtol, sp)))
            t_value, _, _ = best_of(lambda value=value: value(coeffs), args.repeats)
            t_grad, (_, g), first = best_of(lambda vg=vg: vg(coeffs), args.repeats)
            _, tangent = jax.jvp(lambda c, rtol=rtol, sp=sparsity: loss(c, rtol, sp, False),
                                 (coeffs,), (direction,))
            along = sum(jnp.vdot(a, b) for a, b in zip(jax.tree_util.tree_leaves(g),
                                                       jax.tree_util.tree_leaves(direction),
                                                       strict=True))
            check = abs(float(along - tangent)) / abs(float(tangent))
            print(f"  {rtol:6.0e} {sparsity or 'default':>8} {1e3 * t_value:8.1f}ms "
                  f"{1e3 * t_grad:13.1f}ms {t_grad / t_value:5.2f}x {first:9.1f}s "
                  f"{check:16.1e}")


def checkpoints_case(args):
    n, N = 40, 64

    def f(y, t, p):  # Lorenz-96 with a forcing per trajectory
        return (jnp.roll(y, -1) - jnp.roll(y, 2)) * jnp.roll(y, 1) - y + p

    y0 = 8.0 + 0.01 * jnp.sin(jnp.arange(N * n, dtype=jnp.float64).reshape(N, n))
    forcing = jnp.linspace(7.5, 8.5, N)
    ts = jnp.linspace(0.0, 20.0, 5)

    def loss(p, memory):
        ys = solve(f, y0, ts, p, method="tsit5", rtol=1e-8, atol=1e-8, adjoint=True,
                   adjoint_memory=memory)
        return jnp.mean(ys ** 2)

    _, stats = solve(f, y0, ts, forcing, method="tsit5", rtol=1e-8, atol=1e-8,
                     return_stats=True)
    steps = int(np.max(stats["accepted"]))
    print(f"checkpoints (Lorenz-96, n = {n}, N = {N}, Tsit5 rtol 1e-8, at most {steps} steps "
          f"a trajectory: {steps * n * 8 / 1024:.0f} KiB of states if all are kept)")
    value = jax.jit(lambda p: loss(p, 4 << 20))
    t_value, _, _ = best_of(lambda: value(forcing), args.repeats)
    print(f"  value                          {1e3 * t_value:9.2f} ms")
    first = None
    for memory in (4 << 20, 256 << 10, 64 << 10, 8 << 10):
        vg = jax.jit(jax.value_and_grad(lambda p, memory=memory: loss(p, memory)))
        t, (_, g), _ = best_of(lambda vg=vg: vg(forcing), args.repeats)
        first = g if first is None else first
        # The checkpoints' spacing doubles until they fit (adjoint.hpp): kept at most `memory`.
        spacing, kept = 1, steps
        while kept * n * 8 > memory and kept > 2:
            spacing *= 2
            kept = -(-steps // spacing)
        print(f"  adjoint_memory {memory >> 10:5d} KiB: value_and_grad {1e3 * t:8.2f} ms   "
              f"{t / t_value:5.2f}x the value   a state every {spacing:3d} steps "
              f"({kept * n * 8 / 1024:6.1f} KiB)   the same gradient bits: "
              f"{bool(jnp.all(g == first))}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="table,crossover,stiff,neural,forced,observed,boltzmann,"
                        "checkpoints")
    parser.add_argument("--forward", action="store_true",
                        help="also time the table's gradient by forward sensitivities (minutes)")
    parser.add_argument("--n", type=int, default=1000, help="neural ODE trajectories")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("SHOAL_CACHE_DIR", tempfile.mkdtemp(prefix="shoal-adjoint-"))
    print("\n".join(header_lines()))
    cases = {"table": table_case, "crossover": crossover_case, "stiff": stiff_case,
             "neural": neural_case, "forced": forced_case, "observed": observed_case,
             "boltzmann": boltzmann_case, "checkpoints": checkpoints_case}
    for name in args.cases.split(","):
        cases[name](args)


if __name__ == "__main__":
    main()
