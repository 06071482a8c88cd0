"""The decode budget: a model's memory need at a context and concurrency, and its tokens/s ceiling
from the measured bandwidth; `decode-doctor estimate` (commands.py) explores it."""

from .budget import KV_DTYPE_BYTES, Budget, Device, compute_budget, kv_bytes_per_token
from .check import BudgetFacts, DecodeBudget, ModelBudget, devices
from .modelfiles import ModelFormatError, ModelInfo, read_gguf, read_model, read_safetensors_header

__all__ = [
    "KV_DTYPE_BYTES",
    "Budget",
    "BudgetFacts",
    "DecodeBudget",
    "Device",
    "ModelBudget",
    "ModelFormatError",
    "ModelInfo",
    "compute_budget",
    "devices",
    "kv_bytes_per_token",
    "read_gguf",
    "read_model",
    "read_safetensors_header",
]
