"""States in one place (issue 50): every state, outcome, verdict and severity is a labelled Enum that
carries its words and its properties (engine/findings.py), and every output's list is derived from it.
A member added there appears in the text, the metrics, merge's cells, the schema's enums, the
dashboard and the README, or one of these tests fails naming the place that lists it by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from decode_doctor import i18n
from decode_doctor.engine.findings import (
    FAIL_ON_LEVELS,
    Applicability,
    CheckResult,
    Finding,
    NotJudged,
    Outcome,
    Severity,
    State,
    Verdict,
)
from decode_doctor.reports import fleet as fleet_module
from decode_doctor.reports.compare import Difference
from decode_doctor.reports.html import render_html
from decode_doctor.reports.markdown import markdown
from decode_doctor.reports.prometheus import render_prometheus
from decode_doctor.reports.report import Report
from decode_doctor.reports.text import SEVERITY_STYLES, plain_text, state_word, summary_line
from decode_doctor.reports.view import build_view, outcome_of

from .conftest import REPO

DOCTOR = REPO / "doctor"
SCHEMA = DOCTOR / "schema" / "report-v2.schema.json"
DASHBOARD = REPO / "deploy" / "grafana" / "decode-doctor-fleet.json"
RULES = [REPO / "deploy" / "prometheus" / "decode-doctor.rules.yml", REPO / "deploy" / "prometheus-operator" / "prometheusrule.yaml"]
RULE_TESTS = REPO / "deploy" / "prometheus" / "decode-doctor.rules.test.yml"
PO = DOCTOR / "locale" / "zh_CN" / "LC_MESSAGES" / "decode_doctor.po"
LABELLED = (State, Outcome, Verdict, Severity, fleet_module.Stale)
INCOMPLETE = [o.value for o in Outcome if o.incomplete]


def values(kind: type) -> list[str]:
    return [member.value for member in kind]


# --- the Enums themselves -----------------------------------------------------------------------


def test_every_state_has_the_outcome_of_its_name_and_shares_its_words_and_properties():
    for state in State:
        outcome = Outcome[state.name]  # a state without an outcome of its name fails here
        assert state.outcome is outcome
        assert (state.label, state.english, state.incomplete, state.ended) == (
            outcome.label,
            outcome.english,
            outcome.incomplete,
            outcome.ended,
        )
    assert State.TIMED_OUT.value == "timed out" and State.TIMED_OUT.outcome.value == "timed_out"  # schema v2's values stay


def test_one_value_is_one_word_whichever_enum_holds_it():
    words: dict[str, set[str]] = {}
    for kind in (State, Outcome, Verdict):
        for member in kind:
            words.setdefault(member.value, set()).add(member.english)
    assert {value: said for value, said in words.items() if len(said) > 1} == {}


def test_machine_values_are_label_safe():
    for kind in (Outcome, Verdict, Severity, fleet_module.Stale):
        for member in kind:
            assert re.fullmatch(r"[a-z][a-z_]*", member.value), (kind.__name__, member)


def test_every_word_has_its_chinese_translation_in_the_catalog():
    with open(PO, "rb") as handle:
        catalog = read_po(handle)
    for kind in LABELLED:
        for member in kind:
            message = catalog.get(member.english)
            assert message is not None and message.string and message.string != member.english, (kind.__name__, member)


def test_an_unknown_value_is_an_error_never_shown_raw():
    with pytest.raises(ValueError):
        state_word("fatal")
    with pytest.raises(ValueError):
        fleet_module._cell_text("fatal")
    for kind in (State, Outcome, Verdict):
        for member in kind:
            assert state_word(member.value) == member.label


def test_incomplete_is_one_definition_read_by_results_views_and_verdicts():
    assert [v for v in Verdict if v.incomplete] == [Verdict.INCOMPLETE]
    assert fleet_module.STALE.incomplete
    for state in State:
        result = CheckResult("c", state, 0.0)
        assert result.complete is not state.incomplete
        assert CheckResult("c", state, 0.0, not_judged=[NotJudged("x", "y")]).complete is False
        view = build_view(Report([result], [], [], {}))
        assert view.results[0].complete is result.complete
        assert view.verdict is (Verdict.INCOMPLETE if state.incomplete else Verdict.READY)
        assert outcome_of(state, 0, False, False) is (state.outcome if state.ended else Outcome.PASSED)
    assert Verdict.of(False, True) is Verdict.INCOMPLETE and Verdict.of(True, True) is Verdict.FINDINGS
    assert Verdict.of(True, False) is Verdict.READY


def test_each_verdict_has_its_exit_code():
    assert {v.value: v.exit_code for v in Verdict} == {"ready": 0, "findings": 1, "incomplete": 3}


# --- no hand list of words ----------------------------------------------------------------------


def test_no_hand_list_of_state_or_severity_words_is_left():
    """The words are marked for translation where the members are defined, and nowhere else in doctor/."""
    homes = {DOCTOR / "engine" / "findings.py", DOCTOR / "reports" / "fleet.py"}
    marked = re.compile(r"\bN_\(\s*\"(" + "|".join(re.escape(m.english) for k in LABELLED for m in k) + r")\"\s*\)")
    stray = []
    for path in sorted(DOCTOR.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if re.search(r"\b(STATE|SEVERITY)_WORDS\b|LEGACY_STATES", text):
            stray.append(f"{path.relative_to(REPO)}: a hand list of words")
        if path not in homes and marked.search(text):
            stray.append(f"{path.relative_to(REPO)}: {marked.search(text).group(0)}")  # type: ignore[union-attr]
    assert stray == []


def test_the_terminal_styles_every_severity():
    assert set(SEVERITY_STYLES) == set(Severity)


# --- the report's schema ------------------------------------------------------------------------


def test_the_schema_enums_are_the_enums():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    defs, summary = schema["$defs"], schema["properties"]["summary"]["properties"]
    result = defs["result"]["properties"]
    assert defs["severity"]["enum"] == values(Severity)
    assert result["state"]["enum"] == values(State)
    assert result["outcome"]["enum"] == values(Outcome)
    assert summary["checks"]["required"] == values(State)
    assert summary["outcome"]["enum"] == values(Verdict)
    assert summary["exit_code"]["enum"] == sorted({v.exit_code for v in Verdict})
    assert summary["fail_on"]["enum"] == list(FAIL_ON_LEVELS)
    applicability = defs["finding"]["properties"]["fix"]["oneOf"][1]["properties"]["applicability"]
    assert applicability["enum"] == values(Applicability)


# --- the dashboard, the rules and the README ----------------------------------------------------


def _exprs(obj: object) -> list[str]:
    if isinstance(obj, dict):
        return [e for key, value in obj.items() for e in ([value] if key == "expr" else _exprs(value))]
    if isinstance(obj, list):
        return [e for value in obj for e in _exprs(value)]
    return []


def _label_values(text: str, metric: str, label: str) -> list[str]:
    """The values a selector on metric matches on label (=, =~ alternatives), as written."""
    found = []
    for selector in re.findall(re.escape(metric) + r"\{([^}]*)\}", text):
        for _op, value in re.findall(r"\b" + label + r'\s*(=~?)\s*\\?"([^"\\]*)\\?"', selector):
            found.extend(value.split("|"))
    return found


def test_the_dashboards_incomplete_regex_is_the_incomplete_outcomes():
    exprs = _exprs(json.loads(DASHBOARD.read_text(encoding="utf-8")))
    regexes = [m for e in exprs for m in re.findall(r'decode_doctor_check_state\{[^}]*state=~"([^"]*)"', e)]
    assert regexes == ["|".join(INCOMPLETE)]


@pytest.mark.parametrize("path", [DASHBOARD, *RULES, RULE_TESTS], ids=lambda p: p.name)
def test_every_state_verdict_and_severity_a_query_names_is_one_of_the_enums(path: Path):
    text = path.read_text(encoding="utf-8")
    named = {
        "state": _label_values(text, "decode_doctor_check_state", "state"),
        "verdict": _label_values(text, "decode_doctor_verdict", "verdict") + _label_values(text, "decode_doctor_verdict:sum", "verdict"),
        "severity": _label_values(text, "decode_doctor_findings", "severity")
        + _label_values(text, "decode_doctor_findings_by_severity", "severity"),
    }
    known = {"state": values(Outcome), "verdict": values(Verdict), "severity": values(Severity)}
    assert {label: [v for v in found if v not in known[label]] for label, found in named.items()} == {k: [] for k in named}


def test_the_incomplete_alert_fires_on_the_incomplete_verdict():
    for path in RULES:
        assert _label_values(path.read_text(encoding="utf-8"), "decode_doctor_verdict", "verdict") == [
            v.value for v in Verdict if v.incomplete
        ], path.name


def _readme_row(metric: str) -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith(f"| `{metric}` |"))
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_the_readmes_metric_rows_list_the_enums():
    labels = _readme_row("decode_doctor_check_state")[1]
    assert labels.split("`state` = ")[1].split(", ") == values(Outcome)
    assert _readme_row("decode_doctor_verdict")[1].split("`verdict` = ")[1].split(", ") == values(Verdict)
    codes = re.search(r"\(([\d, ]+)\)", _readme_row("decode_doctor_exit_code")[2])
    assert codes is not None and [int(c) for c in codes.group(1).split(", ")] == sorted({v.exit_code for v in Verdict})


# --- every output derives its list from the Enums -------------------------------------------------


def _view_of_every_state():
    results = [CheckResult(f"check-{state.name.lower()}", state, 0.5, reason=f"why {state.name}") for state in State]
    finding = Finding("TST001", "check-findings", Severity.WARNING, "title", "message")
    findings = [finding, *(Finding(f"TST{i:03}", "check-findings", s, "title", "message") for i, s in enumerate(Severity, 2))]
    return build_view(Report(results, findings, [], {"host": "h", "started": "2026-01-01T00:00:00+00:00"}))


@pytest.mark.parametrize("language", [i18n.ENGLISH, i18n.CHINESE])
def test_the_text_markdown_and_html_say_every_state_and_severity_in_its_word(language: str):
    i18n.use(language)
    view = _view_of_every_state()
    text, md, page = plain_text(view, verbose=True), markdown(view), render_html(view)
    summary = summary_line(view)
    for state in State:
        assert i18n._("{count} {state}", count=1, state=state.label) in summary, state
        assert f"| check-{state.name.lower()} | {state.label} |" in md, state
        assert f"<td>check-{state.name.lower()}</td><td>{state.label}</td>" in page, state
        if state.ended:
            note = i18n._("{check}: {state} — {reason}", check=f"check-{state.name.lower()}", state=state.label, reason=f"why {state.name}")
            assert note in text, state
    for severity in Severity:
        assert f" {severity.label} " in text and f"| {severity.label} |" in md, severity
        assert f'<td class="{severity.value}">{severity.label}</td>' in page, severity
        assert re.search(rf"[}}>]\.{severity.value}\{{color:", page), f"the HTML report's style has no .{severity.value}"


def test_the_metrics_name_every_outcome_verdict_and_severity():
    metrics = render_prometheus(_view_of_every_state())

    def labelled(name: str, label: str) -> list[str]:
        return re.findall(rf'^{name}\{{[^}}]*\b{label}="([^"]*)"', metrics, re.M)

    checks = len(State)
    assert labelled("decode_doctor_check_state", "state") == values(Outcome) * checks
    assert labelled("decode_doctor_verdict", "verdict") == values(Verdict)
    assert labelled("decode_doctor_findings_by_severity", "severity") == values(Severity)
    assert re.search(r'^decode_doctor_verdict\{[^}]*verdict="incomplete"\} 1$', metrics, re.M)


def _host(name: str, results: list[dict], findings: list[dict] | None = None, **summary: object) -> dict:
    run = {"host": name, "started": "2026-01-01T00:00:00+00:00"}
    return {"run": run, "results": results, "findings": findings or [], "summary": summary}


@pytest.mark.parametrize("language", [i18n.ENGLISH, i18n.CHINESE])
def test_merge_says_every_outcome_and_status_in_its_word(language: str):
    i18n.use(language)
    hosts = [(f"{o.value}.json", _host(f"host-{o.value}", [{"check": "c", "outcome": o.value}])) for o in Outcome]
    merged = fleet_module.fleet(hosts, now=1_767_225_600.0)
    text = fleet_module.render_fleet(merged, "text")
    rows = {line.split()[0]: line for line in text.splitlines()[1 : 1 + len(Outcome)]}
    for outcome in Outcome:
        row = rows[f"host-{outcome.value}"]
        assert row.rstrip().endswith(outcome.label), (outcome, row)
        status = Verdict.INCOMPLETE if outcome.incomplete else Verdict.READY
        assert merged.status(next(r for r in merged.hosts if r.host == f"host-{outcome.value}")) is status
        assert status.label in row
    totals = merged.totals()
    statuses = [*values(Verdict), fleet_module.STALE.value]
    assert [key for key in totals if key in statuses] == statuses
    old = fleet_module.fleet(hosts, now=1_767_229_200.0, max_age_s=60)  # every report is an hour old: stale
    assert all(old.status(row) is fleet_module.STALE for row in old.hosts) and old.exit_code == Verdict.INCOMPLETE.exit_code
    assert fleet_module.STALE.label in fleet_module.render_fleet(old, "text")


def test_merge_reads_an_old_reports_states_by_the_documented_legacy_mapping():
    for state in State:
        findings = [{"check": "c", "severity": "info", "code": "TST001"}] if state is State.FINDINGS else []
        row = fleet_module.host_row("h", "h.json", _host("h", [{"check": "c", "state": state.value}], findings))
        expected = state.outcome if state.ended else Outcome.FINDINGS if findings else Outcome.PASSED
        assert row.cells["c"] == ("info: TST001" if findings else expected.value), state
        assert row.verdict is Verdict.of(not expected.incomplete, bool(findings)), state
    unknown = fleet_module.host_row("h", "h.json", _host("h", [{"check": "c", "state": "exploded"}]))
    assert unknown.cells["c"] == Outcome.CRASHED.value and unknown.verdict is Verdict.INCOMPLETE


def test_merges_html_styles_only_known_classes_and_every_incomplete_one():
    page = fleet_module.render_fleet(fleet_module.fleet([], now=0.0), "html")
    styled: dict[str, str] = {}
    for selectors, style in re.findall(r"((?:\.[a-z_]+,?)+)\{([^}]*)\}", page):
        for name in selectors.strip(",").split(","):
            styled[name.lstrip(".")] = style
    known = {*values(Outcome), *values(Verdict), *values(Severity), fleet_module.STALE.value}
    assert set(styled) <= known
    incomplete = {*INCOMPLETE, *(v.value for v in Verdict if v.incomplete), fleet_module.STALE.value}
    assert incomplete <= set(styled)
    assert {styled[name] for name in incomplete} <= {styled["error"], styled["warning"]}  # never the colour of ready


@pytest.mark.parametrize("language", [i18n.ENGLISH, i18n.CHINESE])
def test_diff_says_every_state_in_its_word_and_an_absent_check_as_not_recorded(language: str):
    i18n.use(language)
    run = {"file": "a", "host": "h", "started": "2026-01-01T00:00:00+00:00"}
    states = {state.value: (state.value, "absent") for state in State}
    lines = Difference(run, run, {}, {}, [], [], states).lines()
    for state in State:
        assert i18n._("state    {check}: {before} → {after}", check=state.value, before=state.label, after=i18n._("not recorded")) in lines
        assert "absent" not in "\n".join(lines)
