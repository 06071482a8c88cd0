"""decode-doctor: a deployment doctor for LLM decode on GPU servers and edge boards."""

__version__ = "0.1.0"
