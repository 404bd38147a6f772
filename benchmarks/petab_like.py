"""Systems-biology models of the PEtab benchmark sizes: shoal against a loop over libRoadRunner.

Issue 26's goal for real models: at the sizes and kinetics of the PEtab benchmark collection
(Elowitz 8 states, Brannmark 9, Bachmann 25, Lucarelli 33) shoal should beat a loop over a BDF
solver per trajectory per core. These are not those models (no SBML importer here) but networks
written to their sizes and kinetics from one description, printed both as JAX (for shoal) and as
Antimony (for libRoadRunner, whose CVODE is what a PEtab user runs): a signalling cascade driven
by a piecewise input (a stimulus switched down at t = 20, given to shoal as a `tstops`),
mass-action conversions and degradations, fast reversible complex formation (stiffness), Hill
activations with integer and non-integer exponents (`pow`), and a Hill-repressed feedback on the
first species. N parameter sets (every rate constant log-normally perturbed, 30 %), 20 saves on
[0, 100], rtol 1e-8, atol 1e-10, one core each: shoal with ``SHOAL_NUM_THREADS=1``, RoadRunner
a Python loop over ``simulate`` (timed on a subset, per trajectory), at the same tolerances and
100x tighter ones (CVODE's achieved error at equal tolerances is ~30x shoal's, so the tighter run
is the matched-error comparison). Achieved error: the largest |y - ref| / (|ref| + atol/rtol)
against SciPy Radau at rtol 1e-12 on three members.

    pip install libroadrunner antimony   # the peer, not a shoal dependency
    PYTHONPATH=. .venv/bin/python benchmarks/petab_like.py [--n 1000] [--sizes 8,9,25,33]
"""

from __future__ import annotations

import os

os.environ.setdefault("SHOAL_NUM_THREADS", "1")  # one core, as the peer's loop  # noqa: E402

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import header_lines
from scipy.integrate import solve_ivp

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)

T_END, T_SWITCH, N_SAVES = 100.0, 20.0, 20


def network(n: int, seed: int = 0):
    """(reactions, rate constants, initial state) of an n-species signalling network. A reaction
    is (reactants, products, rate law in Antimony syntax)."""
    rng = np.random.default_rng(seed + n)
    k = {}

    def const(name, low, high):
        k[name] = float(np.exp(rng.uniform(np.log(low), np.log(high))))
        return name

    s = [f"S{i}" for i in range(n)]
    u = "piecewise(1, time < 20, 0.1)"
    reactions = [((), (s[0],), f"{const('kin', 0.5, 2)} * {u} * "
                  f"{const('Kf', 0.5, 2)}^2 / ({'Kf'}^2 + {s[-1]}^2)")]
    complexes = set()
    for i in range(1, n):
        if i % 4 == 3 and i >= 3:  # complex formation: S[i-3] + S[i-2] <-> S[i], fast
            a, b = s[i - 3], s[i - 2]
            reactions += [((a, b), (s[i],), f"{const(f'kon{i}', 1e2, 1e3)} * {a} * {b}"),
                          ((s[i],), (a, b), f"{const(f'koff{i}', 1e2, 1e3)} * {s[i]}")]
            complexes.add(i)
            continue
        src = s[i - 1] if (i - 1) not in complexes or i < 2 else s[i - 2]
        if i % 3 == 1:  # activation by a Hill function of another species (pow exponent)
            act = s[(i * 7 + 3) % i] if i > 1 else src
            h = "2.5" if i % 2 else "2"
            law = (f"{const(f'k{i}', 0.1, 1)} * {src} * {act}^{h} / "
                   f"({const(f'K{i}', 0.2, 1)}^{h} + {act}^{h})")
        else:
            law = f"{const(f'k{i}', 0.1, 1)} * {src}"
        reactions.append(((src,), (s[i],), law))
    for i in range(n):
        reactions.append(((s[i],), (), f"{const(f'd{i}', 0.05, 0.3)} * {s[i]}"))
    y0 = np.where(np.arange(n) % 5 == 0, 1.0, 0.1)
    return s, reactions, k, y0


def antimony_model(species, reactions, k, y0) -> str:
    lines = ["model petab_like"]
    for j, (lhs, rhs, law) in enumerate(reactions):
        lines.append(f"  J{j}: {' + '.join(lhs) or ''} -> {' + '.join(rhs) or ''}; {law}")
    lines += [f"  {name} = {float(value)!r}" for name, value in zip(species, y0, strict=True)]
    lines += [f"  {name} = {value!r}" for name, value in k.items()]
    lines.append("end")
    return "\n".join(lines)


def jax_rhs(species, reactions, names):
    """f(y, t, p) of the network: the Antimony rate laws evaluated by Python with jnp."""
    laws = [law.replace("^", "**") for _, _, law in reactions]
    index = {name: i for i, name in enumerate(species)}
    stoich = np.zeros((len(species), len(reactions)))
    for j, (lhs, rhs, _) in enumerate(reactions):
        for name in lhs:
            stoich[index[name], j] -= 1
        for name in rhs:
            stoich[index[name], j] += 1

    def piecewise(a, cond, b):
        return jnp.where(cond, a, b)

    compiled = [compile(law, "<rate>", "eval") for law in laws]

    def f(y, t, p):
        scope = {"piecewise": piecewise, "time": t}
        scope.update({name: y[i] for i, name in enumerate(species)})
        scope.update({name: p[i] for i, name in enumerate(names)})
        rates = jnp.stack([eval(code, {}, scope) for code in compiled])  # noqa: S307
        return jnp.asarray(stoich) @ rates

    return f


def _reference(f, y0, p, ts):
    """Radau at rtol 1e-12 on each side of the switch at T_SWITCH (a discontinuity in f)."""
    p = jnp.asarray(p)
    fun = jax.jit(lambda t, y: f(y, t, p))
    jac = jax.jit(jax.jacfwd(lambda y, t: f(y, t, p)))
    pieces, y = [], y0
    for lo, hi in ((0.0, T_SWITCH), (T_SWITCH, T_END)):
        inside = ts[(ts >= lo) & ((ts < hi) if hi < T_END else (ts <= hi))]
        t_eval = np.unique(np.concatenate([inside, [hi]]))
        sol = solve_ivp(lambda t, y: np.asarray(fun(t, y)), (lo, hi), y, method="Radau",
                        t_eval=t_eval, rtol=1e-12, atol=1e-14,
                        jac=lambda t, y: np.asarray(jac(y, t)), first_step=1e-8)
        pieces.append(sol.y.T[:len(inside)])
        y = sol.y[:, -1]
    return np.concatenate(pieces)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--sizes", default="8,9,25,33")
    parser.add_argument("--peer-members", type=int, default=50,
                        help="members RoadRunner solves (timed per trajectory)")
    args = parser.parse_args()
    import antimony
    import roadrunner

    rtol, atol = 1e-8, 1e-10
    ts = np.linspace(0.0, T_END, N_SAVES)
    print("\n".join(header_lines()))
    print(f"N = {args.n}, 20 saves on [0, {T_END:g}], rtol {rtol:g}, atol {atol:g}, one core "
          f"each; RoadRunner {roadrunner.__version__} (CVODE BDF) over {args.peer_members} "
          f"members; error: max |y - ref| / (|ref| + atol/rtol) against Radau at 1e-12 (3 members)")
    print(f"{'':>6} | {'':>9} | {'shoal':^36} | {'RoadRunner, same tolerances':^32} | "
          f"{'RoadRunner, 100x tighter':^32}")
    print(f"{'states':>6} | {'reactions':>9} | {'ms/traj':>8} {'error':>8} {'sparse':>6} "
          f"{'steps':>6} | {'ms/traj':>8} {'error':>8} {'/shoal':>7}"
          f" | {'ms/traj':>8} {'error':>8} {'/shoal':>7}")
    for n in (int(x) for x in args.sizes.split(",")):
        species, reactions, k, y0 = network(n)
        names = list(k)
        f = jax_rhs(species, reactions, names)
        rng = np.random.default_rng(1)
        base = np.array([k[name] for name in names])
        P = base * np.exp(0.3 * rng.standard_normal((args.n, len(names))))
        Y0 = np.tile(y0, (args.n, 1))

        def shoal_solve(p, f=f, Y0=Y0):
            return solve(f, jnp.asarray(Y0), jnp.asarray(ts), p, tstops=jnp.array([T_SWITCH]),
                         rtol=rtol, atol=atol, return_stats=True)

        run = jax.jit(shoal_solve)
        ys, stats = jax.block_until_ready(run(jnp.asarray(P)))
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            jax.block_until_ready(run(jnp.asarray(P)))
            best = min(best, time.perf_counter() - t0)
        ys = np.asarray(ys)
        assert np.all(np.asarray(stats["status"]) == 0), "a shoal member failed"

        antimony.clearPreviousLoads()
        if antimony.loadAntimonyString(antimony_model(species, reactions, k, y0)) < 0:
            raise RuntimeError(antimony.getLastError())
        rr = roadrunner.RoadRunner(antimony.getSBMLString("petab_like"))
        rr.integrator.maximum_num_steps = 100000
        rr.timeCourseSelections = ["time", *(f"[{name}]" for name in species)]
        refs = [_reference(f, y0, P[i], ts) for i in range(3)]

        def error(solution, refs=refs):
            # the largest error in the solvers' own weighting, over the reference members
            return max(np.max(np.abs(solution[i] - ref) / (np.abs(ref) + atol / rtol))
                       for i, ref in enumerate(refs))

        per_shoal = best / args.n
        row = (f"{n:>6} | {len(reactions):>9} | {1e3 * per_shoal:8.3f} {error(ys):8.1e} "
               f"{str(bool(np.asarray(stats['sparse']).all())):>6} "
               f"{np.mean(np.asarray(stats['accepted'])):6.0f}")
        for scale in (1.0, 0.01):  # the same tolerances, and 100x tighter (matched error)
            rr.integrator.relative_tolerance = rtol * scale
            rr.integrator.absolute_tolerance = atol * scale
            m = min(args.peer_members, args.n)
            peer = np.empty((m, N_SAVES, n))
            t0 = time.perf_counter()
            for i in range(m):
                rr.resetAll()
                for name, value in zip(names, P[i], strict=True):
                    rr[name] = value
                peer[i] = np.asarray(rr.simulate(0.0, T_END, N_SAVES))[:, 1:]
            t_peer = (time.perf_counter() - t0) / m
            row += f" | {1e3 * t_peer:8.3f} {error(peer):8.1e} {t_peer / per_shoal:6.1f}x"
        print(row, flush=True)


if __name__ == "__main__":
    main()
