"""What a translation accumulates: the body's statements and the constant tables."""

from __future__ import annotations

import contextlib
import re

from shoal.ode._codegen.cpp import literal

# A scalar a statement can read: a local, an element of y/p, t, or an element of a local array.
_OPERAND = re.compile(r"[A-Za-z_]\w*(?:\[\d+\])?")


class Emitter:
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

    @contextlib.contextmanager
    def scope(self):
        """Statements emitted inside a C++ block: what they define is not reused after it."""
        saved = dict(self._assigned), dict(self._local_arrays)
        try:
            yield
        finally:
            self._assigned, self._local_arrays = saved

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
