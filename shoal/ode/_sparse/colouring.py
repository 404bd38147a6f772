"""Colouring of the column-intersection graph: one dual-number sweep per colour recovers the
Jacobian."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from shoal.ode._sparse.pattern import square_bool

_RANDOM_SEEDS = (0, 1, 2)


def colour_columns(pattern) -> np.ndarray:
    """Colours (``0..n_colours-1``) of the columns of ``pattern`` such that no row holds two
    nonzeros of one colour.

    Columns ``j`` and ``k`` conflict when some row has nonzeros in both. The result is the
    greedy colouring with the fewest colours over several vertex orderings (natural,
    largest-first, smallest-last, incidence-degree, DSATUR and a few seeded random ones; ties go
    to the earlier in that list), then improved by iterated greedy (Culberson: recolouring in an
    order that keeps each colour class together never needs more colours), stopping early at the
    lower bound (the most nonzeros in a row). Deterministic; verified before return.
    """
    p = square_bool(pattern)
    n = p.shape[0]
    adj = _conflict_graph(p)
    degree = np.array([len(a) for a in adj], dtype=np.int64)
    lower_bound = int(p.sum(axis=1).max())

    best = None
    candidates = [
        lambda: _greedy(adj, np.arange(n)),
        lambda: _greedy(adj, np.argsort(-degree, kind="stable")),
        lambda: _greedy(adj, _smallest_last(adj, degree)),
        lambda: _greedy(adj, _incidence_degree(adj, degree)),
        lambda: _dsatur(adj, degree),
    ] + [lambda s=s: _greedy(adj, np.random.default_rng(s).permutation(n)) for s in _RANDOM_SEEDS]
    for make in candidates:
        colours = make()
        if best is None or colours.max() < best.max():
            best = colours
        if best.max() + 1 <= lower_bound:
            break
    if best.max() + 1 > lower_bound:
        best = _iterated_greedy(adj, best, lower_bound)
    _verify_colouring(p, best)
    return best


_ITERATED_GREEDY_ROUNDS = 40


def _iterated_greedy(adj: list[np.ndarray], colours: np.ndarray, lower_bound: int) -> np.ndarray:
    rng = np.random.default_rng(12345)
    best, current = colours, colours
    for it in range(_ITERATED_GREEDY_ROUNDS):
        k = int(current.max()) + 1
        sizes = np.bincount(current, minlength=k)
        strategy = it % 3
        if strategy == 0:
            class_order = np.arange(k)[::-1]  # reverse
        elif strategy == 1:
            class_order = np.argsort(-sizes, kind="stable")  # largest class first
        else:
            class_order = rng.permutation(k)  # random
        rank = np.empty(k, dtype=np.int64)
        rank[class_order] = np.arange(k)
        order = np.argsort(rank[current], kind="stable")
        current = _greedy(adj, order)
        if current.max() < best.max():
            best = current
            if best.max() + 1 <= lower_bound:
                break
    return best


def _conflict_graph(p: np.ndarray) -> list[np.ndarray]:
    s = scipy.sparse.csr_matrix(p.astype(np.int32))
    c = (s.T @ s).tocsr()
    c.setdiag(0)
    c.eliminate_zeros()
    c.sort_indices()
    return [c.indices[c.indptr[j] : c.indptr[j + 1]].astype(np.int64) for j in range(p.shape[0])]


def _greedy(adj: list[np.ndarray], order) -> np.ndarray:
    n = len(adj)
    colours = np.full(n, -1, dtype=np.int64)
    for v in order:
        used = colours[adj[v]]
        used = used[used >= 0]
        if used.size == 0:
            colours[v] = 0
            continue
        taken = np.zeros(used.size + 1, dtype=bool)
        taken[used[used <= used.size]] = True
        colours[v] = int(np.argmin(taken))  # the smallest colour no neighbour has
    return colours


def _smallest_last(adj: list[np.ndarray], degree: np.ndarray) -> np.ndarray:
    """Repeatedly remove a vertex of least remaining degree; colour in reverse removal order."""
    n = len(adj)
    deg = degree.astype(np.float64)
    removed = []
    for _ in range(n):
        v = int(np.argmin(deg))
        removed.append(v)
        deg[v] = np.inf
        deg[adj[v]] -= 1
    return np.array(removed[::-1], dtype=np.int64)


def _incidence_degree(adj: list[np.ndarray], degree: np.ndarray) -> np.ndarray:
    """Next: the vertex with most already-ordered neighbours (ties: larger degree, lower index)."""
    n = len(adj)
    incidence = np.zeros(n, dtype=np.int64)
    key = np.zeros(n, dtype=np.float64)
    done = np.zeros(n, dtype=bool)
    order = []
    for _ in range(n):
        key[:] = incidence * (n + 1) + degree
        key[done] = -1
        v = int(np.argmax(key))
        order.append(v)
        done[v] = True
        incidence[adj[v]] += 1
    return np.array(order, dtype=np.int64)


def _dsatur(adj: list[np.ndarray], degree: np.ndarray) -> np.ndarray:
    """Brelaz's DSATUR: colour next the vertex whose neighbours show the most distinct colours."""
    n = len(adj)
    colours = np.full(n, -1, dtype=np.int64)
    seen = [set() for _ in range(n)]
    saturation = np.zeros(n, dtype=np.int64)
    key = np.zeros(n, dtype=np.float64)
    for _ in range(n):
        key[:] = saturation * (n + 1) + degree
        key[colours >= 0] = -1
        v = int(np.argmax(key))
        c = 0
        while c in seen[v]:
            c += 1
        colours[v] = c
        for w in adj[v]:
            if c not in seen[w]:
                seen[w].add(c)
                saturation[w] += 1
    return colours


def _verify_colouring(p: np.ndarray, colours: np.ndarray) -> None:
    n = p.shape[0]
    if colours.shape != (n,) or (colours < 0).any():
        raise RuntimeError(f"shoal bug: colouring {colours!r} is not a colour per column")
    n_colours = int(colours.max()) + 1
    if set(colours.tolist()) != set(range(n_colours)):
        raise RuntimeError("shoal bug: colours are not contiguous from 0")
    rows, cols = np.nonzero(p)
    keys = rows.astype(np.int64) * n_colours + colours[cols]
    if np.unique(keys).size != keys.size:
        raise RuntimeError(
            "shoal bug: the column colouring is not orthogonal (a row holds two "
            "nonzeros of one colour)"
        )
