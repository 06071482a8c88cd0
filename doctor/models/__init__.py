"""Model sizing and hardware: what a model's files hold (safetensors, GGUF, configs), the architectures
they describe, the devices they run on (data/gpus.json) and the decode plans and calibrations built from
them. The estimate command and the budget, artifacts and planning checks read it."""
