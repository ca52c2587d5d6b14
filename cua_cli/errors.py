"""Every error cua raises on purpose, by whose fault it is.

    CuaError                  expected and explained: the CLI prints the message, exit 1
      InputError              config, task files, arguments, run folders given: exit 2
        ConfigError           a config file or key
        GpuSpecError          a --gpus or --tp value
        LayoutError           a results folder no reader knows
        ReportError           a run `cua view` cannot show, or a report folder it cannot use
        UnreadableRun         a run whose scheduled or episodes file is there but no regular file
        UnwritableRun         a run file or folder cua would write through: a link, a FIFO, a folder
      FleetError              the fleet could not be started, reloaded or stopped
      FleetFileError          a fleet file that is missing or not one
      SinkUnavailable         a sink that cannot take trajectories now (a database down)
      EpisodeEnd              ends an episode with its own stop reason, outcome "error" (but one)
        InfraError            a remote service failed: retried by the queue
          EnvError              env_error
          ModelError            model_error
          EvalError             eval_error
        BadTask               bad_task: a task that cannot be played, never retried
          TaskRefused           ... because the env refused to set it up
        EpisodeTimeout        timeout: the episode deadline
        DesktopLimit          desktop_limit: a desktop hit a limit of its host; outcome "failure"
        Stopped               interrupted: the run is stopping (Ctrl-C)
        Abandoned             abandoned: a person who took the episode over ended it unscored
      AgentMistake            the agent's: part of the episode, never outcome "error"
        ParseError            an answer that does not parse
        ActionRefused         an action the env understood and refused

Anything else is a bug in cua: it keeps its traceback and is never relabelled
as one of these.
"""


class CuaError(Exception):
    """An error cua expects and explains."""

    exit_code = 1


class InputError(CuaError):
    """Bad input from the user: a config, task file, argument or folder (exit 2, like usage errors)."""

    exit_code = 2


class ConfigError(InputError):
    """Bad config: the message names the file and the key."""


class GpuSpecError(InputError):
    """A --gpus or --tp value that names no GPU groups."""


class LayoutError(InputError):
    """A results folder that is none of the layouts `cua stats` reads."""


class ReportError(InputError):
    """A run that cannot be reported on, or a report folder that cannot be used: bad input."""


class UnreadableRun(InputError):
    """A run file that is there but cannot be read as one (a link, a FIFO, a folder)."""


class UnwritableRun(InputError):
    """A file or folder of a run that cua would have to write through (a link, a FIFO, a file where a
    folder is due): nothing is written, so nothing lands outside the run."""


class FleetError(CuaError):
    """The fleet could not be started, reloaded or stopped as asked."""


class FleetFileError(CuaError):
    """A fleet file that is missing or not one."""


class SinkUnavailable(CuaError):
    """The sink cannot take trajectories now (a database down): try again later."""


class EpisodeEnd(CuaError):
    """Ends an episode as outcome "error" with `stop_reason`."""

    stop_reason = "env_error"


class InfraError(EpisodeEnd):
    """A remote service (env, model server, evaluator) failed: not the agent's fault."""


class EnvError(InfraError):
    """The env failed: connection, timeout, 429/5xx, or an answer outside its protocol."""


class ModelError(InfraError):
    """The model server failed (after retries, on every endpoint)."""

    stop_reason = "model_error"


class EvalError(InfraError):
    """Scoring the ended episode failed."""

    stop_reason = "eval_error"


class BadTask(EpisodeEnd):
    """A task that cannot be played as given: no retry would change that."""

    stop_reason = "bad_task"


class TaskRefused(BadTask):
    """The env refused to set up the task (HTTP 400 or 422 to the allocation)."""


class EpisodeTimeout(EpisodeEnd):
    """The episode deadline passed."""

    stop_reason = "timeout"


class DesktopLimit(EpisodeEnd):
    """The desktop hit a limit of its host (memory, processes, disk) and was stopped: the episode ends
    as a failure (what ran there was the agent's doing), with a stop reason of its own so that it is
    counted apart, and is not tried again."""

    stop_reason = "desktop_limit"

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Stopped(EpisodeEnd):
    """The run is stopping (Ctrl-C, or the rollout is gone): end the episode as interrupted."""

    stop_reason = "interrupted"

    def __init__(self, message: str = "the run was stopped"):
        super().__init__(message)


class Abandoned(EpisodeEnd):
    """A person who took the episode over (`cua watch --takeover`) ended it without a verdict: not the
    agent's failure nor the infrastructure's, and not tried again."""

    stop_reason = "abandoned"


class AgentMistake(CuaError):
    """The agent's own mistake: recorded on the step, and the model is asked again."""

    stop_reason = "parse_error"


class ParseError(AgentMistake, ValueError):
    """The model's answer does not parse (a ValueError too: it is bad text)."""


class ActionRefused(AgentMistake):
    """The env understood the action and refused it (HTTP 400 or 422)."""

    stop_reason = "action_refused"
