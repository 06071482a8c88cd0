"""The decode budget of each --model on this host: memory fit with headroom, the limits, the tokens/s
ceiling, and this host's calibrated llama.cpp prediction."""
