"""Text encodings of model config and tokenizer files: loaders read them as UTF-8, and nothing else."""
