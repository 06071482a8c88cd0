"""Model artifacts: the incomplete download, the context a model was never trained for, the config that
makes generation run forever, caught before the first request."""
