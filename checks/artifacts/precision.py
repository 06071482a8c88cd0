"""Precision: torch_dtype against the stored dtypes, quantization_config against the tensors, a
--kv-dtype the engine lacks."""

from __future__ import annotations

from decode_doctor.checks.budget.contract import BudgetOptions
from decode_doctor.i18n import _

from .codes import (
    MDL020,
    MDL021,
    MDL022,
)
from .review import ReviewBase
from .values import FLOAT_DTYPES, dominant


class PrecisionReview(ReviewBase):
    def precision(self) -> None:
        name = self.place.given.name
        if self.headers:
            self._quantization(name)
        kv = self.ctx.option(BudgetOptions).kv_dtype
        if self.gguf is not None and not self.headers and kv == "fp8":
            self.add(
                MDL021,
                _("{model}: a GGUF model is served by llama.cpp, which has no fp8 KV cache; budget q8_0 with --kv-dtype int8.", model=name),
            )
        elif self.headers and kv in ("int8", "int4"):
            message = _(
                "{model}: safetensors models are served by vLLM or TGI, whose KV caches are fp16/bf16 or fp8; "
                "--kv-dtype {kv} budgets a cache they do not have.",
                model=name,
                kv=kv,
            )
            self.add(MDL021, message, kv_dtype=kv)

    def _quantization(self, name: str) -> None:
        entries = [entry for header in self.headers.values() for key, entry in header.items() if key != "__metadata__"]
        names = [key for header in self.headers.values() for key in header if key != "__metadata__"]
        dtypes = {entry["dtype"] for entry in entries}
        packed = any(n.endswith(("qweight", "weight_packed")) for n in names) or any(d.startswith("F8") for d in dtypes)
        quant = self.config.get("quantization_config")
        method = str(quant.get("quant_method") or "") if isinstance(quant, dict) else ""
        expects = {
            "gptq": lambda: any(n.endswith("qweight") for n in names),
            "awq": lambda: any(n.endswith("qweight") for n in names),
            "fp8": lambda: any(d.startswith("F8") for d in dtypes),
            "fbgemm_fp8": lambda: any(d.startswith("F8") for d in dtypes),
            "compressed-tensors": lambda: packed or "I8" in dtypes,
        }
        if method in expects and not expects[method]():
            stored = "/".join(sorted(dtypes & set(FLOAT_DTYPES))) or _("unquantized")
            message = _(
                "{model}: quantization_config says {method}, but the weights are stored {stored}, with none of its tensors.",
                model=name,
                method=method,
                stored=stored,
            )
            self.add(MDL020, message, quant_method=method, stored=sorted(dtypes))
        elif packed and not method:
            self.add(MDL020, _("{model}: the weights hold quantized tensors, but config.json has no quantization_config.", model=name))
        if packed or method:
            return
        per_shard = {shard: dominant(header) for shard, header in self.headers.items()}
        kinds = {d for d in per_shard.values() if d}
        if len(kinds) > 1:
            listing = ", ".join(f"{shard.name} {kind}" for shard, kind in sorted(per_shard.items()) if kind)
            mixed = _("{model}: the shards store different dtypes: {listing}.", model=name, listing=listing)
            self.add(MDL022, mixed, dtypes={s.name: d for s, d in per_shard.items()})
            return
        stored_as = next(iter(kinds), None)
        declared = self.config.get("torch_dtype") or self.config.get("dtype")
        if (declared, stored_as) in (("float16", "BF16"), ("bfloat16", "F16")):
            if stored_as == "BF16":
                risk = _("cast at load, they can overflow to inf (8 exponent bits down to 5)")
            else:
                risk = _("cast at load, they lose mantissa bits (10 down to 7)")
            message = _(
                "{model}: torch_dtype is {declared}, but the weights are stored {stored}: {risk}.",
                model=name,
                declared=declared,
                stored=stored_as,
                risk=risk,
            )
            self.add(MDL020, message, torch_dtype=declared, stored=stored_as)
