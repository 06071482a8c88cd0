"""The application layer between the CLI and the engine: typed requests in, a Report out. Running
checks, fixing, and the re-check after a fix all go through here; confirmation and output are
injected, so every path is testable in process."""
