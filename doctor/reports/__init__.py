"""The report and its renderings: one redacted view (view.py) rendered as text, Markdown, HTML, JSON
or Prometheus; the support bundle; reading reports back for diff and merge."""
