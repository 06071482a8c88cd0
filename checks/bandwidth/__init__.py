"""Measured memory bandwidth (CPU and GPU) against the memory's specification."""
