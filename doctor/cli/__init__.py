"""The command line: parses and validates options, calls the application layer, renders."""
