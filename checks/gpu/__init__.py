"""The NVIDIA GPU stack: driver, CUDA, toolkit, PyTorch and cuDNN, and whether they work together."""
