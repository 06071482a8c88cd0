"""The context a model was trained for, what its rope_scaling stretches it to, and --context beyond it."""

from __future__ import annotations

import json
from typing import Any

from decode_doctor.checks.budget.contract import BudgetOptions
from decode_doctor.i18n import _

from .codes import (
    MDL010,
    MDL011,
    MDL012,
    MDL013,
)
from .review import ReviewBase
from .values import DEFAULT_ROPE_THETA, ROPE_TYPES, as_count, as_number, context_limit


class ContextReview(ReviewBase):
    def context(self) -> tuple[int | None, int | None]:
        text = self.config
        trained, limit = context_limit(text)
        meta = self.gguf.meta if self.gguf else {}
        arch = meta.get("general.architecture")
        gguf_context = as_count(meta.get(f"{arch}.context_length"))
        if trained is None and gguf_context:
            trained = limit = gguf_context
        self._rope_scaling(text)
        served = self.ctx.option(BudgetOptions).context
        if served and limit and served > limit:
            source = "max_position_embeddings" if text.get("max_position_embeddings") else _("the GGUF's context_length")
            if limit > (trained or 0):
                stretched = _(" (rope_scaling stretches it to {limit:,})", limit=limit)
            else:
                stretched = _(" and no rope_scaling stretches it")
            message = _(
                "{model}: --context {served:,} is beyond the {trained:,} tokens of its {source}{stretched}; serve at most {limit:,}.",
                model=self.place.given.name,
                served=served,
                trained=trained,
                source=source,
                stretched=stretched,
                limit=limit,
            )
            self.add(MDL010, message, served=served, trained=trained, limit=limit)
        theta = as_number(text.get("rope_theta"))
        freq_key = f"{arch}.rope.freq_base"
        gguf_theta = as_number(meta.get(freq_key))
        if text and gguf_theta is not None and (theta or DEFAULT_ROPE_THETA) != gguf_theta:
            if theta:
                said = "rope_theta " + format(theta, "g")
            else:
                said = _("no rope_theta (transformers' default {theta})", theta=format(DEFAULT_ROPE_THETA, "g"))
            message = _(
                "{model}: config.json has {said}, the GGUF's {key} is {value}.",
                model=self.place.given.name,
                said=said,
                key=freq_key,
                value=format(gguf_theta, "g"),
            )
            self.add(MDL012, message, config_rope_theta=theta, gguf_freq_base=gguf_theta)
        window = as_count(text.get("sliding_window"))
        if window and trained and window > trained and text.get("use_sliding_window") is not False:
            message = _(
                "{model}: sliding_window {window:,} is larger than max_position_embeddings {trained:,}.",
                model=self.place.given.name,
                window=window,
                trained=trained,
            )
            self.add(MDL013, message, sliding_window=window, max_position_embeddings=trained)
        return trained, limit

    def _rope_scaling(self, text: dict[str, Any]) -> None:
        scaling = text.get("rope_scaling")
        if scaling is None:
            return
        name = self.place.given.name
        if not isinstance(scaling, dict):
            wrong = _("{model}: rope_scaling is {kind}, not an object.", model=name, kind=type(scaling).__name__)
            self.add(MDL011, wrong, rope_scaling=str(scaling)[:200])
            return
        named = [k for k in (scaling.get("rope_type"), scaling.get("type")) if k is not None]
        problems = [_("its type is {value}, not a name", value=json.dumps(k)[:40]) for k in named if not isinstance(k, str)]
        kinds = {k for k in named if isinstance(k, str)}
        if problems:
            pass
        elif not kinds:
            problems.append(_("it names no type"))
        elif len(kinds) > 1:
            problems.append(_("rope_type and type disagree ({kinds})", kinds=", ".join(sorted(map(str, kinds)))))
        elif not kinds <= ROPE_TYPES:
            problems.append(_("type {kind} is not one engines know", kind=repr(next(iter(kinds)))))
        kind = next(iter(kinds), None)
        factor = scaling.get("factor")
        number = as_number(factor)
        if kind in ("linear", "dynamic", "yarn", "llama3") and not (number is not None and number >= 1):
            problems.append(_("factor is {value}, not a number of at least 1", value=repr(factor)))
        for key in ("factor", "original_max_position_embeddings"):
            value = scaling.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 1 << 40:
                problems.append(_("{key} is a {digits}-digit number", key=key, digits=len(str(abs(value)))))
        original = as_count(scaling.get("original_max_position_embeddings"))
        trained = as_count(text.get("max_position_embeddings"))
        if original and trained and original > trained:
            problems.append(
                _(
                    "original_max_position_embeddings {original:,} is above max_position_embeddings {trained:,}",
                    original=original,
                    trained=trained,
                )
            )
        if problems:
            inconsistent = _("{model}: rope_scaling is inconsistent: {problems}.", model=name, problems=_("; ").join(problems))
            self.add(MDL011, inconsistent, rope_scaling=scaling)
