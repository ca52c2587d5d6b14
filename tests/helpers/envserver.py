"""The built-in env server, serving in this process."""

import threading

# An env server token variable no test sets: the server runs without a token.
UNSET_TOKEN_ENV = "CUA_TEST_TOKEN_NEVER_SET"


def start_env_server(**kwargs):
    """The built-in env server, serving on a free loopback port in this process; (server, url)."""
    from cua_cli.envserver.server import make_server

    server = make_server(port=0, **kwargs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop_env_server(server):
    server.shutdown()
    server.server_close()
    server.close_all()
