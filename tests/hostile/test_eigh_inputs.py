"""shoal.linalg.eigh / eigh_gen under hostile input: matrices of random shapes and dtypes
holding NaN/±Inf/huge/subnormal entries, non-arrays, and hostile values for every keyword.
Each call raises a ValueError/TypeError naming the argument, a LinAlgError exactly when the
matrix as read is non-finite (or b is not positive definite), or returns a solution with a
small residual and orthonormal vectors; inside jit a hostile batch element is NaN and leaves
the others bit for bit. Run in a child process (conftest.run_child): the values reach LAPACK."""


def test_matrix_arguments(child):
    report = child("hostile_eigh_cases:matrix_arguments")
    assert report["examples"]["a"] >= 30 and report["examples"]["b"] >= 30
    assert min(report["outcomes"].get(k, 0) for k in ("solved", "clear error", "LinAlgError")) >= 5


def test_keyword_arguments(child):
    report = child("hostile_eigh_cases:option_arguments")
    assert len(report["examples"]) == 10
    assert report["outcomes"]["solved"] >= 20 and report["outcomes"]["clear error"] >= 20
