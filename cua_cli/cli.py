"""The `cua` command line: parse, call, format. The work lives in the modules.

Errors are mapped to exit codes in one place (`_Cli.invoke`): an error of the
error tree prints its message and exits with its code (2 for bad input); any
other exception is a bug and keeps its traceback. A stop signal (SIGINT, SIGTERM,
SIGHUP) ends a command with 128 + its number, as a shell reports it.
"""

import json
import signal
import sys
from pathlib import Path

import click
from tabulate import tabulate

from ._util.diag import QUIET, VERBOSE, set_level, warn
from ._util.redact import read_secrets
from ._util.signals import dump_stacks_on_sigusr1, ignore_stop_signals, raise_on_stop_signals
from ._util.text import percent
from .config import load_config
from .errors import CuaError, InputError


class _Failed(click.ClickException):
    def __init__(self, error: CuaError):
        super().__init__(str(error))
        self.exit_code = error.exit_code


class _Cli(click.Group):
    def invoke(self, ctx):
        raise_on_stop_signals()
        try:
            return super().invoke(ctx)
        except CuaError as e:
            raise _Failed(e) from None
        except KeyboardInterrupt as e:  # SIGINT, or any stop signal (Interrupted)
            ignore_stop_signals()  # the command is ending: a further signal must not cut the message
            signum = getattr(e, "signum", signal.SIGINT)
            click.echo(f"interrupted ({signal.Signals(signum).name})", err=True)
            sys.exit(128 + signum)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cua")
@click.option("-v", "--verbose", is_flag=True, help="Say more on stderr: every retry of a request.")
@click.option("-q", "--quiet", is_flag=True, help="Say less on stderr: no warnings or notes, only errors.")
def main(verbose, quiet):
    """Run computer-use (GUI) agents at scale.

    \b
    Examples:
      cua start-models --gpus 0-7 --model /ckpt/UI-TARS-1.5-7B --detach
      cua rollout configs/exp.yaml --fleet fleet/fleet.json
      cua stats results/* --by domain
      cua compare results/base-20261120-0900 results/new-20261121-0900
      cua view results/new-20261121-0900
    """
    if verbose or quiet:
        set_level(VERBOSE if verbose else QUIET)
    dump_stacks_on_sigusr1()


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set runner.num_envs=8 (repeatable).")
@click.option("--resume", type=click.Path(file_okay=False, exists=True), metavar="RUN_DIR",
              help="Continue this run folder; finished pairs are not re-run.")
@click.option("--watch", is_flag=True,
              help="Keep running and pick up task files dropped into the queue's pending/ folder.")
@click.option("--fleet", "fleet_file", type=click.Path(dir_okay=False),
              help="Use the servers of this `cua start-models` fleet file as model endpoints.")
@click.option("--ray", "ray_address", metavar="ADDRESS",
              help="Play on runner actors of this Ray cluster (auto, or HOST:6379): runner.backend ray.")
def rollout(config, overrides, resume, watch, fleet_file, ray_address):
    """Run the episodes of CONFIG and write a run folder under results/.

    \b
    Examples:
      cua rollout configs/demo.yaml
      cua rollout configs/demo.yaml --set runner.num_envs=8 --set tasks.rollout_n=4
      cua rollout configs/demo.yaml --resume results/demo-20261121-101500
      cua rollout configs/exp.yaml --fleet fleet/fleet.json
      cua rollout configs/exp.yaml --ray auto      (on a node of a running Ray cluster)
    """
    from ._util.signals import StopFlags
    from .rollout.driver import rollout as run_rollout

    # Counted from the very start, and never put back: a signal during set-up must not kill the command
    # half-way, nor one after the run cut short the clean-up at exit (Ray's shutdown crashes if it is).
    flags = StopFlags()
    flags.install()
    if fleet_file:
        # Quoted: a path is data, and YAML would misread one holding ': ' or ' #'.
        overrides += (f"model.fleet={json.dumps(str(Path(fleet_file).resolve()))}",)
    if ray_address:
        overrides += ("runner.backend=ray", f"runner.ray.address={json.dumps(ray_address)}")
    cfg = load_config(config, overrides)
    out = run_rollout(cfg, read_secrets(cfg), flags, resume, watch)
    s = out.summary
    ci = s["ci95"]
    rows = [["run", str(out.run.path)],
            ["scheduled", s["scheduled"]], ["finished", s["finished"]], ["missing", s["missing"]],
            ["errors", s["errors"]],
            *([["unsupported (not played)", s["unsupported"]]] if s.get("unsupported") else []),
            ["success rate (of scheduled)",
             percent(s["success_rate"], "%") + (f"  95% CI [{percent(ci[0], '%')}, {percent(ci[1], '%')}]" if ci else "")],
            ["success rate (of finished, no errors)", percent(s["success_rate_finished"], "%")],
            ["mean steps", f"{s['mean_steps']:.1f}" if s["mean_steps"] is not None else "-"],
            ["errors by stop reason",
             ", ".join(f"{k}={v}" for k, v in sorted(s["errors_by_stop_reason"].items())) or "-"],
            *([["failures at a desktop limit", s["desktop_limits"]]] if s.get("desktop_limits") else []),
            ["wall time", f"{out.wall_s:.1f} s"],
            ["time use", _time_use(out.timing)],
            ["more", f"cua stats {out.run.path} --by domain   (--timing: where the time went)"]]
    click.echo(tabulate(rows, tablefmt="simple_outline"))
    if out.crashed:
        raise CuaError("runner processes kept crashing; see the errors above")
    if out.interrupted:
        click.echo(f"interrupted: continue with  cua rollout {config} --resume {out.run.path}")
        sys.exit(out.exit_status)


def _time_use(t: dict) -> str:
    """The rollout summary's line on time: env busy, model busy, the largest wait."""
    if not t["env"]:
        return "-"
    wait = t["largest_wait"]
    return (f"env busy {percent(t['env']['busy'], '%')}, model busy {percent(t['model_busy'], '%')}, "
            f"largest wait: {wait} ({percent(t['env'][wait], '%')} of env time)")


@main.group("config")
def config_group():
    """Check a config, and describe what configs may say.

    \b
    Examples:
      cua config show configs/demo.yaml --set runner.num_envs=8
      cua config tasks configs/osworld-oracle.yaml
      cua config schema > cua-config.schema.json
    """


@config_group.command("show")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, as `cua rollout --set` does (repeatable).")
def config_show(config, overrides):
    """Print CONFIG as cua reads it: every key, defaults filled in, as YAML.

    The file is checked as `cua rollout` reads it (exit 2 naming the key if
    it is wrong); what only a rollout needs (the fleet file, --watch) is not.
    Paths stay as written (relative to CONFIG); URL passwords are masked.

    \b
    Example:
      cua config show configs/demo.yaml --set runner.num_envs=8
    """
    from .config import resolved_yaml

    click.echo(resolved_yaml(load_config(config, overrides)), nl=False)


@config_group.command("tasks")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, as `cua rollout --set` does (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def config_tasks(config, overrides, fmt):
    """Count the tasks CONFIG would play, by domain, and say why the others would not be.

    A rollout refuses at its start the OSWorld tasks that use a setup step,
    getter or metric cua lacks, or an app its desktops lack (cua's own
    desktops have the apps installed on this host); this finds them without
    starting anything. JSON lists every refused task with what it lacks.

    \b
    Examples:
      cua config tasks configs/osworld-oracle.yaml
      cua config tasks exp.yaml --set env.url=http://10.0.0.5:50003 --format json
    """
    from .rollout.task_plan import render_plan, task_plan

    click.echo(render_plan(task_plan(load_config(config, overrides)), fmt))


@config_group.command("schema")
@click.option("--fleet", is_flag=True, help="The schema of `cua start-models --config` files instead.")
def config_schema(fleet):
    """Print the JSON Schema of rollout configs, for editors and checkers.

    Every key with its type, range, default and description. The repo keeps
    it as cua-config.schema.json (and cua-fleet-config.schema.json); a YAML
    file whose first line is
    `# yaml-language-server: $schema=PATH/cua-config.schema.json` gets
    completion and checking in editors that speak the YAML language server.

    \b
    Examples:
      cua config schema > cua-config.schema.json
      cua config schema --fleet > cua-fleet-config.schema.json
    """
    from .config import fleet_json_schema, json_schema

    click.echo(json.dumps(fleet_json_schema() if fleet else json_schema(), indent=2))


@main.group("envs")
def envs():
    """The envs (desktops) a run holds: each is written to the run's leases.jsonl before it is used.

    \b
    Examples:
      cua envs list results/osworld-20261125-0900
      cua envs gc results/osworld-20261125-0900     (after a crash or kill -9)
    """


def _run_token(run_dir: str) -> str | None:
    """The allocation token of a run: its config's env.token_env, read from the environment."""
    import os

    from .rollout.leftovers import token_env

    name = token_env(run_dir)
    if name and not os.environ.get(name):
        raise InputError(f"{run_dir}: the run's env.token_env {name} is not set in the environment")
    return os.environ.get(name) if name else None


@envs.command("list")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
def envs_list(run_dir):
    """List the envs RUN_DIR still holds (taken, never given back).

    \b
    Example:
      cua envs list results/osworld-20261125-0900
    """
    from .runfolder.leases import still_held
    from .runfolder.writer import RunDir

    RunDir.open(run_dir)
    held = still_held(run_dir, strict=True)
    rows = [[h["server"], h["id"], h.get("api", "-"), h.get("task_id", "-")] for h in held]
    click.echo(tabulate(rows, ["server", "id", "desktop API", "task"], tablefmt="simple") if rows
               else "no env is held")


@envs.command("gc")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
def envs_gc(run_dir):
    """Give back every env RUN_DIR still holds (its allocation servers' token from the run's
    env.token_env). Exit 1 if any could not be released.

    \b
    Example:
      cua envs gc results/osworld-20261125-0900
    """
    from .rollout.leftovers import release_leftovers
    from .runfolder.writer import RunDir

    RunDir.open(run_dir)
    out = release_leftovers(run_dir, _run_token(run_dir), strict=True)
    click.echo(f"released {len(out.released)}, still held {len(out.failed)}")
    if out.failed:
        sys.exit(1)


@main.command("env-server")
@click.option("--backend", type=click.Choice(["miniwob", "desktop"]), default="miniwob", show_default=True,
              help="miniwob: MiniWoB++ in headless Chromium; desktop: OSWorld-compatible Linux desktops.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. A desktop's in-VM API has no authentication (as OSWorld's): keep desktop "
                   "hosts on 127.0.0.1 or a private network.")
@click.option("--port", default=8100, show_default=True, help="Port (0 picks a free one).")
@click.option("--max-envs", default=4, show_default=True,
              help="Concurrent envs: MiniWoB++ browsers (env-cluster and AgentGym together), or desktops.")
@click.option("--token-env", default="CUA_ENV_TOKEN", show_default=True,
              help="If this environment variable is set, clients must send its value as a token (desktop: "
                   "required, DART's allocation token).")
@click.option("--screen", default="1920x1080", show_default=True, metavar="WxH", help="desktop: the screen size.")
@click.option("--warm", type=click.IntRange(min=0), default=0, show_default=True,
              help="desktop: desktops kept started before they are asked for, so an allocation answers at once.")
@click.option("--session", type=click.Choice(["gnome", "openbox"]), default="gnome", show_default=True,
              help="desktop: gnome is Ubuntu's GNOME as on OSWorld's image (top bar, dock, Ctrl+Alt+T, overview); "
                   "openbox a bare window manager, lighter, but not the screen agents trained on OSWorld know.")
@click.option("--memory-limit", type=click.FloatRange(min=0.25), default=2.0, show_default=True, metavar="GIB",
              help="desktop: each desktop's memory (an OOM kill inside ends its episode as desktop_limit).")
@click.option("--process-limit", type=click.IntRange(min=64), default=2048, show_default=True,
              help="desktop: each desktop's processes and threads (a fork bomb stops there).")
@click.option("--disk-limit", type=click.FloatRange(min=0.25), default=4.0, show_default=True, metavar="GIB",
              help="desktop: each desktop's home and /tmp together (a disk of its own).")
@click.option("--cpu-weight", type=click.IntRange(1, 10000), default=300, show_default=True,
              help="desktop: each desktop's CPU share (cgroup v2's cpu.weight: 100 weighs as one busy process; "
                   "300, its X server, shell and app).")
@click.option("--no-limits", is_flag=True,
              help="desktop: no limits (a host without cgroups or loop devices that runs no model-written code).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="HOST[:PORT]",
              help="desktop: a host the desktops may reach on the web, through a proxy of the server's "
                   "(repeatable; *.example.com for a domain and its subdomains, * for any public host). Without "
                   "it, desktops have no network.")
@click.option("--verbose", is_flag=True, help="Log every request.")
@click.option("--idle-timeout", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Release an env after this many seconds without a request (0: never).")
@click.option("--parent-pid", type=int, help="Shut down when this process is gone (used by `cua rollout`).")
@click.option("--agentgym-tasks", metavar="TASK,...",
              help="Also serve AgentGym's WebArena protocol over these MiniWoB tasks (e.g. click-test-2,enter-text). "
                   "Its reset's idx picks a (task, seed) pair, task-major: idx = task_index * n_seeds + seed_index; "
                   "an idx outside the pairs is refused.")
@click.option("--agentgym-seeds", metavar="SEEDS", help="Seeds for --agentgym-tasks: ranges and lists, e.g. "
                                                        "0-99 or 0-9,100,200-209.  [default: 0-99]")
def env_server(backend, host, port, max_envs, token_env, screen, warm, session, memory_limit, process_limit,
               disk_limit, cpu_weight, no_limits, allow_hosts, verbose, idle_timeout, parent_pid, agentgym_tasks,
               agentgym_seeds):
    """Serve envs: real MiniWoB++ tasks over the env-cluster protocol (and AgentGym's WebArena
    protocol), or real Linux desktops with OSWorld's in-VM API, allocated through DART's protocol.

    \b
    Examples:
      cua env-server --port 8100 --max-envs 4 --idle-timeout 1800
      curl -X POST localhost:8100/server/getAvailableAndLock \\
           -d '{"task_id": "t", "os": "linux", "config": {"miniwob": "click-test-2", "seed": 0}}'
      cua env-server --agentgym-tasks click-test-2,enter-text --agentgym-seeds 0-99
      curl -X POST localhost:8100/create    # then /reset {"env_idx": 0, "seed": 0, "idx": 150}
      CUA_ENV_TOKEN=secret cua env-server --backend desktop --port 50003 --max-envs 4 --warm 2
      curl -H "Authorization: Bearer $CUA_ENV_TOKEN" -X POST localhost:50003/start_emulator
      CUA_ENV_TOKEN=secret cua env-server --backend desktop --session openbox   # bare, not Ubuntu's GNOME
      CUA_ENV_TOKEN=secret cua env-server --backend desktop --memory-limit 4 --disk-limit 8
      CUA_ENV_TOKEN=secret cua env-server --backend desktop --allow-host '*.wikipedia.org'
    """
    from .envserver.agentgym_webarena import DEFAULT_SEEDS, parse_seeds, parse_tasks

    if backend != "desktop" and allow_hosts:
        raise click.BadParameter("is for --backend desktop", param_hint="--allow-host")
    if backend == "desktop" and (agentgym_tasks or agentgym_seeds or idle_timeout):
        raise click.BadParameter("--agentgym-* and --idle-timeout are for --backend miniwob", param_hint="--backend")
    try:
        width, height = (int(v) for v in screen.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"expected WIDTHxHEIGHT, got {screen!r}", param_hint="--screen") from None
    if agentgym_seeds is not None and agentgym_tasks is None:
        raise click.BadParameter("needs --agentgym-tasks", param_hint="--agentgym-seeds")
    try:
        tasks = parse_tasks(agentgym_tasks) if agentgym_tasks is not None else []
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--agentgym-tasks") from None
    try:
        seeds = parse_seeds(agentgym_seeds or DEFAULT_SEEDS)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--agentgym-seeds") from None
    if parent_pid:
        import os

        from ._util.parent_watch import watch_parent

        # SIGTERM takes the server's own orderly path: stop serving, quit every browser.
        watch_parent(parent_pid, lambda: os.kill(os.getpid(), signal.SIGTERM))
    if backend == "desktop":
        from ._util.allowlist import HostAllowList
        from .envserver.desktop import serve as serve_desktops
        from .envserver.desktop.limits import GIB, DesktopQuota

        try:
            web = HostAllowList(list(allow_hosts)) if allow_hosts else None
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--allow-host") from None

        limits = DesktopQuota(memory=int(memory_limit * GIB), processes=process_limit, cpu_weight=cpu_weight,
                              disk=int(disk_limit * GIB), min_free_disk=int(disk_limit * GIB), enforce=not no_limits)
        serve_desktops(host, port, token_env, max_envs, (width, height), warm, verbose, session=session,
                       limits=limits, web=web)
    else:
        from .envserver.server import serve

        serve(host, port=port, max_envs=max_envs, token_env=token_env, verbose=verbose, idle_timeout_s=idle_timeout,
              agentgym_tasks=tasks, agentgym_seeds=seeds)


@main.command("start-models", context_settings={"ignore_unknown_options": True})
@click.option("--gpus", help="GPUs to use: 0-7, 0,2,4 or 0-3,6.")
@click.option("--cpu", type=int, help="Start N servers without GPUs (hosts without GPUs, tests).")
@click.option("--model", help="Model directory or hub name, as `vllm serve` takes it.")
@click.option("--served-model-name", help="Name clients use (default: the model's folder name).")
@click.option("--tp", type=int, help="Tensor-parallel size: GPUs per server.  [default: 1]")
@click.option("--base-port", type=int, help="First port; taken ports are skipped.  [default: 8000]")
@click.option("--fleet", "fleet_file", default="fleet/fleet.json", show_default=True, type=click.Path(),
              help="Fleet file to write; server logs go to logs/ beside it.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="YAML with any of these settings plus vllm_args and env; the command line wins.")
@click.option("--ready-timeout", type=float, help="Seconds to wait for every server to serve.")
@click.option("--detach", is_flag=True, help="Return once the fleet serves; supervise in the background.")
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED)
def start_models(gpus, cpu, model, served_model_name, tp, base_port, fleet_file, config_path, ready_timeout,
                 detach, vllm_args):
    """Start one `vllm serve` per GPU group and keep them healthy.

    Arguments after `--` go to every `vllm serve` as they are.

    \b
    Examples:
      cua start-models --gpus 0-7 --model /ckpt/ui-tars-1.5-7b -- --max-model-len 32768
      cua start-models --gpus 0-7 --tp 2 --model /ckpt/ui-tars-72b --detach
      cua start-models --cpu 2 --model /tmp/tiny-vlm --config configs/fleet-cpu.yaml
    """
    from .config import FleetConfig, load_fleet_config, vllm_flags
    from .fleet.control import run_detached, run_foreground
    from .fleet.gpus import group_gpus, parse_gpus
    from .fleet.supervisor import FleetSpec

    fc = load_fleet_config(config_path) if config_path else FleetConfig()
    model = model or fc.model
    gpus = gpus if gpus is not None else fc.gpus
    cpu = cpu if cpu is not None else fc.cpu
    tp = tp or fc.tp
    if not model:
        raise InputError("no model: pass --model or set `model` in --config")
    if (gpus is None) == (cpu is None):
        raise InputError("pass exactly one of --gpus SPEC or --cpu N")
    groups = group_gpus(parse_gpus(gpus), tp) if gpus is not None else [[] for _ in range(cpu)]
    if not groups:
        raise InputError("--cpu must be at least 1")
    spec = FleetSpec(model, groups, served_model_name or fc.served_model_name, base_port or fc.base_port,
                     vllm_flags(fc.vllm_args) + list(vllm_args), {k: str(v) for k, v in fc.env.items()},
                     Path(fleet_file), ready_timeout or fc.ready_timeout_s, fc.check_interval_s)
    if detach:
        argv = [a for a in sys.argv[1:] if a != "--detach"]
        pid = run_detached(argv, spec, click.echo)
        click.echo(f"fleet ready: {fleet_file} (supervisor pid {pid}); stop it with "
                   f"`cua stop-models --fleet {fleet_file}`")
    else:
        run_foreground(spec, click.echo)


@main.command("stop-models")
@click.option("--fleet", "fleet_file", default="fleet/fleet.json", show_default=True, type=click.Path())
def stop_models(fleet_file):
    """Stop every server of a fleet and check that no process is left.

    \b
    Example:
      cua stop-models --fleet fleet/fleet.json
    """
    from .fleet.control import stop

    left = stop(Path(fleet_file))
    if left:
        raise CuaError("still running after SIGKILL: " + ", ".join(left))
    click.echo("fleet stopped; no server process is left")


@main.group("models", invoke_without_command=True)
@click.option("--fleet", "fleet_file", default="fleet/fleet.json", show_default=True, type=click.Path())
@click.pass_context
def models(ctx, fleet_file):
    """Show the fleet's servers: health, running and waiting requests, uptime.

    \b
    Examples:
      cua models --fleet fleet/fleet.json
      cua models --fleet fleet/fleet.json reload /ckpt/step-2000
    """
    ctx.obj = Path(fleet_file)
    if ctx.invoked_subcommand:
        return
    from .fleet.control import status

    rows = status(ctx.obj)
    click.echo(tabulate(rows, headers="keys", tablefmt="simple_outline", missingval="-"))


@models.command("reload")
@click.argument("checkpoint")
@click.option("--version", "version", help="Version recorded in every step it serves (default: CHECKPOINT).")
@click.option("--timeout", default=3600.0, show_default=True, help="Seconds to wait for the whole fleet.")
@click.option("--fleet", "fleet_file", type=click.Path(), help="Fleet file (also accepted before `reload`).")
@click.pass_obj
def reload(fleet_path, checkpoint, version, timeout, fleet_file):
    """Restart the fleet on CHECKPOINT one server at a time; the others keep serving.

    \b
    Example:
      cua models reload --fleet fleet/fleet.json /ckpt/step-2000 --version step-2000
    """
    from .fleet.control import request_reload

    request_reload(Path(fleet_file) if fleet_file else fleet_path, checkpoint, version or checkpoint,
                   timeout, click.echo)
    click.echo("reload done")


def _read_runs(paths, tasks_file):
    """Run folders from the arguments (shell globs welcome); bad ones are named."""
    import glob

    from .stats.readers import read_run

    expanded = []
    for p in paths:
        matches = sorted(glob.glob(p)) if any(c in p for c in "*?[") and not Path(p).exists() else [p]
        if not matches:
            raise InputError(f"{p}: no such run folder")
        expanded += matches
    runs = []
    for p in expanded:
        if len(expanded) > 1 and Path(p).is_file():
            warn(f"{p}: not a folder, skipped")
            continue
        runs.append(read_run(p, tasks_file))
    if not runs:
        raise InputError("no run folders to read")
    return runs


def _cua_runs(runs, option: str) -> None:
    """Refuse another tool's folder for an option that reads what only cua records: timings."""
    for d in runs:
        if d.layout != "cua":
            raise InputError(f"{d.path}: an {d.layout} results folder records no timings: {option} reads cua runs")


def _timings(runs) -> list[dict]:
    """The timing figures of cua run folders."""
    from .stats.timing import timing_figures

    _cua_runs(runs, "--timing")
    return [timing_figures(d.path) for d in runs]


def _costs(runs, prices: dict) -> list[dict]:
    """The cost figures of cua run folders."""
    from .stats.cost import cost_figures

    _cua_runs(runs, "--cost")
    return [cost_figures(d, prices) for d in runs]


def _prices(cost: bool, price: str | None, timing: bool, other: str | None) -> dict | None:
    """The prices of --price (which implies --cost), or None without --cost; InputError for a bad one or
    for --cost with an option it does not go with (`other`, named)."""
    from .stats.cost import parse_prices

    if not (cost or price is not None):
        return None
    if timing:
        raise InputError("--cost and --timing are two views of a run: give one")
    if other:
        raise InputError(f"{other} does not go with --cost")
    return parse_prices(price) if price is not None else {}


FORMATS = click.Choice(["table", "json", "csv", "markdown"])


@main.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
@click.option("--by", type=click.Choice(["domain", "task"]), help="Add a breakdown by domain or by task.")
@click.option("--tasks", "tasks_file", type=click.Path(dir_okay=False, exists=True),
              help="OSWorld task list (test_all.json): tasks with no result folder count as missing.")
@click.option("--timing", is_flag=True, help="Where the time went instead: the env slots' time by phase, the "
                                             "waits, the model servers' load (cua runs).")
@click.option("--cost", is_flag=True, help="What the runs cost instead: env time, desktop memory, model server "
                                           "busy time and tokens, in all and per success (cua runs).")
@click.option("--price", metavar="KEY=PRICE,...", help="Prices for --cost (implies it), any of gpu-hour (a model "
              "server busy for an hour), desktop-hour (an env for an hour) and mtok (a million tokens), e.g. "
              "gpu-hour=2.5,desktop-hour=0.05,mtok=0.4: adds the cost in money, per task and per success.")
@click.option("--exclude-broken", "report", type=click.Path(dir_okay=False, exists=True), metavar="REPORT",
              help="Leave out the tasks this `cua check-tasks` report does not call ok, and say how many "
                   "(default: nothing is left out).")
def stats(runs, fmt, by, tasks_file, timing, cost, price, report):
    """Success rates, intervals, pass@k and errors of one or more runs.

    Reads cua run folders, OSWorld result folders and DART rollout folders.
    Every scheduled pair is in the denominator: missing pairs and errors score 0.

    \b
    Examples:
      cua stats results/*
      cua stats results/exp-* --by domain --format markdown
      cua stats osworld_results/pyautogui/screenshot/ui-tars --tasks evaluation_examples/test_all.json
      cua stats results/exp-20261125-0900 --timing --by domain
      cua stats results/exp-* --cost --price gpu-hour=2.5,desktop-hour=0.05,mtok=0.4 --by domain
      cua stats results/exp-* --exclude-broken results/exp-check-20261121-0900/report.jsonl
    """
    from .stats.figures import across, run_figures
    from .stats.output import render_cost, render_stats, render_timing

    prices = _prices(cost, price, timing, "--exclude-broken" if report else "--by task" if by == "task" else None)
    data = _read_runs(runs, tasks_file)
    if prices is not None:
        click.echo(render_cost(_costs(data, prices), prices, fmt, by))
        return
    if timing:
        if report:
            raise InputError("--exclude-broken leaves tasks out of success rates: it does not go with --timing")
        click.echo(render_timing(_timings(data), fmt, by))
        return
    left_out = _leave_out_broken(data, report) if report else []
    figures = [run_figures(d, by) for d in data]
    for f, (pairs, tasks) in zip(figures, left_out):
        f["broken_pairs_left_out"], f["broken_tasks_left_out"] = pairs, tasks
    click.echo(render_stats(across(figures), fmt, by))
    if left_out and fmt in ("table", "markdown"):
        for f in figures:
            pairs, tasks = f["broken_pairs_left_out"], f["broken_tasks_left_out"]
            click.echo(f"{f['run']}: left out {pairs} pair{'s' * (pairs != 1)} of {tasks} task{'s' * (tasks != 1)} "
                       f"that {report} does not call ok")


def _leave_out_broken(runs, report) -> list[tuple[int, int]]:
    """(pairs, tasks) left out of each run: those of the tasks a check-tasks report does not call ok."""
    from .stats.task_checks import broken, leave_out, read_report

    tasks = broken(read_report(report))
    return [leave_out(d, tasks) for d in runs]


@main.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="Write the tasks whose results differ, as JSON.")
@click.option("--tasks", "tasks_file", type=click.Path(dir_okay=False, exists=True),
              help="OSWorld task list: tasks with no result folder count as missing.")
@click.option("--timing", is_flag=True, help="Compare where the time went instead (cua runs): the summary and "
                                             "each phase of A and B side by side.")
@click.option("--cost", is_flag=True, help="Compare what the runs cost instead (cua runs): A, B and B - A.")
@click.option("--price", metavar="KEY=PRICE,...", help="Prices for --cost (implies it): gpu-hour, desktop-hour, "
                                                       "mtok, e.g. gpu-hour=2.5,desktop-hour=0.05,mtok=0.4.")
def compare(run_a, run_b, fmt, out, tasks_file, timing, cost, price):
    """Paired per-task comparison of two runs, with a significance test.

    \b
    Examples:
      cua compare results/base-20261120-0900 results/new-20261121-0900
      cua compare runA runB --format json --out differing.json
      cua compare runA runB --timing
      cua compare runA runB --cost --price gpu-hour=2.5,desktop-hour=0.05,mtok=0.4
    """
    import json

    from .stats.compare import compare as compare_runs
    from .stats.cost import delta
    from .stats.output import render_compare, render_cost_compare, render_timing_compare

    prices = _prices(cost, price, timing, "--out" if out else None)
    (a,), (b,) = _read_runs([run_a], tasks_file), _read_runs([run_b], tasks_file)
    if prices is not None:
        ca, cb = _costs([a, b], prices)
        click.echo(render_cost_compare(ca, cb, delta(ca, cb), prices, fmt))
        return
    if timing:
        if out:
            raise InputError("--out lists tasks whose results differ: it does not go with --timing")
        click.echo(render_timing_compare(*_timings([a, b]), fmt))
        return
    result = compare_runs(a, b)
    click.echo(render_compare(result, fmt))
    if out:
        domains = {**b.domains, **a.domains}
        differing = {side: [{"task_id": t, "domain": domains.get(t)} for t in result[side]]
                     for side in ("better_a", "better_b")}
        try:
            Path(out).write_text(json.dumps(differing, indent=2) + "\n")
        except OSError as e:
            raise CuaError(f"{out}: cannot write: {e.strerror}") from None


@main.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--out", type=click.Path(file_okay=False), help="Report folder (default: RUN/view).")
def view(runs, out):
    """Write a static HTML report of a run: open index.html in any browser.

    Besides every episode step by step, a timeline page draws each env slot's
    attempts by phase over the model servers' load (timeline.html). With two
    runs, also a page of the tasks whose results differ.

    \b
    Examples:
      cua view results/exp-20261121-0900
      cua view results/base-20261120-0900 results/new-20261121-0900
    """
    from .view.report import RunReport, build_compare

    if len(runs) > 2:
        raise InputError("cua view takes one run, or two to compare")
    reports = [RunReport(r, Path(out) / (f"run-{i}" if len(runs) == 2 else "") if out else None)
               for i, r in enumerate(runs)]
    try:
        pages = [r.build() for r in reports]
        if len(reports) == 1:
            click.echo(pages[0])
            return
        a, b = reports
        target = Path(out) / "compare.html" if out else a.out / f"compare-{b.run.name}.html"
        click.echo(build_compare(a, b, target.resolve()))
    except OSError as e:  # a full disk, a folder we may not write
        raise CuaError(f"cannot write the report: {e}") from None


@main.command()
@click.argument("run", required=False)
@click.option("--interval", type=click.FloatRange(0.1, 3600), default=2.0, show_default=True,
              help="Seconds between frames.")
@click.option("--window", type=click.FloatRange(1, 86400), default=60.0, show_default=True,
              help="Seconds of recent history behind the recent steps/s, env busy and server figures.")
@click.option("--once", is_flag=True, help="Print one frame and exit 0 (for scripts).")
@click.option("--live-view", is_flag=True,
              help="Serve `cua watch`'s pages on 127.0.0.1 too, with a link to each running desktop's screen.")
def top(run, interval, window, once, live_view):
    """A live view of a rollout from its run folder: progress, success rate, steps/s, env and model load.

    Reads only the run folder (episodes.jsonl, metrics.jsonl, the queue), so it
    works from another shell or host that sees the folder. RUN defaults to the
    run folder under ./results written to last. It shows the success rate of
    the judged pairs with its 95% interval, steps/s and the env slots' busy
    share (recent and overall), each model server's requests running and
    waiting, KV cache, prefix hits and tokens/s (or "down"), GPUs, errors by
    stop reason and the longest-running episodes. With --live-view it serves
    the pages of `cua watch` while it runs and links each running episode on a
    desktop to its live screen (a rollout on this host).

    It exits 0 with the last frame shown once the run has ended: nothing
    pending or claimed, every scheduled pair done or failed, for 5 s (a
    `--watch` rollout whose queue has run dry counts as ended). Ctrl-C exits
    130. When stdout is not a terminal it prints a line whenever the figures
    move, and the whole frame at the end.

    \b
    Examples:
      cua top
      cua top results/exp-20261121-0900 --interval 5
      cua top results/exp-20261121-0900 --once > status.txt
      cua top results/exp-20261121-0900 --live-view
    """
    from rich.console import Console

    from .top.live import follow
    from .top.live import once as one_frame
    from .top.watch import newest_run

    path = run or newest_run(Path("results"))
    server = _live_view(path) if live_view else None
    links = None
    if server is not None:
        def links():
            urls = {}
            for e in server.episodes():
                if e.sample_attempt is not None:
                    urls[(e.task_id, *e.sample_attempt)] = server.url(e)
            return server.url(), urls
    try:
        if once:
            one_frame(path, window, Console(), links)
        else:
            follow(path, interval, window, Console(), links)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()


def _live_view(run: str):
    """`cua watch`'s server for the run, serving in a thread (shut down by the caller)."""
    import threading

    from .watch.server import WatchServer, novnc_dir

    novnc = novnc_dir()
    if novnc is None:
        raise InputError("the live view needs Debian's novnc (/usr/share/novnc): run scripts/setup_env.sh")
    try:
        server = WatchServer(run, "127.0.0.1", 0, novnc)
    except OSError as e:
        raise InputError(f"cannot serve the live view on 127.0.0.1: {e.strerror}") from None
    threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True, name="live-view").start()
    return server


@main.command()
@click.argument("run", type=click.Path(file_okay=False))
@click.argument("episode", required=False)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to serve the pages on; another lets other hosts in (anyone with the URL sees the screens).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="Port (0: a free one).")
@click.option("--no-browser", is_flag=True, help="Print the page's URL and serve it without opening a browser "
                                                 "(a remote host, a script).")
@click.option("--takeover", is_flag=True, help="Take EPISODE over at once: its agent pauses at its next step and "
                                               "the page gets the desktop's mouse and keyboard.")
def watch(run, episode, host, port, no_browser, takeover):
    """Watch a rollout's desktops live in the browser: the screen, the task and the last step.

    EPISODE is a task id, TASK/SAMPLE or TASK/SAMPLE/ATTEMPT; without it the
    page lists the run's running episodes. The screen is view-only until you
    take the episode over (--takeover, or the page's button): its agent then
    pauses at its next step, without a deadline, and the page has the
    desktop's mouse and keyboard until you give it back or end the episode
    (done, infeasible, or abandoned unscored); the episode's steps say who
    acted (`actor`). The screen comes through the rollout itself (its
    `screens.sock` in the run folder), which alone holds the env servers'
    token, so RUN must be a rollout running on this host; the page's URL
    carries a token of its own, made for this command. Serves until Ctrl-C,
    which gives back a desktop still held.

    \b
    Examples:
      cua watch results/exp-20261121-0900
      cua watch results/exp-20261121-0900 0bed8fd5-1c5b-4b8f-9e2b-4f0c2e4d1a11/0
      cua watch results/exp-20261121-0900 --no-browser --port 8765
      cua watch results/exp-20261121-0900 0bed8fd5-1c5b-4b8f-9e2b-4f0c2e4d1a11/0/0 --takeover
    """
    import webbrowser

    from ._util.signals import serve_until_stopped
    from .runfolder.confined import Refused
    from .watch.episodes import find, running
    from .watch.server import WatchServer, novnc_dir

    if not (Path(run) / "run.json").is_file():
        raise InputError(f"{run}: not a run folder (no run.json)")
    novnc = novnc_dir()
    if novnc is None:
        raise InputError("the live view needs Debian's novnc (/usr/share/novnc): run scripts/setup_env.sh")
    try:
        now = running(run)
    except Refused as e:
        raise InputError(f"{run}/leases.jsonl {e}") from None
    chosen = None
    if takeover and episode is None:
        raise InputError("--takeover: name the EPISODE to take over")
    if episode is not None:
        matches = find(now, episode)
        listed = "".join(f"\n  {e.task_id}/{'/'.join(map(str, e.sample_attempt or ()))}" for e in now[:20])
        if len(matches) != 1:
            raise InputError(f"{episode!r:.200}: " + (f"names {len(matches)} running episodes: give TASK/SAMPLE/ATTEMPT"
                             if matches else "no such episode runs on a desktop now")
                             + (f"; running:{listed}" if now else ""))
        chosen = matches[0]
    try:
        server = WatchServer(run, host, port, novnc)
    except OSError as e:
        raise InputError(f"cannot serve on {host}:{port}: {e.strerror}") from None
    if not (Path(run) / "screens.sock").exists():
        warn(f"{run}: no rollout shows its screens now (no screens.sock): the pages show the steps only")
    if takeover and (problem := server.take(chosen, "hold")):
        server.server_close()
        raise InputError(f"--takeover: {chosen.task_id!r:.200}: {problem}")

    def announce():
        url = server.url(chosen)
        click.echo(f"watching {server.name}: {url}", nl=True)
        sys.stdout.flush()
        if not no_browser and not webbrowser.open(url):
            click.echo("no browser to open here: open the URL above in one")

    try:
        serve_until_stopped(server, announce)
    finally:
        server.server_close()


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--task", "task_id", required=True, metavar="ID",
              help="The task to demonstrate (its id in CONFIG's tasks).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config key (repeatable).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to serve the page on; another lets other hosts in (anyone with the URL has the desktop).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="Port (0: a free one).")
@click.option("--no-browser", is_flag=True, help="Print the page's URL without opening a browser.")
def demo(config, task_id, overrides, host, port, no_browser):
    """Record a person solving one task, as an episode of a new run folder.

    A fresh desktop of CONFIG is set up for the task, and a page in the
    browser hands you its mouse and keyboard beside the task's instruction.
    Everything you do on the desktop is recorded, as the desktop saw it: each
    click, double click, right click, drag, scroll, hotkey and run of typed
    text is one step of traj.jsonl (`actor: human`), with the screen you
    acted on, written as the config's agent would have answered (UI-TARS'
    calls, or OSWorld's pyautogui code) and as pyautogui code (`commands`).
    End on the page: "done" or "infeasible" is scored by the task's
    evaluator; "abandon" keeps the steps unscored. The run folder reads as
    any run: `cua view`, `cua stats`, `cua export --format sft`, and a
    replay (`model.provider: replay`, `model.replay_run: RUN`).

    \b
    Examples:
      cua demo configs/osworld-oracle.yaml --task cua-os-move-notes
      cua demo configs/osworld-oracle.yaml --task cua-os-move-notes --no-browser --port 8765
    """
    import webbrowser

    from ._util.signals import StopFlags
    from .demo.driver import record_demo

    flags = StopFlags()
    flags.install()
    cfg = load_config(config, overrides)
    click.echo(f"setting up a desktop for {task_id!r:.200}")

    def show(url: str) -> None:
        click.echo(f"the desktop is yours: {url}")
        sys.stdout.flush()
        if not no_browser and not webbrowser.open(url):
            click.echo("no browser to open here: open the URL above in one")

    out = record_demo(cfg, read_secrets(cfg), task_id, flags, host, port, show)
    rec = out.episode
    score = "-" if rec.get("score") is None else f"{rec['score']:g}"
    click.echo(tabulate([["run", str(out.run.path)], ["steps", rec.get("steps", 0)],
                         ["ended", rec.get("stop_reason")], ["score", score],
                         *([["error", rec["error"]]] if rec.get("error") else []),
                         ["more", f"cua view {out.run.path}"]], tablefmt="simple_outline"))
    if out.interrupted:
        sys.exit(out.exit_status)
    if rec["outcome"] == "error" and rec.get("stop_reason") != "abandoned":
        raise CuaError(f"the demonstration ended without a score: {rec.get('stop_reason')}")


@main.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--out", required=True, type=click.Path(), help="File to write (--format atif: a new folder).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet", "sft", "atif"]), default="jsonl",
              show_default=True, help="jsonl / parquet: one row per model call; sft: successful trajectories as chat "
                                      "messages; atif: one Harbor ATIF trajectory file per attempt, images beside it.")
@click.option("--group-by", type=click.Choice(["task", "run-task"]), default="task", show_default=True,
              help="What a GRPO group is: the task (across runs), or the task within each run.")
@click.option("--all-attempts", is_flag=True, help="Also the attempts that ended in an error and were retried.")
@click.option("--outcomes", metavar="LIST", help="Keep these outcomes only, e.g. success,failure.")
@click.option("--min-steps", type=click.IntRange(min=0), default=0, show_default=True,
              help="Keep trajectories of at least this many steps.")
@click.option("--policy-versions", metavar="RANGES",
              help="Keep model calls of these policy versions, e.g. 3-5,7 (not with atif).")
@click.option("--mixed-groups", is_flag=True, help="Keep groups that hold both a success and a failure only.")
@click.option("--failed-tries", is_flag=True, help="Also a row for each answer the agent asked again after.")
@click.option("--actors", type=click.Choice(["all", "agent", "human"]), default="all", show_default=True,
              help="agent: only attempts no person took over (`cua watch --takeover`); human: only those.")
def export(runs, out, fmt, group_by, all_attempts, outcomes, min_steps, policy_versions, mixed_groups, failed_tries,
           actors):
    """Turn runs into training data for RL trainers: one row per model call (step-wise).

    Each row has the prompt's and the response's token ids, the response's
    logprobs, the policy version, the group and its score statistics, and the
    rewards; every field is in docs/reference/export-schema.md. Several runs are merged (a run
    given twice counts once), and a run still going exports what is finished.
    --format atif writes Harbor's trajectory format instead: a folder with one
    trajectory.json per attempt and its images.

    \b
    Examples:
      cua export results/exp-20261121-0900 --format parquet --out data/step-rows.parquet
      cua export results/exp-* --format jsonl --out rows.jsonl --mixed-groups --outcomes success,failure
      cua export results/exp-20261121-0900 --format sft --out sft.jsonl --actors agent
      cua export results/exp-20261121-0900 --format atif --out atif/
    """
    from .export import ExportOptions, export_runs

    options = ExportOptions(group_by, all_attempts, outcomes, min_steps, policy_versions, mixed_groups, failed_tries,
                            actors)
    summary = export_runs([Path(r) for r in runs], Path(out), fmt, options)
    click.echo(tabulate(list(summary.items()), tablefmt="simple_outline"))


@main.command("check-logprobs")
@click.argument("run", type=click.Path(file_okay=False, exists=True))
@click.option("--model", "model_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="The checkpoint the run's servers ran (a Hugging Face model folder).")
@click.option("--tolerance", type=click.FloatRange(min=0), default=1e-3, show_default=True,
              help="Largest absolute logprob difference that passes.")
@click.option("--max-steps", type=click.IntRange(min=1), help="Check only the first N recorded model calls.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32", show_default=True)
@click.option("--device", default="cpu", show_default=True, help="Torch device, e.g. cuda:0.")
def check_logprobs(run, model_dir, tolerance, max_steps, dtype, device):
    """Recompute each recorded response token's logprob with transformers, and compare with vLLM's.

    Needs a run recorded with `model.record_tokens: true` and the checkpoint
    its servers ran. Exits 1 when any difference is above --tolerance.

    \b
    Example:
      cua check-logprobs results/exp-20261121-0900 --model /ckpt/step-2000
    """
    from .logprobs_check import check_run

    report = check_run(Path(run), Path(model_dir), tolerance, max_steps, dtype, device, click.echo)
    click.echo(tabulate(report.rows, headers="keys", tablefmt="simple_outline", floatfmt=".2e"))
    click.echo(report.summary)
    if not report.passed:
        if report.max_abs_diff == float("inf"):
            raise CuaError("logprobs differ: some calls could not be compared (see the table's problem column)")
        raise CuaError(f"logprobs differ by up to {report.max_abs_diff:.3g} (tolerance {tolerance:g})")


@main.command("check-tasks")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--oracle", type=click.Path(dir_okay=False), metavar="FILE",
              help='The oracle\'s answers, a JSON file {"task_id": [answer, ...]}  [default: the config\'s '
                   "model.script]")
@click.option("--repeat", type=click.IntRange(min=1, max=1000), default=2, show_default=True,
              help="Play each task this often with each answer: its score must not change.")
@click.option("--resume", type=click.Path(file_okay=False, exists=True), metavar="CHECK_DIR",
              help="Continue this check folder; finished episodes are not played again.")
@click.option("--report", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the verdicts here (JSONL)  [default: CHECK_DIR/report.jsonl]")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set runner.num_envs=8 (repeatable).")
def check_tasks(config, oracle, repeat, resume, report, overrides):
    """Self-test the tasks of CONFIG: can each be solved, and does its evaluator tell?

    Plays every task with its oracle's answers (it must succeed) and with an
    answer that does nothing (it must not), --repeat times each (its score must
    not change), as two rollouts with the script provider on CONFIG's env and
    pool, in a check folder next to the config's runs. Each task ends as ok,
    oracle_fails, noop_passes, flaky, setup_error or eval_error (unsupported:
    cua cannot play it); an infeasible task's no-op is not judged. Exits 1 when
    any task is not ok.

    \b
    Examples:
      cua check-tasks configs/osworld-oracle.yaml
      cua check-tasks configs/exp.yaml --oracle answers.json --repeat 3
      cua check-tasks configs/exp.yaml --resume results/exp-check-20261121-0900
      cua stats results/exp-* --exclude-broken results/exp-check-20261121-0900/report.jsonl
    """
    from ._util.signals import StopFlags
    from .rollout.check_tasks import check_tasks as run_check

    flags = StopFlags()
    flags.install()
    out = run_check(config, overrides, oracle, repeat, flags, resume, report)
    if out.interrupted:
        click.echo(f"interrupted: continue with  cua check-tasks {config} --resume {out.folder}")
        sys.exit(out.exit_status)
    order = ["oracle_fails", "noop_passes", "flaky", "setup_error", "eval_error", "unsupported", "ok"]
    rows = [{"task": line["task_id"], "domain": line["domain"] or "-", "verdict": line["status"],
             "oracle": _scores(line["oracle"]), "no-op": _scores(line["noop"]), "why": line["why"] or "-"}
            for line in sorted(out.lines, key=lambda x: (order.index(x["status"]), x["task_id"]))]
    table = tabulate(rows, headers="keys", tablefmt="simple_outline", disable_numparse=True,
                     maxcolwidths=[None, None, None, None, None, 80])
    counts = ", ".join(f"{sum(x['status'] == s for x in out.lines)} {s}" for s in order
                       if any(x["status"] == s for x in out.lines))
    # Task ids from undecodable names hold lone surrogates: shown as \\udXXX, which any terminal prints.
    click.echo(f"{table}\n{len(out.lines)} tasks: {counts}; report: {out.report}".encode(
        "utf-8", "backslashreplace").decode())
    if out.not_ok:
        raise CuaError(f"{len(out.not_ok)} of {len(out.lines)} tasks are not ok: "
                       f"{', '.join(x['task_id'] for x in out.not_ok[:5])}{', ...' if len(out.not_ok) > 5 else ''}")


def _scores(group: dict | None) -> str:
    """A check's scores of one answer, by sample: `1 1`, `0.62 0.6`, `-` for an error."""
    if group is None:
        return "-"
    return " ".join("-" if s is None else f"{s:.3g}" for s in group["scores"])
