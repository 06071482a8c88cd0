"""States as types: an Enum whose value is what machines read (JSON, metrics, state files) and whose
label is what people read, marked for translation where the member is defined, so no hand-kept list
of words stands between a new state and the Chinese interface.

    class Source(Labelled):
        MEASURED = "measured", N_("measured")
        GIVEN = "given", N_("given with --bandwidth")

`Source.MEASURED == "measured"` (a str: JSON and comparisons with stored values keep working), and
`Source.MEASURED.label` is the label in the language of the command.
"""

from __future__ import annotations

import enum

from . import _


class Labelled(str, enum.Enum):
    """A state with a machine value and a people label (see the module's docstring)."""

    _label: str

    def __new__(cls, value: str, label: str = "") -> Labelled:
        member = str.__new__(cls, value)
        member._value_ = value
        member._label = label or value
        return member

    @property
    def label(self) -> str:
        """The label in the language of the command."""
        return _(self._label)

    @property
    def english(self) -> str:
        """The label as written in the code (the catalog's key)."""
        return self._label

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def parse(cls, value: object) -> Labelled | None:
        """The member whose value is value (a stored string), None for anything else."""
        return next((member for member in cls if member.value == value), None)
