"""The contract a fixer implements: one module in fixers/ (or a plugin) per feature that has fixes."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from .findings import Applicability, Finding

if TYPE_CHECKING:
    from ..fixes.actions import Plan
    from .context import Context


class Fixer:
    """Turns a finding into a Plan of actions; plan() must not change anything.

    claims maps every code this fixer acts on to how far its fix may be trusted. The registry checks
    when it loads that each code declaring a fix (Code.fix_safety) is claimed by exactly one fixer,
    and that every claimed code exists and declares one.
    """

    name: ClassVar[str]
    claims: ClassVar[dict[str, Applicability]] = {}

    def plan(self, finding: Finding, ctx: Context) -> Plan:
        raise NotImplementedError
