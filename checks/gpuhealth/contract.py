"""The GPU health feature's contract: per GPU, its health state and the conditions found (GpuHealthFacts),
which the decode budget, the reports and the fleet's metrics read. It imports nothing of the feature
but its codes."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import EnvRow, Facts, Metric, Sample
from decode_doctor.i18n import N_, _
from decode_doctor.i18n.labels import Labelled

from .codes import ACTIONS, GPH032, Action

MIG = GPH032  # the code a reader cites for a GPU in MIG mode (the decode budget does not size a slice)


class HealthState(Labelled):
    """A GPU's state as a person acts on it: the worst of its conditions."""

    HEALTHY = "healthy", N_("healthy")
    DEGRADED = "degraded", N_("degraded")  # slower than it should be: cooling, a link, a setting
    RESET = "reset", N_("needs a reset")  # a reset makes it whole: drain and reset
    RMA = "rma", N_("needs an RMA")  # the board is faulty


STATE_OF_ACTION = {
    Action.RMA: HealthState.RMA,
    Action.RESET: HealthState.RESET,
    Action.RESEAT: HealthState.DEGRADED,
    Action.BIOS: HealthState.DEGRADED,
    Action.COOLING: HealthState.DEGRADED,
    Action.CONFIGURE: HealthState.DEGRADED,
    Action.NONE: HealthState.HEALTHY,
}
RANK = (HealthState.HEALTHY, HealthState.DEGRADED, HealthState.RESET, HealthState.RMA)


def state_of(codes: tuple[str, ...]) -> HealthState:
    states = [STATE_OF_ACTION[ACTIONS[code]] for code in codes if code in ACTIONS]
    return max(states, key=RANK.index, default=HealthState.HEALTHY)


@dataclass(frozen=True)
class GpuHealth:
    index: int
    name: str | None
    uuid: str | None
    conditions: tuple[str, ...] = ()  # the codes found on this GPU
    held_mib: int | None = None  # GPU memory other processes hold (the engine cannot use it)
    mig: bool | None = None  # MIG enabled: an engine sees a slice

    @property
    def state(self) -> HealthState:
        return state_of(self.conditions)


@dataclass(frozen=True)
class GpuHealthFacts(Facts):
    source: str  # NVML, or the capture's kind
    gpus: tuple[GpuHealth, ...] = ()
    host_conditions: tuple[str, ...] = ()  # codes about the node, not one GPU (fabric manager, GPUs missing from the bus)

    def summary(self) -> list[str]:
        if not self.gpus:
            return []
        states = _("; ").join(_("GPU {index}: {state}", index=g.index, state=g.state.label) for g in self.gpus)
        return [_("GPU health (via {source}): {states}", source=self.source, states=states)]

    def environment(self) -> list[EnvRow]:
        if not self.gpus:
            return []
        worst = max((g.state for g in self.gpus), key=RANK.index)
        return [EnvRow(_("GPU health"), worst.label, tuple(ACTIONS))]

    def metrics(self) -> list[Metric]:
        """One series per GPU and state (1 for its state), and one per condition found: labels are the
        GPU's index and UUID, a state or a code and its action: a bounded set whatever the fleet."""
        states = tuple(
            Sample({"gpu": str(g.index), "uuid": g.uuid or "", "state": state.value}, 1 if g.state is state else 0)
            for g in self.gpus
            for state in HealthState
        )
        conditions = tuple(
            Sample({"gpu": str(g.index), "uuid": g.uuid or "", "code": code, "action": ACTIONS[code].value}, 1)
            for g in self.gpus
            for code in g.conditions
            if code in ACTIONS
        )
        conditions += tuple(
            Sample({"gpu": "", "uuid": "", "code": code, "action": ACTIONS[code].value}, 1) for code in self.host_conditions
        )
        found = [
            Metric("decode_doctor_gpu_health_state", "1 for each GPU's health state: healthy, degraded, reset (needs one) or rma.", states)
        ]
        if conditions:
            found.append(
                Metric("decode_doctor_gpu_condition", "1 for each GPU health condition found, by code and the action it needs.", conditions)
            )
        return found
