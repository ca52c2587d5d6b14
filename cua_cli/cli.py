"""The `cua` command line: parse, call, format. The work lives in the modules."""

import sys

import click
from tabulate import tabulate

from .config import ConfigError, load_config
from .redact import read_secrets


class BadInput(click.ClickException):
    """Bad config or task input: exit code 2, like click's usage errors."""

    exit_code = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cua")
def main():
    """Run computer-use (GUI) agents at scale.

    \b
    Example:
      cua env-server --port 8100 &
      cua rollout configs/demo.yaml
    """


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set runner.num_envs=8 (repeatable).")
@click.option("--resume", type=click.Path(file_okay=False, exists=True), metavar="RUN_DIR",
              help="Continue this run folder; finished pairs are not re-run.")
@click.option("--watch", is_flag=True,
              help="Keep running and pick up task files dropped into the queue's pending/ folder.")
def rollout(config, overrides, resume, watch):
    """Run the episodes of CONFIG and write a run folder under results/.

    \b
    Examples:
      cua rollout configs/demo.yaml
      cua rollout configs/demo.yaml --set runner.num_envs=8 --set tasks.rollout_n=4
      cua rollout configs/demo.yaml --resume results/demo-20261121-101500
    """
    from .rollout import rollout as run_rollout

    try:
        cfg = load_config(config, overrides)
        secrets = read_secrets(cfg)
    except ConfigError as e:
        raise BadInput(str(e)) from None
    except KeyError as e:
        raise BadInput(f"{config}: environment variable {e.args[0]} (named in the config) is not set") from None
    try:
        out = run_rollout(cfg, secrets, resume, watch)
    except ConfigError as e:
        raise BadInput(str(e)) from None
    except (FileNotFoundError, RuntimeError) as e:
        raise click.ClickException(str(e)) from None
    s = out.summary
    rows = [["run", str(out.run.path)],
            ["scheduled", s["scheduled"]], ["finished", s["finished"]], ["missing", s["missing"]],
            ["success", s["success"]], ["failure", s["failure"]], ["errors", s["errors"]],
            ["success rate (of scheduled)", _pct(s["success_rate"])],
            ["success rate (of finished, no errors)", _pct(s["success_rate_finished"])],
            ["mean steps", f"{s['mean_steps']:.1f}" if s["mean_steps"] is not None else "-"],
            ["stop reasons", ", ".join(f"{k}={v}" for k, v in sorted(s["stop_reasons"].items())) or "-"],
            ["wall time", f"{out.wall_s:.1f} s"]]
    click.echo(tabulate(rows, tablefmt="simple_outline"))
    if out.crashed:
        raise click.ClickException("runner processes kept crashing; see the errors above")
    if out.interrupted:
        click.echo(f"interrupted: continue with  cua rollout {config} --resume {out.run.path}")
        sys.exit(130)


def _pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


@main.command("env-server")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8100, show_default=True, help="Port (0 picks a free one).")
@click.option("--max-envs", default=4, show_default=True, help="Concurrent MiniWoB++ browsers.")
@click.option("--token-env", default="CUA_ENV_TOKEN", show_default=True,
              help="If this environment variable is set, clients must send its value as a token.")
@click.option("--verbose", is_flag=True, help="Log every request.")
def env_server(host, port, max_envs, token_env, verbose):
    """Serve real MiniWoB++ tasks over the env-cluster protocol.

    \b
    Example:
      cua env-server --port 8100 --max-envs 4
      curl -X POST localhost:8100/server/getAvailableAndLock \\
           -d '{"task_id": "t", "os": "linux", "config": {"miniwob": "click-test-2", "seed": 0}}'
    """
    from .envserver.server import serve

    serve(host, port, max_envs, token_env, verbose)
