"""Plumbing with no knowledge of cua's domain: HTTP, retries, signals, processes, files, text."""
