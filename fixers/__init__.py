"""Built-in fixers: one module per fixer, discovered by the engine."""
