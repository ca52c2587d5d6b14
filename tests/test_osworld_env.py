"""env.kind osworld against a stand-in of DART-GUI's desktop allocation server ("GUI-Docker-Env":
it starts OSWorld VMs under Docker and QEMU, which cannot run here), following its published
protocol: GET /tokens, POST /start_emulator, DELETE /emulators/{id}. The desktops it hands out
are loopback servers that never finish an answer. Real desktops: tests/test_contracts.py and
tests/test_osworld_rollout.py."""

import json
import time

import pytest
from helpers.servers import DripServer, LoopbackHTTPServer

from cua_cli._util.budget import Budget
from cua_cli.envs.osworld import OSWorldEnv
from cua_cli.errors import EnvError, EpisodeTimeout
from cua_cli.osworld.allocation import Allocator
from cua_cli.osworld.desktop_api import ApiSettings
from cua_cli.tasks import Task

TOKEN = "alloc-token"


class Allocations(LoopbackHTTPServer):
    """DART's allocation protocol over a quota; every desktop is `desktop_port`."""

    def __init__(self, desktop_port: int, limit: int = 2):
        super().__init__()
        self.desktop_port, self.limit = desktop_port, limit
        self.held: set[str] = set()
        self.released: list[str] = []
        self.n = 0
        base = self.server.RequestHandlerClass

        class WithDelete(base):
            def do_DELETE(self):
                self._serve("DELETE")

        self.server.RequestHandlerClass = WithDelete

    def serve(self, handler, method, body):
        if handler.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.reply(handler, 401, "application/json", b'{"message": "bad token", "code": 401}')
        if method == "GET" and handler.path == "/tokens":
            entry = {"current": len(self.held), "limit": self.limit, "emulator_count": len(self.held)}
            return self.reply(handler, 200, "application/json", json.dumps({TOKEN: entry}).encode())
        if method == "POST" and handler.path == "/start_emulator":
            if len(self.held) >= self.limit:
                return self.reply(handler, 429, "application/json", b'{"message": "quota", "code": 429}')
            self.n += 1
            desktop = f"desktop-{self.n}"
            self.held.add(desktop)
            data = {"emulator_id": desktop, "server_port": self.desktop_port, "token": TOKEN}
            return self.reply(handler, 200, "application/json",
                              json.dumps({"message": "ok", "code": 0, "data": data}).encode())
        if method == "DELETE" and handler.path.startswith("/emulators/"):
            desktop = handler.path.rsplit("/", 1)[1]
            self.held.discard(desktop)
            self.released.append(desktop)
            return self.reply(handler, 200, "application/json", b'{"message": "stopped", "code": 0}')
        self.reply(handler, 404, "application/json", b'{"message": "no such route", "code": 404}')


class Leases:
    def __init__(self):
        self.records = []

    def lease(self, record):
        self.records.append(record)


def _env(url: str, wait_s: float = 0.0) -> OSWorldEnv:
    return OSWorldEnv(Allocator([url], TOKEN, wait_s=wait_s), ApiSettings("", 30.0, retries=1), 0.0, 0.0, None, None)


def _task() -> Task:
    steps = [{"type": "execute", "parameters": {"command": "mkdir -p ~/Desktop", "shell": True}}]
    return Task("os-hang", "os", "anything", {"config": steps}, {"func": "infeasible"})


def test_a_desktop_that_never_answers_ends_at_the_deadline_and_is_given_back():
    with DripServer("body") as desktop, Allocations(desktop.sock.getsockname()[1]) as alloc:
        leases = Leases()
        start = time.monotonic()
        with pytest.raises((EnvError, EpisodeTimeout)):
            _env(alloc.url).allocate(_task(), Budget(1.0, time.monotonic() + 4.0), leases)
        assert time.monotonic() - start < 8.0  # the deadline, not the drip's 15 s give-up
        assert alloc.released == ["desktop-1"] and not alloc.held
        assert [r["state"] for r in leases.records] == ["held", "released"]
        assert leases.records[0]["id"] == "desktop-1" and leases.records[0]["lease"] == leases.records[1]["lease"]


def test_full_servers_are_waited_for_then_named():
    with DripServer("body") as desktop, Allocations(desktop.sock.getsockname()[1], limit=0) as alloc:
        with pytest.raises(EnvError, match="full"):
            _env(alloc.url, wait_s=0.5).allocate(_task(), Budget(5.0, time.monotonic() + 10.0), Leases())
        assert alloc.requests["/start_emulator"] == 0  # /tokens said full: never asked


def test_a_wrong_token_is_an_env_error_naming_the_server():
    with DripServer("body") as desktop, Allocations(desktop.sock.getsockname()[1]) as alloc:
        env = OSWorldEnv(Allocator([alloc.url], "wrong"), ApiSettings("", 5.0, retries=0), 0.0, 0.0, None, None)
        with pytest.raises(EnvError, match=alloc.url):
            env.allocate(_task(), Budget(5.0), Leases())
        assert not alloc.held


def test_tasks_cua_cannot_play_are_listed_and_counted_apart_never_scored(tmp_path):
    from cua_cli.config import load_config
    from cua_cli.rollout.desktops import split_unsupported
    from cua_cli.runfolder.reader import RunReader
    from cua_cli.runfolder.writer import RunDir
    from cua_cli.stats.figures import run_figures
    from cua_cli.stats.readers import from_reader

    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text("env: {kind: osworld, url: 'http://127.0.0.1:9'}\nagent: {kind: osworld}\n")
    cfg = load_config(str(cfg_path))
    drive = [{"type": "googledrive", "parameters": {"settings_file": "settings.yml", "operation": ["delete"]}}]
    playable = _task()
    tasks = [playable, Task("drive", "multi_apps", "x", {"config": drive}, {"func": "infeasible"})]
    kept, refused = split_unsupported(cfg, tasks)
    assert kept == [playable]
    assert refused == [{"task_id": "drive", "domain": "multi_apps",
                        "missing": ["step 'googledrive' (needs credentials: a Google account)"]}]

    run = RunDir.create(tmp_path / "results", "u", {})
    run.refuse(refused)
    run.queue(3, 60).enqueue([t.to_dict() for t in kept], 1)
    figures = run_figures(from_reader(RunReader(run.path).refresh()))
    assert (figures["scheduled"], figures["unsupported"]) == (1, 1)  # in no rate: never a failure



def test_a_task_whose_app_the_desktops_lack_is_not_played_there(tmp_path, monkeypatch):
    from cua_cli.config import load_config
    from cua_cli.osworld.apps import needed, on_this_host
    from cua_cli.rollout.desktops import split_unsupported

    def task(task_id, apps):
        return Task(task_id, "d", "x", {"config": [], "related_apps": apps}, {"func": "infeasible"})
    tasks = [task("calc", ["libreoffice calc", "os"]), task("term", ["os", "terminal"]),
             task("code", ["VSCode", "Chrome", "chrome"])]
    assert [needed(t.config) for t in tasks] == [["libreoffice_calc"], [], ["vs_code", "chrome"]]
    assert [needed(x) for x in ({"related_apps": "gimp"}, {"related_apps": {"a": 1}}, {"related_apps": [None, 3]},
                                None, [])] == [["gimp"], [], [], [], []]  # hostile task files: never an error

    def split(yaml_text):
        (tmp_path / "c.yaml").write_text(yaml_text)
        kept, refused = split_unsupported(load_config(str(tmp_path / "c.yaml")), tasks)
        return [t.task_id for t in kept], {r["task_id"]: r["missing"] for r in refused}

    # cua's own desktops have what this host has: here, a PATH with only `code` on it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "code").write_text("#!/bin/sh\n")
    (bin_dir / "code").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert on_this_host() == ["vs_code"]
    kept, refused = split("env: {kind: osworld, url: local}\nagent: {kind: osworld}\n")
    assert kept == ["term"]
    assert refused == {"calc": ["app 'libreoffice_calc' (not on these desktops)"],
                       "code": ["app 'chrome' (not on these desktops)"]}
    # OSWorld's VMs or DART's desktops have OSWorld's image: every app.
    assert split("env: {kind: osworld, url: 'http://127.0.0.1:9'}\nagent: {kind: osworld}\n")[0] == [
        "calc", "term", "code"]
    # Told which apps the desktops have, cua believes it.
    assert split("env: {kind: osworld, url: local, osworld: {apps: [libreoffice_calc]}}\n"
                 "agent: {kind: osworld}\n")[0] == ["calc", "term"]


def test_a_listed_desktop_that_fails_its_check_twice_is_put_aside(capsys, monkeypatch):
    from cua_cli.envserver.desktop_list import DesktopList

    monkeypatch.setattr("cua_cli.envserver.desktop_list.CHECK_TIMEOUT_S", 1.0)
    with DripServer("body", give_up_s=2.0) as hanging:  # one refuses connections, one never finishes an answer
        desktops = DesktopList(["http://127.0.0.1:9", hanging.url], None, "t")
        status, body = desktops.start()
    assert status == 503 and "failed its checks" in body["message"]
    assert desktops.strikes == [2, 2] and desktops.usable() == 0 and not desktops.held
    err = capsys.readouterr().err
    assert "http://127.0.0.1:9 failed its check 2 times" in err and f"{hanging.url} failed its check 2 times" in err
