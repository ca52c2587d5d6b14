"""Registries name their implementations "module:Class", so choosing one by name imports only it."""

from importlib import import_module


def load(entry: str):
    """The class an entry such as "cua_cli.envs.env_cluster:ClusterEnv" names."""
    module, _, name = entry.partition(":")
    return getattr(import_module(module), name)
