"""What a translation accumulates: the body's statements and the constant tables."""

from __future__ import annotations

import contextlib
import re

from shoal.ode._codegen.cpp import literal

# A scalar a statement can read: a local, an element of y/p, t, or an element of a local array.
_OPERAND = re.compile(r"[A-Za-z_]\w*(?:\[\d+\])?")
_NAME = re.compile(r"[A-Za-z_]\w*")
# A declaration whose only effect is its value: `const T v3 = ...;`, `const T local4[2] = {...};`.
_DECLARATION = re.compile(r"const [\w:<>]+ (\w+)(?:\[\d+\])? = ")


def live(lines: list[str], roots: list[str]) -> list[str]:
    """``lines`` without the declarations that neither ``roots`` nor a kept line reads: a
    primitive's unused outputs (lu's pivots when a solve uses its permutation, say) would
    otherwise be compiled, and warned about by NVRTC."""
    used = {name for root in roots for name in _NAME.findall(root)}
    kept = []
    for line in reversed(lines):
        declared = _DECLARATION.match(line)
        if declared and declared.group(1) not in used:
            continue
        used.update(_NAME.findall(line))
        kept.append(line)
    return kept[::-1]


class Emitter:
    # Caches of names declared in the body: a name declared inside a block (a loop's body) is out
    # of scope after it, and one computed from a loop's mutable carries must not stand for the
    # same expression outside, so block() restores these on leaving (and rewind() too).
    _SCOPED = ("_local_arrays", "_assigned")

    def __init__(self):
        self.lines: list[str] = []
        self.tables: list[tuple[str, str, list[str]]] = []  # (C type, name, initialisers)
        self._table_names: dict[tuple, str] = {}
        self._local_arrays: dict[tuple, str] = {}
        # Common-subexpression elimination: (C type, expression) -> the local already holding it.
        # Every statement is a pure `const` definition, so an identical one is the same value.
        self._assigned: dict[tuple[str, str], str] = {}
        self._count = 0
        # Floats (T) the statements compute, and for every integer or bool local the floats it
        # was computed from: a value read at that index must depend on them for the sparsity
        # tracer, whose integers carry no dependencies.
        self.floats: set[str] = set()
        self.index_deps: dict[str, frozenset[str]] = {}
        # Whether a scatter at run-time indices may write a local array at the computed index
        # (scatters.py): the adjoint's vjps, whose outputs accumulate (an addition at a run-time
        # index runs in SIMD lanes as math.hpp's scatter_add; a guarded write does not).
        self.indexed_writes = False
        # The [first, end) range of p holding shared parameters, while emitting the function
        # that runs in SIMD lanes (the rhs; model_struct.generate); None otherwise.
        self.shared_params: tuple[int, int] | None = None

    def fresh(self, prefix="v") -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def render(self, elem, dtype) -> str:
        return elem if isinstance(elem, str) else literal(elem, dtype)

    def assign(self, ctype: str, expr: str) -> str:
        """The name of a local ``const ctype name = expr;``, reusing an identical earlier one."""
        key = (ctype, expr)
        if key in self._assigned:
            return self._assigned[key]
        name = self.fresh()
        self._assigned[key] = name
        self.lines.append(f"const {ctype} {name} = {expr};")
        if ctype == "T":
            self.floats.add(name)
        else:
            self.index_deps[name] = self.deps_of(expr)
        return name

    def variable(self, ctype: str, init: str) -> str:
        """A mutable local (a loop carry), never shared with another expression. An integer or
        bool one gets its dependencies from the caller, in ``index_deps``."""
        name = self.fresh("c")
        self.lines.append(f"{ctype} {name} = {init};")
        if ctype == "T":
            self.floats.add(name)
        else:
            self.index_deps[name] = frozenset()
        return name

    @contextlib.contextmanager
    def block(self, head: str):
        """Statements emitted inside go into ``head { ... }`` and are local to it."""
        _, saved = self.mark()
        self.lines.append(f"{head} {{")
        start = len(self.lines)
        try:
            yield
        finally:
            self.lines[start:] = ["  " + line for line in self.lines[start:]]
            self.lines.append("}")
            for key, cache in saved.items():
                setattr(self, key, cache)

    def mark(self):
        """A point to rewind() to: statements emitted after it can be taken back."""
        return len(self.lines), {key: dict(getattr(self, key)) for key in self._SCOPED}

    def rewind(self, mark):
        """Take back the statements emitted since ``mark`` (tables stay: they are shared)."""
        count, caches = mark
        del self.lines[count:]
        for key, cache in caches.items():
            setattr(self, key, cache)

    def deps_of(self, expr: str) -> frozenset[str]:
        """The floats an expression was computed from, through integer and bool locals."""
        deps: set[str] = set()
        for token in _OPERAND.findall(expr):
            if token in self.floats:
                deps.add(token)
            elif token in self.index_deps:
                deps |= self.index_deps[token]
        return frozenset(deps)

    def table(self, ctype: str, initialisers: list[str]) -> str:
        """The name of a static table holding these values, emitted once however often used."""
        key = (ctype, tuple(initialisers))
        if key not in self._table_names:
            name = self.fresh("table")
            self.tables.append((ctype, name, list(initialisers) or ["0"]))
            self._table_names[key] = name
        return self._table_names[key]

    def local_array(self, ctype: str, items: list[str]) -> str:
        """The name of a local array of these elements, declared once however often read."""
        key = (ctype, tuple(items))
        if key not in self._local_arrays:
            name = self.fresh("local")
            self.lines.append(f"const {ctype} {name}[{len(items)}] = {{{', '.join(items)}}};")
            self._local_arrays[key] = name
        return self._local_arrays[key]
