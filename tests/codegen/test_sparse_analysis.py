"""Host-side analysis of sparsity patterns and the emitted sparse LU (shoal/ode/_sparse/):
pattern normalisation, column colouring, AMD ordering, exact symbolic fill, CSR layout, and the
straight-line / table-driven C++ factorisation and solves (compiled, run, compared bit for bit)."""

import ctypes
import shutil
import subprocess
import textwrap

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal import _jit
from shoal.ode import _sparse as sp
from shoal.ode._sparse import colouring, emission

# --------------------------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------------------------


def arrow(n):
    p = np.eye(n, dtype=bool)
    p[0, :] = p[:, 0] = True
    return p


def tridiagonal(n):
    p = np.eye(n, dtype=bool)
    i = np.arange(n - 1)
    p[i, i + 1] = p[i + 1, i] = True
    return p


def banded(n, lower=2, upper=1):
    i, j = np.indices((n, n))
    return (j - i <= upper) & (i - j <= lower)


def vdp_ring(n_osc, reach=1):
    """x_i' = v_i, v_i' = mu (1 - x_i^2) v_i - x_i + d sum_{|k| <= reach} (x_{i+k} - x_i),
    periodic; variables interleaved (x_0, v_0, x_1, v_1, ...)."""
    n = 2 * n_osc
    p = np.zeros((n, n), dtype=bool)
    for i in range(n_osc):
        x, v = 2 * i, 2 * i + 1
        p[x, v] = True
        p[v, v] = True
        for k in range(-reach, reach + 1):
            p[v, 2 * ((i + k) % n_osc)] = True
    np.fill_diagonal(p, True)
    return p


def bordered(core=6, tails=(5, 7, 4, 6)):
    """A dense core; each tail a tridiagonal chain hanging off core variable c."""
    n = core + sum(tails)
    p = np.zeros((n, n), dtype=bool)
    p[:core, :core] = True
    idx = core
    for c, length in enumerate(tails):
        prev = c % core
        for _ in range(length):
            p[prev, idx] = p[idx, prev] = True
            prev, idx = idx, idx + 1
    np.fill_diagonal(p, True)
    return p


def random_pattern(n, density, seed):
    rng = np.random.default_rng(seed)
    p = rng.random((n, n)) < density
    np.fill_diagonal(p, True)
    return p


PATTERNS = {
    "arrow": arrow(15),
    "arrow_reversed": arrow(15)[::-1, ::-1].copy(),
    "bordered": bordered(),
    "ring": vdp_ring(12),
    "ring_wide": vdp_ring(10, reach=3),
    "banded": banded(25),
    "tridiagonal": tridiagonal(20),
    "random_sparse": random_pattern(30, 0.06, 1),
    "random_medium": random_pattern(25, 0.15, 2),
    "random_dense": random_pattern(12, 0.5, 3),
    "diagonal": np.eye(7, dtype=bool),
    "single": np.ones((1, 1), dtype=bool),
}


def random_matrix(pattern, seed=0, dominance=1.0):
    """Random values on the pattern, made strictly diagonally dominant by rows."""
    rng = np.random.default_rng(seed)
    a = np.where(pattern, rng.uniform(-1.0, 1.0, pattern.shape), 0.0)
    np.fill_diagonal(a, 0.0)
    np.fill_diagonal(a, np.abs(a).sum(axis=1) + dominance + rng.random(len(a)))
    return a


def numeric_lu_footprint(a):
    """Nonzeros of L + U of a dense unpivoted LU (Doolittle, in place)."""
    a = np.array(a, dtype=np.float64)
    n = len(a)
    for k in range(n - 1):
        a[k + 1 :, k] /= a[k, k]
        a[k + 1 :, k + 1 :] -= np.outer(a[k + 1 :, k], a[k, k + 1 :])
    return a != 0.0


def seed_matrix(colours):
    s = np.zeros((len(colours), int(colours.max()) + 1))
    s[np.arange(len(colours)), colours] = 1.0
    return s


# --------------------------------------------------------------------------------------------
# normalize_pattern
# --------------------------------------------------------------------------------------------

REF = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1], [0, 0, 0, 1]], dtype=bool)
REF_DIAG = REF | np.eye(4, dtype=bool)
REF_PAIRS = np.argwhere(REF)


@pytest.mark.parametrize(
    "form",
    [
        "bool",
        "int01",
        "float01",
        "list",
        "jax",
        "csr",
        "csc",
        "coo",
        "lil",
        "dok",
        "bsr",
        "dia",
        "csr_array",
        "pairs",
        "pairs_uint8",
        "pairs_list",
        "pairs_duplicated",
    ],
)
def test_normalize_accepts(form):
    if form == "bool":
        s = REF
    elif form == "int01":
        s = REF.astype(np.int32)
    elif form == "float01":
        s = REF.astype(np.float32)
    elif form == "list":
        s = REF.astype(int).tolist()
    elif form == "jax":
        import jax.numpy as jnp

        s = jnp.asarray(REF)
    elif form == "csr_array":
        s = scipy.sparse.csr_array(REF.astype(float))
    elif form.startswith("pairs"):
        s = {
            "pairs": REF_PAIRS,
            "pairs_uint8": REF_PAIRS.astype(np.uint8),
            "pairs_list": [tuple(map(int, x)) for x in REF_PAIRS],
            "pairs_duplicated": np.concatenate([REF_PAIRS, REF_PAIRS[::-1]]),
        }[form]
    else:
        s = getattr(scipy.sparse, f"{form}_matrix")(REF.astype(float))
    out = sp.normalize_pattern(s, 4)
    assert out.dtype == np.bool_ and out.shape == (4, 4)
    np.testing.assert_array_equal(out, REF_DIAG)


def test_normalize_scipy_explicit_zero_is_structural_and_empty_pairs_give_diagonal():
    m = scipy.sparse.csr_matrix(
        (np.array([0.0, 2.0]), (np.array([0, 2]), np.array([3, 1]))), shape=(4, 4)
    )
    out = sp.normalize_pattern(m, 4)
    assert out[0, 3] and out[2, 1] and out.sum() == 6
    for empty in ([], np.zeros((0, 2), dtype=np.int64)):
        np.testing.assert_array_equal(sp.normalize_pattern(empty, 3), np.eye(3, dtype=bool))


def test_normalize_returns_a_fresh_array():
    mask = REF.copy()
    out = sp.normalize_pattern(mask, 4)
    out[0, 2] = True
    np.testing.assert_array_equal(mask, REF)


@pytest.mark.parametrize(
    "bad, exc, words",
    [
        (np.ones((3, 3), dtype=bool), ValueError, ["sparsity", "(3, 3)", "(4, 4)"]),
        (scipy.sparse.eye(5, format="csr"), ValueError, ["SciPy", "(5, 5)", "(4, 4)"]),
        (np.array([[0, 1], [2, 4]]), ValueError, ["sparsity", "col=4", "0..3"]),
        (np.array([[0, 1], [-1, 2], [3, 3]]), ValueError, ["sparsity", "row=-1", "negative"]),
        (
            np.array([[0.0, 1.0], [2.0, 3.0], [1.0, 1.0]]),
            TypeError,
            ["sparsity", "float64", "integers"],
        ),
        (np.array([[0, 2, 0, 0]] * 4), ValueError, ["sparsity", "2", "0/1", "!= 0"]),
        (np.full((4, 4), np.nan), ValueError, ["sparsity", "nan", "0/1"]),
        (np.ones((4, 4, 1)), ValueError, ["sparsity", "(4, 4, 1)", "(nnz, 2)"]),
        (np.ones((4, 3)), ValueError, ["sparsity", "(4, 3)", "(4, 4)"]),
        (np.ones(4, dtype=np.int64), ValueError, ["sparsity", "(4,)"]),
        (np.ones((4, 4), dtype=complex), TypeError, ["sparsity", "complex128"]),
        (None, TypeError, ["sparsity", "mask", "SciPy", "pairs"]),
        ("auto", TypeError, ["sparsity", "'auto'"]),
        ([[0, 1], [1]], TypeError, ["sparsity", "list"]),
    ],
)
def test_normalize_rejects(bad, exc, words):
    with pytest.raises(exc) as info:
        sp.normalize_pattern(bad, 4)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize(
    "n, exc", [(0, ValueError), (-3, ValueError), (2.5, TypeError), (True, TypeError)]
)
def test_normalize_rejects_bad_n(n, exc):
    with pytest.raises(exc, match="n must"):
        sp.normalize_pattern(np.eye(2, dtype=bool), n)


# --------------------------------------------------------------------------------------------
# Colouring
# --------------------------------------------------------------------------------------------


def assert_orthogonal(pattern, colours):
    p = pattern | np.eye(len(pattern), dtype=bool)
    assert colours.dtype.kind == "i" and colours.min() == 0
    assert set(colours.tolist()) == set(range(colours.max() + 1))
    for row in p:
        c = colours[row]
        assert len(set(c.tolist())) == c.size


@pytest.mark.parametrize("n", [3, 4, 10, 50])
def test_tridiagonal_needs_exactly_three_colours(n):
    colours = sp.colour_columns(tridiagonal(n))
    assert colours.max() + 1 == 3
    assert_orthogonal(tridiagonal(n), colours)


def test_colour_counts_of_known_patterns():
    assert sp.colour_columns(np.eye(9, dtype=bool)).max() + 1 == 1
    assert sp.colour_columns(np.ones((6, 6), dtype=bool)).max() + 1 == 6
    assert sp.colour_columns(arrow(15)).max() + 1 == 15  # a dense row: every column differs
    assert sp.colour_columns(vdp_ring(64)).max() + 1 == 4  # row v_i holds 4 columns
    assert sp.colour_columns(vdp_ring(32)).max() + 1 == 4  # needs the iterated greedy
    assert sp.colour_columns(vdp_ring(32, reach=2)).max() + 1 == 6
    assert sp.colour_columns(banded(25)).max() + 1 == 4  # bandwidth 2 + 1 + 1


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), density=st.floats(0.0, 0.4), seed=st.integers(0, 2**32 - 1))
def test_colouring_is_orthogonal_on_random_patterns(n, density, seed):
    p = random_pattern(n, density, seed)
    colours = sp.colour_columns(p)
    assert_orthogonal(p, colours)
    assert p.sum(axis=1).max() <= colours.max() + 1 <= n


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_compressed_jacobian_reconstructs_exactly(name):
    p = PATTERNS[name]
    colours = sp.colour_columns(p)
    assert_orthogonal(p, colours)
    jac = np.where(p, np.random.default_rng(7).normal(size=p.shape), 0.0)
    compressed = jac @ seed_matrix(colours)  # one sweep per colour
    rebuilt = np.zeros_like(jac)
    rows, cols = np.nonzero(p)
    rebuilt[rows, cols] = compressed[rows, colours[cols]]
    np.testing.assert_array_equal(rebuilt, jac)


def test_colouring_verification_catches_a_broken_colouring(monkeypatch):
    monkeypatch.setattr(colouring, "_greedy", lambda adj, order: np.zeros(len(adj), dtype=np.int64))
    monkeypatch.setattr(colouring, "_dsatur", lambda adj, deg: np.zeros(len(adj), dtype=np.int64))
    with pytest.raises(RuntimeError, match="not orthogonal"):
        sp.colour_columns(tridiagonal(5))


# --------------------------------------------------------------------------------------------
# Ordering and symbolic factorisation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ordering", ["amd", "natural"])
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_symbolic_fill_equals_numeric_lu_footprint(name, ordering):
    p = PATTERNS[name]
    s = sp.analyze(p, ordering)
    permuted = p[np.ix_(s.perm, s.perm)]
    np.testing.assert_array_equal(s.filled, sp.symbolic_lu(permuted))
    for seed in range(2):
        a = random_matrix(p, seed)[np.ix_(s.perm, s.perm)]
        np.testing.assert_array_equal(s.filled, numeric_lu_footprint(a))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), density=st.floats(0.0, 0.3), seed=st.integers(0, 2**32 - 1))
def test_symbolic_fill_equals_numeric_footprint_random(n, density, seed):
    p = random_pattern(n, density, seed)
    np.testing.assert_array_equal(sp.symbolic_lu(p), numeric_lu_footprint(random_matrix(p, seed)))


def test_arrow_fills_completely_natural_and_not_at_all_with_amd():
    n = 30
    natural = sp.analyze(arrow(n), "natural")
    assert natural.nnz == n * n and natural.filled.all()
    amd = sp.analyze(arrow(n), "amd")
    assert amd.fill == 0 and amd.nnz == 3 * n - 2
    assert amd.perm[-1] == 0  # the hub last


def test_amd_keeps_the_natural_order_when_that_fills_less():
    # A tridiagonal matrix has no fill in its natural order; AMD may reorder it but may not
    # make it worse. Whatever "amd" picks is never more fill than either ordering alone.
    tri = sp.analyze(tridiagonal(40), "amd")
    assert tri.fill == 0 and tri.ordering == "natural"
    assert np.array_equal(tri.perm, np.arange(40))
    for p in (vdp_ring(32), vdp_ring(20, reach=2), banded(40), arrow(30)):
        chosen = sp.analyze(p, "amd")
        natural = sp.analyze(p, "natural")
        amd_only = sp.symbolic_lu(
            p[np.ix_(*(2 * [sp.amd_ordering(np.array(p | np.eye(len(p), dtype=bool)))]))]
        )
        assert chosen.nnz <= min(natural.nnz, int(amd_only.sum()))
    assert sp.analyze(arrow(30), "amd").ordering == "amd"


def test_bordered_core_is_eliminated_last_with_zero_fill():
    core = 8
    p = bordered(core=core, tails=(6, 9, 4, 7, 5, 8))
    s = sp.analyze(p, "amd")
    assert s.fill == 0 and s.nnz == p.sum()
    assert set(s.perm[-core:].tolist()) == set(range(core))
    assert sp.analyze(p, "natural").fill > 0


def test_amd_ordering_is_a_permutation_and_symmetric():
    p = random_pattern(40, 0.08, 5)
    perm = sp.amd_ordering(p)
    np.testing.assert_array_equal(np.sort(perm), np.arange(40))
    # only the symmetrised pattern matters
    np.testing.assert_array_equal(perm, sp.amd_ordering(p.T))
    np.testing.assert_array_equal(perm, sp.amd_ordering(p | p.T))


def test_analyze_rejects_an_unknown_ordering():
    for bad in ("colamd", "AMD", None, 3):
        with pytest.raises(ValueError) as info:
            sp.analyze(tridiagonal(4), bad)
        assert repr(bad) in str(info.value)
        assert "'amd'" in str(info.value) and "'natural'" in str(info.value)


@pytest.mark.parametrize("ordering", ["amd", "natural"])
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_structure_invariants(name, ordering):
    p = PATTERNS[name] | np.eye(len(PATTERNS[name]), dtype=bool)
    s = sp.analyze(PATTERNS[name], ordering)
    n = s.n
    np.testing.assert_array_equal(s.pattern, p)
    np.testing.assert_array_equal(s.perm[s.iperm], np.arange(n))
    np.testing.assert_array_equal(s.iperm[s.perm], np.arange(n))
    assert s.nnz == s.filled.sum() == s.row_ptr[-1] == s.col_idx.size
    for i in range(n):
        cols = s.col_idx[s.row_ptr[i] : s.row_ptr[i + 1]]
        assert (np.diff(cols) > 0).all()
        np.testing.assert_array_equal(cols, np.flatnonzero(s.filled[i]))
        assert s.col_idx[s.diag_ptr[i]] == i
    assert s.filled[np.ix_(s.iperm, s.iperm)][p].all()  # the Jacobian lies inside L + U
    for i, j in np.argwhere(p):
        slot = s.slot(i, j)
        assert s.jacobian_slots[i, s.colours[j]] == slot >= 0
        assert s.perm[s.col_idx[slot]] == j == s.col_orig[slot]
    assert (s.jacobian_slots >= 0).sum() == p.sum()
    np.testing.assert_array_equal(s.jacobian_slots[np.arange(n), s.colours], s.diag_ptr[s.iperm])
    assert s.n_substitutions == s.nnz - n
    # the run-length form of the updates expands to the same destination list
    assert s.run_ptr[-1] == s.run_dst.size == s.run_len.size and (s.run_len > 0).all()
    expanded = [
        d + t
        for d, ln in zip(s.run_dst.tolist(), s.run_len.tolist(), strict=True)
        for t in range(ln)
    ]
    np.testing.assert_array_equal(np.array(expanded, dtype=np.int64).reshape(-1), s.update_dst)
    for e in range(s.l_slot.size):
        runs = s.run_len[s.run_ptr[e] : s.run_ptr[e + 1]]
        assert runs.sum() == s.update_ptr[e + 1] - s.update_ptr[e]
    with pytest.raises(ValueError):
        s.perm[0] = 1  # read-only


@pytest.mark.parametrize("ordering", ["amd", "natural"])
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_python_reference_solves(name, ordering):
    p = PATTERNS[name]
    s = sp.analyze(p, ordering)
    m = random_matrix(p, 3)
    a = s.assemble(m)
    s.factor_reference(a)
    b = np.random.default_rng(4).normal(size=s.n)
    x = b.copy()
    s.solve_reference(a, x)
    np.testing.assert_allclose(x, np.linalg.solve(m, b), rtol=1e-10, atol=1e-13)
    x = b.copy()
    s.solve_transposed_reference(a, x)
    np.testing.assert_allclose(x, np.linalg.solve(m.T, b), rtol=1e-10, atol=1e-13)


# --------------------------------------------------------------------------------------------
# Emission: compiled and run
# --------------------------------------------------------------------------------------------

EXPORT = 'extern "C" __attribute__((visibility("default")))'

COMPILED = [
    ("arrow_reversed", "natural"),
    ("arrow", "amd"),
    ("bordered", "amd"),
    ("bordered", "natural"),
    ("ring", "amd"),
    ("ring_wide", "amd"),
    ("banded", "natural"),
    ("random_medium", "amd"),
    ("random_dense", "natural"),
    ("diagonal", "amd"),
    ("single", "amd"),
]


def entry_points(name):
    return textwrap.dedent(f"""
        {EXPORT} int {name}_colour(int j) {{ return {name}::colour(j); }}
        {EXPORT} int {name}_jacobian_slot(int i, int c) {{ return {name}::jacobian_slot(i, c); }}
        {EXPORT} int {name}_diagonal_slot(int i) {{ return {name}::diagonal_slot(i); }}
        {EXPORT} void {name}_sizes(int* out) {{
          out[0] = {name}::n; out[1] = {name}::nnz; out[2] = {name}::n_colours; }}
        {EXPORT} void {name}_factor_d(double* a) {{ {name}::factor(a); }}
        {EXPORT} void {name}_factor_f(float* a) {{ {name}::factor(a); }}
        {EXPORT} void {name}_solve_dd(const double* a, double* b) {{ {name}::solve(a, b); }}
        {EXPORT} void {name}_solve_fd(const float* a, double* b) {{ {name}::solve(a, b); }}
        {EXPORT} void {name}_solve_ff(const float* a, float* b) {{ {name}::solve(a, b); }}
        {EXPORT} void {name}_solve_t_dd(const double* a, double* b) {{
          {name}::solve_transposed(a, b); }}
        {EXPORT} void {name}_solve_t_fd(const float* a, double* b) {{
          {name}::solve_transposed(a, b); }}
        {EXPORT} void {name}_solve_t_ff(const float* a, float* b) {{
          {name}::solve_transposed(a, b); }}
    """)


@pytest.fixture(scope="module")
def library():
    """One shared library holding every compiled case in both emissions."""
    parts = [
        '#include "shoal/config.hpp"',
        'extern "C" __attribute__((visibility("default"), used)) '
        "const char shoal_cache_key[] = SHOAL_CACHE_KEY;",
    ]
    structures = {}
    for pattern, ordering in COMPILED:
        s = sp.analyze(PATTERNS[pattern], ordering)
        structures[pattern, ordering] = s
        for unrolled in (True, False):
            name = f"{pattern}_{ordering}_{'unrolled' if unrolled else 'tables'}"
            src = s.emit_cpp(name, unrolled, transposed=True)
            assert "solve_transposed" not in s.emit_cpp(name, unrolled)
            assert ("tab::l_slot" in src) != unrolled and ("tab::col_orig" in src) != unrolled
            parts += [src, entry_points(name)]
    lib = ctypes.CDLL(str(_jit.compile_library("\n".join(parts))))
    return lib, structures


def _ptr(x):
    ctype = {np.float64: ctypes.c_double, np.float32: ctypes.c_float, np.int32: ctypes.c_int}[
        x.dtype.type
    ]
    return x.ctypes.data_as(ctypes.POINTER(ctype))


class Compiled:
    def __init__(self, lib, name):
        self.lib, self.name = lib, name

    def __getattr__(self, item):
        return getattr(self.lib, f"{self.name}_{item}")

    def assemble(self, n, jac, shift, dtype=np.float64):
        """The lead's recipe: clear all nnz slots, write -J at the Jacobian slots through
        colour / jacobian_slot, add the shift at the diagonal slots."""
        sizes = np.zeros(3, dtype=np.int32)
        self.sizes(_ptr(sizes))
        a = np.zeros(int(sizes[1]), dtype=dtype)
        for i, j in np.argwhere(jac != 0.0):
            slot = self.jacobian_slot(int(i), self.colour(int(j)))
            assert slot >= 0
            a[slot] = -jac[i, j]
        for i in range(n):
            a[self.diagonal_slot(i)] += shift[i]
        return a

    def factor(self, a):
        (self.factor_d if a.dtype == np.float64 else self.factor_f)(_ptr(a))

    def solve(self, a, b, transposed=False):
        kind = "solve_t" if transposed else "solve"
        suffix = {
            (np.float64, np.float64): "dd",
            (np.float32, np.float64): "fd",
            (np.float32, np.float32): "ff",
        }[a.dtype.type, b.dtype.type]
        getattr(self, f"{kind}_{suffix}")(_ptr(a), _ptr(b))


def iteration_matrix(p, seed):
    """M = diag(shift) - J with J random on the pattern and M diagonally dominant."""
    rng = np.random.default_rng(seed)
    jac = np.where(p, rng.uniform(-1.0, 1.0, p.shape), 0.0)
    shift = np.abs(jac).sum(axis=1) + np.abs(np.diag(jac)) + 0.5 + rng.random(len(p))
    return jac, shift, np.diag(shift) - jac


@pytest.mark.parametrize("case", COMPILED, ids=["-".join(c) for c in COMPILED])
def test_emitted_solver(library, case):
    lib, structures = library
    s = structures[case]
    p = PATTERNS[case[0]]
    base = f"{case[0]}_{case[1]}"
    unrolled, tables = Compiled(lib, f"{base}_unrolled"), Compiled(lib, f"{base}_tables")

    for c in (unrolled, tables):
        sizes = np.zeros(3, dtype=np.int32)
        c.sizes(_ptr(sizes))
        assert sizes.tolist() == [s.n, s.nnz, s.n_colours]
        assert [c.colour(j) for j in range(s.n)] == s.colours.tolist()
        assert [c.diagonal_slot(i) for i in range(s.n)] == s.diag_ptr[s.iperm].tolist()
        assert [
            [c.jacobian_slot(i, k) for k in range(s.n_colours)] for i in range(s.n)
        ] == s.jacobian_slots.tolist()

    rng = np.random.default_rng(11)
    for seed in range(3):
        jac, shift, m = iteration_matrix(p, seed)
        b = rng.normal(size=(s.n,))
        expected = np.linalg.solve(m, b)
        results = {}
        for label, c in (("unrolled", unrolled), ("tables", tables)):
            a = c.assemble(s.n, jac, shift)
            np.testing.assert_array_equal(a, s.assemble(m))
            c.factor(a)
            x = b.copy()
            c.solve(a, x)
            np.testing.assert_allclose(x, expected, rtol=1e-10, atol=1e-12)
            xt = b.copy()
            c.solve(a, xt, transposed=True)
            np.testing.assert_allclose(xt, np.linalg.solve(m.T, b), rtol=1e-10, atol=1e-12)
            results[label] = (a, x, xt)
        # straight-line and table-driven: the same operations in the same order
        for u, t in zip(results["unrolled"], results["tables"], strict=True):
            np.testing.assert_array_equal(u, t)
        # ... and the same as the Python reference (compiled with -ffp-contract=off)
        a_ref = s.assemble(m)
        s.factor_reference(a_ref)
        x_ref = b.copy()
        s.solve_reference(a_ref, x_ref)
        np.testing.assert_array_equal(results["tables"][0], a_ref)
        np.testing.assert_array_equal(results["tables"][1], x_ref)
        s.solve_transposed_reference(a_ref, xt_ref := b.copy())
        np.testing.assert_array_equal(results["tables"][2], xt_ref)

        # float factors solving double vectors
        outs = []
        for c in (unrolled, tables):
            a32 = c.assemble(s.n, jac, shift, np.float32)
            a32_assembled = a32.copy()
            c.factor(a32)
            x = b.copy()
            c.solve(a32, x)
            x32 = b.astype(np.float32)
            c.solve(a32, x32)
            np.testing.assert_allclose(x, expected, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(x32, expected, rtol=1e-3, atol=1e-4)
            xt32 = b.astype(np.float32)
            c.solve(a32, xt32, transposed=True)
            np.testing.assert_allclose(xt32, np.linalg.solve(m.T, b), rtol=1e-3, atol=1e-4)
            outs.append((a32, x, x32, xt32))
        for u, t in zip(outs[0], outs[1], strict=True):
            np.testing.assert_array_equal(u, t)
        a32 = a32_assembled
        s.factor_reference(a32)
        x_ref = b.copy()
        s.solve_reference(a32, x_ref)
        np.testing.assert_array_equal(outs[1][0], a32)
        np.testing.assert_array_equal(outs[1][1], x_ref)


def test_emission_choice_follows_the_thresholds(monkeypatch):
    s = sp.analyze(arrow(12), "natural")
    assert s.unroll_choice(None) == (True, True)
    assert s.unroll_choice(True) == (True, True) and s.unroll_choice(False) == (False, False)
    monkeypatch.setattr(emission, "MAX_UNROLLED_UPDATES", s.n_updates - 1)
    assert s.unroll_choice(None) == (False, True)
    src = s.emit_cpp("A")
    assert "tab::l_slot" in src and "tab::col_orig" not in src
    monkeypatch.setattr(emission, "MAX_UNROLLED_SUBSTITUTIONS", s.n_substitutions - 1)
    assert s.unroll_choice(None) == (False, False)
    monkeypatch.setattr(emission, "MAX_UNROLLED_UPDATES", s.n_updates)
    assert s.unroll_choice(None) == (True, False)
    with pytest.raises(TypeError, match="unrolled"):
        s.unroll_choice("yes")


def test_emission_rejects_a_bad_name():
    s = sp.analyze(tridiagonal(3))
    for bad in ("", "3x", "a-b", "a b", "__x", None):
        with pytest.raises(ValueError, match="C\\+\\+ identifier"):
            s.emit_cpp(bad)


def _nvcc():
    return shutil.which("nvcc") or (shutil.which("/usr/local/cuda/bin/nvcc"))


@pytest.mark.skipif(_nvcc() is None, reason="nvcc not installed")
def test_emission_compiles_for_the_device(tmp_path):
    """Both emissions, both table kinds, under nvcc for sm_90 with every warning an error (no
    __device__ table read from a host function, no unused table in either pass)."""
    s = sp.analyze(PATTERNS["bordered"], "amd")
    tiny = sp.analyze(PATTERNS["diagonal"], "amd")
    src = "\n".join(
        [
            '#include "shoal/config.hpp"',
            s.emit_cpp("DevUnrolled", True),
            s.emit_cpp("DevTables", False),
            tiny.emit_cpp("TinyUnrolled", True),
            tiny.emit_cpp("TinyTables", False),
            textwrap.dedent("""
        template <class M> __global__ void run(double* a, float* af, double* b, int* slots) {
          const int t = threadIdx.x;
          M::factor(a + t * M::nnz);
          M::solve(a + t * M::nnz, b + t * M::n);
          M::factor(af + t * M::nnz);
          M::solve(af + t * M::nnz, b + t * M::n);
          slots[t] = M::jacobian_slot(t % M::n, M::colour(t % M::n)) + M::diagonal_slot(t % M::n);
        }
        template __global__ void run<DevUnrolled>(double*, float*, double*, int*);
        template __global__ void run<DevTables>(double*, float*, double*, int*);
        template __global__ void run<TinyUnrolled>(double*, float*, double*, int*);
        template __global__ void run<TinyTables>(double*, float*, double*, int*);
        int host_side() { return DevTables::colour(1) + DevUnrolled::jacobian_slot(0, 0); }
        """),
        ]
    )
    (tmp_path / "k.cu").write_text(src)
    cmd = [
        _nvcc(),
        "-std=c++17",
        "-arch=sm_90",
        f"-I{_jit.include_dir()}",
        "-Werror",
        "all-warnings",
        "-c",
        str(tmp_path / "k.cu"),
        "-o",
        str(tmp_path / "k.o"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
