"""What can end a step or an episode, kept apart by whose fault it is.

`InfraError` and its subclasses are the infrastructure's (env, model server,
evaluator): the attempt ends as outcome "error" and the queue retries the
pair, except for a task the env refuses outright (`TaskRefused`). `ActionRefused` is the agent's: the env understood the request and
refused the action, so it is part of the episode. `Stopped` is the run's.
"""


class InfraError(Exception):
    """A remote service (env, model server, evaluator) failed; not the agent's fault."""

    stop_reason = "env_error"


class ModelError(InfraError):
    """The model server failed (after retries, on every endpoint)."""

    stop_reason = "model_error"


class TaskRefused(InfraError):
    """The env refused to set up the task (HTTP 400 to allocate): retrying cannot help."""

    stop_reason = "bad_task"


class ActionRefused(Exception):
    """The env refused an action as invalid (HTTP 400): the agent's mistake."""


class Stopped(Exception):
    """The run is stopping (Ctrl-C): end the episode as interrupted."""
