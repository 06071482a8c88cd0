"""Text encodings of model config and tokenizer files: loaders read them as UTF-8, and nothing else."""

from .check import Encodings, EncodingsFacts, walk
from .textenc import Verdict, converted_bytes, decide, parses

__all__ = ["Encodings", "EncodingsFacts", "Verdict", "converted_bytes", "decide", "parses", "walk"]
