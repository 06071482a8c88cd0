"""`decode-doctor estimate`: a serving plan for a model on a device (or N of them), with the engine
command lines that respect its limits."""
