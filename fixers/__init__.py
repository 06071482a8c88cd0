"""Built-in fixers: fixers/<feature>.py holds the fixers of checks/<feature>/, discovered by the registry."""
