"""Built-in checks: one module per check, discovered by the engine."""
