"""What a translation accumulates: the body's statements and the constant tables."""

from __future__ import annotations

from shoal.ode._codegen.cpp import literal


class Emitter:
    def __init__(self):
        self.lines: list[str] = []
        self.tables: list[tuple[str, str, list[str]]] = []  # (C type, name, initialisers)
        self._count = 0

    def fresh(self, prefix="v") -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def render(self, elem, dtype) -> str:
        return elem if isinstance(elem, str) else literal(elem, dtype)

    def assign(self, ctype: str, expr: str) -> str:
        name = self.fresh()
        self.lines.append(f"const {ctype} {name} = {expr};")
        return name
