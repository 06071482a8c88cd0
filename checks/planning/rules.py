"""vLLM's own rules for a GPU count, refused before any work with the rule that fails."""

from __future__ import annotations

from decode_doctor.i18n import _
from decode_doctor.models.info import ModelFormat
from decode_doctor.models.plan import (
    valid_tensor_sizes,
)
from decode_doctor.models.sizing import Sizing


class EstimateError(ValueError):
    """What the user asked cannot be planned (a device that is not there); the message says why."""


def check_parallel(size: Sizing, gpus: int, per_node: int, on_gpus: bool) -> None:
    """vLLM's own rules for the GPU count, refused before any work with the rule that fails: tensor
    parallel must divide the attention heads (ModelConfig.verify_with_parallel_config, at start-up),
    the KV heads must split across the ranks or replicate onto them, and the recurrent layers' heads
    divide too (QKVParallelLinear and the mixers, at model load); more GPUs than a node holds must fill
    whole nodes (one pipeline stage each)."""
    if gpus <= 1 or not on_gpus or size.format is ModelFormat.GGUF:
        return
    tensor = min(gpus, per_node)
    if gpus > per_node and gpus % per_node:
        raise EstimateError(
            _(
                "--gpus {gpus}: more than one node of {per_node} must fill whole nodes; give a multiple of {per_node}",
                gpus=gpus,
                per_node=per_node,
            )
        )
    valid = valid_tensor_sizes(size, per_node)
    if tensor in valid:
        return
    rules = tensor_rules(size, tensor)
    raise EstimateError(
        _(
            "--gpus {gpus}: vLLM cannot split this model over {tensor} tensor-parallel GPUs: {rules}; "
            "valid sizes up to {per_node}: {valid}",
            gpus=gpus,
            tensor=tensor,
            rules=_("; ").join(rules),
            per_node=per_node,
            valid=", ".join(map(str, valid)),
        )
    )


def tensor_rules(size: Sizing, tensor: int) -> list[str]:
    """Each of vLLM's rules a tensor-parallel size breaks for this model, in the engine's own words."""
    rules = []
    if size.heads and size.heads % tensor:
        rules.append(
            _(
                'it refuses to start ("Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tensor}).")',
                heads=size.heads,
                tensor=tensor,
            )
        )
    kv = size.kv_heads
    if kv and not size.mla and (kv % tensor if kv > tensor else tensor % kv):
        larger, smaller = (kv, tensor) if kv > tensor else (tensor, kv)
        rules.append(
            _(
                "its {kv} KV heads neither split evenly across {tensor} ranks nor replicate onto them: QKVParallelLinear stops the "
                'model load ("{larger} is not divisible by {smaller}")',
                kv=kv,
                tensor=tensor,
                larger=larger,
                smaller=smaller,
            )
        )
    for what, units in size.tp_units.items():
        if units % tensor:
            rules.append(
                _(
                    'its {units} {what} split across the ranks at model load ("{units} is not divisible by {tensor}")',
                    units=units,
                    what=what,
                    tensor=tensor,
                )
            )
    return rules
