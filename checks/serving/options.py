"""The serving check's options: the endpoint it reads alone (check --endpoint), or that bench measured."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Options, option


@dataclass(frozen=True)
class ServingOptions(Options):
    endpoint: str | None = option(
        "--endpoint", "An OpenAI-compatible server (http://host:port/v1) whose /metrics to diagnose.", metavar="URL"
    )
    api_key_env: str = option(
        "--api-key-env",
        "The environment variable holding the server's API key [default: OPENAI_API_KEY].",
        default="OPENAI_API_KEY",
        metavar="VAR",
    )
