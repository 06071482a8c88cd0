"""A running OpenAI-compatible server: TTFT and TPOT measured as percentiles (decode-doctor bench),
judged against this host's ceiling, and the server's own metrics read for what they say."""
