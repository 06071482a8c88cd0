"""The contract a check implements. A check lives in its feature package under checks/ (or a plugin)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, overload

from .facts import Facts
from .findings import Code, Finding, FixableCode, FixRef, JSONValue, NotJudged, P, Severity
from .options import OptionRef, Options, OptionValues

if TYPE_CHECKING:
    from .context import Context


class SkipCheck(Exception):
    """Raised by a check that finds at run time that it does not apply (e.g. "no NVIDIA GPU")."""


INPUTS = {"models": "--model", "images": "--images"}  # what a run is given besides options (Context.models, .images) → its flag


@dataclass(frozen=True)
class Reads:
    """Facts of another check that this one reads (ctx.facts.get(facts)), declared once: the check
    that publishes them runs first, and a selection of this check pulls that one in, unless

    - unless_option names an option that stands in for the facts when given (--bandwidth), or
    - when_input names an input (INPUTS) or an option without which the facts are not needed (a
      budget without --model).
    The registry checks every option named here when it loads.
    """

    facts: type[Facts]
    unless_option: OptionRef | None = None
    when_input: str | OptionRef | None = None

    def pulls_in(self, options: OptionValues, inputs: Mapping[str, object]) -> bool:
        if self.unless_option is not None and options.value(self.unless_option):
            return False
        if self.when_input is None:
            return True
        if isinstance(self.when_input, OptionRef):
            return bool(options.value(self.when_input))
        return bool(inputs.get(self.when_input))


@dataclass(frozen=True)
class Needs:
    """What a check needs before it can run; the engine skips it with a reason otherwise."""

    platforms: tuple[str, ...] = ()  # e.g. ("linux",); empty: any
    inputs: tuple[str | OptionRef, ...] = ()  # INPUTS, or options, that must be given: "models", OptionRef(ServingOptions, "endpoint")
    exclusive: bool = False  # timing probes: run alone, nothing beside them
    reads: tuple[Reads, ...] = ()  # the facts of other checks this one reads: ordering and pull-in follow


@dataclass
class Analysis:
    """What a check reads in a pasted text (decode-doctor analyze): findings citing their lines, and
    the facts the text holds."""

    findings: list[Finding]
    facts: Facts | None = None
    kind: str = ""  # what the text was recognised as ("nvidia-smi table", "kernel log")
    not_judged: list[NotJudged] = field(default_factory=list)  # what the text cannot show


class Check:
    """Base class. Subclasses set the class attributes and implement run()."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    looks_at: ClassVar[str] = ""  # Markdown: what it reads and judges, for the README's table (`list --format markdown`)
    codes: ClassVar[tuple[Code, ...]] = ()
    needs: ClassVar[Needs] = Needs()
    options: ClassVar[type[Options] | None] = None  # its typed options (engine.options), read with ctx.option(type)
    timeout_s: ClassVar[float] = 10.0
    facts_type: ClassVar[type[Facts] | None] = None  # what run() publishes with ctx.publish
    retired: ClassVar[dict[str, str]] = {}  # codes this check no longer emits → where they went
    pasted: ClassVar[str] = ""  # the pasted texts analyze() recognises, for `analyze`'s messages
    # Judges only the paths in ctx.scope when it is set (the re-check after a fix): its findings about
    # other paths stand from the run before, and its facts are that run's.
    scoped: ClassVar[bool] = False

    def run(self, ctx: Context) -> list[Finding]:
        raise NotImplementedError

    @classmethod
    def analyze(cls, text: str, source: str) -> Analysis | None:
        """The findings a live run would give, from a text a user pasted (None: not a text this check
        reads). Recognise the text by its content, never by its file name."""
        return None

    @classmethod
    def code(cls, code: str) -> Code:
        """The declared code of that name (for reading reports back; checks emit constants)."""
        for spec in cls.codes:
            if spec.code == code:
                return spec
        raise KeyError(f"{cls.name} declares no code {code}")  # untranslated: a programmer's error

    @overload
    def finding(
        self,
        code: FixableCode[P],
        message: str,
        *,
        evidence: Mapping[str, JSONValue] | None = None,
        path: str | None = None,
        fix: FixRef[P] | None = None,
        severity: Severity | None = None,
        sensitive: tuple[str, ...] = (),
    ) -> Finding: ...

    @overload
    def finding(
        self,
        code: Code,
        message: str,
        *,
        evidence: Mapping[str, JSONValue] | None = None,
        path: str | None = None,
        severity: Severity | None = None,
        sensitive: tuple[str, ...] = (),
    ) -> Finding: ...

    def finding(
        self,
        code: Code,
        message: str,
        *,
        evidence: Mapping[str, JSONValue] | None = None,
        path: str | None = None,
        fix: object = None,  # a FixRef of the code's params (the overloads say so to the type checker)
        severity: Severity | None = None,
        sensitive: tuple[str, ...] = (),
    ) -> Finding:
        """Builds a finding from a declared code constant, so title and severity stay in one place.

        Only a FixableCode takes a fix, and only of its params type: the type checker proves it at
        every call, so no ranking of codes at run time can attach a fix to a code without one.
        """
        spec = code
        if not isinstance(spec, Code):
            raise TypeError(f"{self.name}: finding() takes one of its Code constants, not {spec!r}")  # untranslated: a programmer's error
        if spec not in self.codes:
            raise KeyError(f"{self.name} does not declare {spec.code}")  # untranslated: a programmer's error
        if fix is not None and not isinstance(fix, FixRef):
            raise TypeError(f"{spec.code}: fix= takes a FixRef, not {type(fix).__name__}")  # untranslated: a programmer's error
        if fix is not None and not (isinstance(spec, FixableCode) and isinstance(fix.params, spec.params)):
            raise TypeError(f"{spec.code} takes no fix of {type(fix.params).__name__}")  # untranslated: a programmer's error
        return Finding(
            code=spec.code,
            check=self.name,
            severity=severity or spec.severity,
            title=spec.title,
            message=message,
            evidence=dict(evidence or {}),
            path=path,
            fix=fix,
            sensitive=sensitive,
        )
