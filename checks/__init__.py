"""Built-in checks: one package per feature (its checks, the domain code only they use, its facts),
discovered by the registry. A feature's fixer is fixers/<feature>.py."""
