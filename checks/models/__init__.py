"""The decode budget: a model's memory need at a context and concurrency, and its tokens/s ceiling
from the measured bandwidth; `decode-doctor estimate` (commands.py) explores it."""
