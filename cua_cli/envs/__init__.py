"""Clients for environment protocols."""
