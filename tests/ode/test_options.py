"""The options record: one list of fields from Python to the kernel, validated once."""

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from shoal.ode import solve
from shoal.ode._options import LuPrecision, Method, Ordering, SolveOptions, SparsityPattern

HEADER = Path(__file__).resolve().parents[2] / "include" / "shoal" / "ode" / "solve_options.hpp"


def _cpp_fields():
    text = HEADER.read_text()
    block = text[text.index("#define SHOAL_SOLVE_OPTION_FIELDS"):text.index("extern")]
    return re.findall(r"X\((\w+), (\w+), ([^,]+),", block)


def test_kernel_attributes_are_exactly_the_cpp_struct_fields():
    # XLA decodes the dictionary into ShoalSolveOptions by name and refuses a count mismatch,
    # so the two lists must agree name for name and type for type.
    want = {name: ctype for ctype, name, _ in _cpp_fields()}
    got = SolveOptions().kernel_attributes(error_components=3)
    assert set(got) == set(want)
    for name, value in got.items():
        assert value.dtype == {"double": np.float64, "int64_t": np.int64}[want[name]], name
    assert got["error_components"] == 3


def test_cpp_defaults_match_the_python_defaults_where_both_exist():
    record = SolveOptions()
    defaults = record.kernel_attributes()
    cpp = {name: float(value) for _, name, value in _cpp_fields()}
    for name in ("max_step", "max_steps", "pcoeff", "icoeff", "dcoeff", "rtol", "factor_min",
                 "factor_max", "event_terminal", "event_direction"):
        assert float(defaults[name]) == cpp[name], name


def test_record_is_frozen_hashable_and_compared_by_value():
    a = SolveOptions(method="tsit5", rtol=1e-6, sparsity=SparsityPattern(np.eye(3)))
    b = SolveOptions(method=Method.TSIT5, rtol=1e-6, sparsity=SparsityPattern(np.eye(3)))
    assert a == b and hash(a) == hash(b)
    assert a.method is Method.TSIT5 and a.lu_precision is LuPrecision.FP64
    assert a.ordering is Ordering.AMD
    assert a != a.replace(rtol=1e-7)
    with pytest.raises(AttributeError):
        a.rtol = 1.0


def test_sparsity_pattern_is_read_only_and_keyed_by_value():
    mask = np.eye(4, dtype=bool)
    pattern = SparsityPattern(mask)
    mask[0, 1] = True  # the pattern holds its own copy
    assert not pattern.mask[0, 1]
    with pytest.raises(ValueError):
        pattern.mask[0, 1] = True
    assert pattern != SparsityPattern(mask)
    with pytest.raises(ValueError, match="square"):
        SparsityPattern(np.ones((2, 3), bool))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(method="euler"), ValueError, "method must be one of 'tsit5', 'rodas5p'"),
    (dict(lu_precision="fp16"), ValueError, "lu_precision must be one of"),
    (dict(ordering="rcm"), ValueError, "ordering must be one of"),
    (dict(rtol=0.0), ValueError, "rtol must be a finite number > 0"),
    (dict(atol="1e-3"), TypeError, "atol must be a Python float"),
    (dict(max_step=-1.0), ValueError, "max_step"),
    (dict(factor_min=1.5), ValueError, "factor_min"),
    (dict(factor_max=0.5), ValueError, "factor_max"),
    (dict(jump_fn=3), TypeError, "jump_fn"),
    (dict(save_fn="h"), TypeError, "save_fn"),
    (dict(event=lambda y, t, p: y[0]), TypeError, "shoal.ode.Event"),
    (dict(max_steps=1.5), TypeError, "max_steps must be a Python int"),
    (dict(dcoeff=float("nan")), ValueError, "dcoeff must be a finite Python float"),
    (dict(sparsity="sparse"), ValueError, "sparsity must be None, 'auto', 'dense' or a pattern"),
])
def test_bad_options_name_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        SolveOptions(**kwargs)


def test_solve_signature_and_docstring_come_from_the_record():
    parameters = inspect.signature(solve).parameters
    for name, field in SolveOptions.__dataclass_fields__.items():
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[name].default == getattr(field.default, "value", field.default)
        assert f"    {name} : default" in solve.__doc__
    assert list(parameters)[:4] == ["f", "y0", "t_span", "params"]


def test_unknown_keyword_is_a_type_error_listing_the_options():
    with pytest.raises(TypeError, match="unexpected keyword argument.*rtoll.*the options are"):
        solve(lambda y, t, p: -y, np.ones(1), np.linspace(0, 1, 3), rtoll=1e-6)


def test_abi_version_folds_in_the_option_fields():
    # Adding, removing, renaming or retyping an option changes the ABI by itself, so a library
    # compiled against another list is refused rather than read with the wrong layout.
    from shoal.ode import _ode_ext

    spelling = "".join(f"{ctype} {name};" for ctype, name, _ in _cpp_fields())
    h = 2166136261
    for byte in spelling.encode():
        h = ((h ^ byte) * 16777619) % 2**32
    assert _ode_ext.abi_version & 0xFFFFFF == h & 0xFFFFFF
    assert _ode_ext.abi_version >> 24 == 9
