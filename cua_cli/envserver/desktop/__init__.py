"""cua's own OSWorld-compatible desktops (`cua env-server --backend desktop`): real X sessions in
user/PID/mount/IPC/network namespaces, each with OSWorld's in-VM API on its own port, allocated
through DART's "GUI-Docker-Env" protocol (server.py) from a warm pool (pool.py).

Modules: sandbox (namespaces, start, teardown), guest/ (the programs that run for a desktop:
launcher and PID 1, executor, pyautogui forker, sudo), client (the executor's wire), api (the
in-VM HTTP routes), desktop (one desktop), limits (what a desktop may take of its host), pool,
dart (allocation routes), server (entry points).
"""

from cua_cli.envserver.desktop.server import make_server, serve

__all__ = ["make_server", "serve"]
