"""The report formats (kept apart from the renderers, so a command's --help imports none of them)."""

FORMATS = ("text", "json", "markdown", "html", "prometheus")
