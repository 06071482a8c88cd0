"""The contract a fixer implements: one module in fixers/ (or a plugin) per feature that has fixes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from .findings import Applicability, Finding, FixableCode, FixParams, P

if TYPE_CHECKING:
    from ..fixes.actions import FixPlan
    from .context import Context


class Fixer:
    """Turns a finding into a FixPlan of actions; plan() must not change anything.

    claims maps every code this fixer acts on (the FixableCode constants) to how far its fix may be
    trusted; takes lists the params type of each action it knows. The registry checks when it loads
    that each code declaring a fix is claimed by exactly one fixer, that the fixer takes the params
    type the code declares, and that every claimed code exists and declares a fix.
    """

    name: ClassVar[str]
    claims: ClassVar[Mapping[FixableCode[FixParams], Applicability]] = {}
    takes: ClassVar[tuple[type[FixParams], ...]] = ()

    def plan(self, finding: Finding, ctx: Context) -> FixPlan:
        raise NotImplementedError

    @staticmethod
    def params(finding: Finding, kind: type[P]) -> P:
        """The params the check attached, as the type this action takes (a finding without a fix
        never reaches a fixer; the registry proved the code's params type is one this fixer takes)."""
        params = finding.fix.params if finding.fix is not None else None
        if not isinstance(params, kind):
            raise TypeError(f"{finding.code} carries {type(params).__name__}, not {kind.__name__}")  # untranslated: a programmer's error
        return params
