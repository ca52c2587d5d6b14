"""A desktop's way to the web (`cua env-server --backend desktop --allow-host ...`): the host's proxy
of one desktop on its unix socket lets through the allowed hosts only, by CONNECT and by plain
http:// requests, and never an address of the host's own networks that the list does not name.
"The web" is a loopback server; the desktop end to end is in test_desktop_gnome.py."""

import socket

import pytest
from helpers.servers import LoopbackHTTPServer
from hypothesis import given
from hypothesis import strategies as st

from cua_cli._util.allowlist import HostAllowList
from cua_cli.envserver.desktop.ports import PublishedPorts
from cua_cli.envserver.desktop.sockets import SocketFolder
from cua_cli.envserver.desktop.web import WebProxy


class Web(LoopbackHTTPServer):
    def serve(self, handler, method, body):
        self.reply(handler, 200, "text/plain", f"page {handler.path} for {handler.headers.get('Host')}".encode())


@pytest.fixture
def web():
    with Web() as server:
        yield server


def _ask(sockets, request: bytes) -> bytes:
    folder = SocketFolder(sockets)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(folder.path("web.sock"))
        folder.close()
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def test_allowed_hosts_are_reached_by_connect_and_by_plain_requests_and_others_refused(tmp_path, web):
    port = web.server.server_address[1]
    proxy = WebProxy(tmp_path, HostAllowList([f"127.0.0.1:{port}"]))
    try:
        plain = _ask(tmp_path, f"GET http://127.0.0.1:{port}/a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                               f"Proxy-Connection: keep-alive\r\n\r\n".encode())
        assert plain.startswith(b"HTTP/1.1 200") and plain.endswith(f"page /a?b=1 for 127.0.0.1:{port}".encode())
        tunnel = _ask(tmp_path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
                                f"GET /inside HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        assert tunnel.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200")
        assert tunnel.endswith(b"page /inside for x")
        assert web.requests == {"/a?b=1": 1, "/inside": 1}

        # another port of the same address, a name that is the host's own loopback, a bad request
        for request in (f"CONNECT 127.0.0.1:{port + 1 if port < 65535 else port - 1} HTTP/1.1\r\n\r\n",
                        f"GET http://localhost:{port}/ HTTP/1.1\r\n\r\n", "GET /relative HTTP/1.1\r\n\r\n"):
            answer = _ask(tmp_path, request.encode())
            assert answer.split(b"\r\n", 1)[0] in (b"HTTP/1.1 403 Forbidden", b"HTTP/1.1 400 Error"), request
        assert b"not on this desktop's allow-list" in _ask(tmp_path, b"CONNECT example.org:443 HTTP/1.1\r\n\r\n")
        assert sum(web.requests.values()) == 2
    finally:
        proxy.close()


def test_any_public_host_never_lets_through_an_address_of_the_hosts_own_networks(tmp_path, web):
    port = web.server.server_address[1]
    proxy = WebProxy(tmp_path, HostAllowList(["*"]))
    try:
        for target in (f"localhost:{port}", f"127.0.0.1:{port}"):
            answer = _ask(tmp_path, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 403") and b"an address of this host's networks" in answer
        assert not web.requests
    finally:
        proxy.close()


def test_a_desktop_folder_deeper_than_a_socket_path_may_be_still_reaches_its_ports_and_the_web(tmp_path, web):
    """A unix socket's path holds 108 bytes; a desktop's folder under a long --workdir is deeper."""
    deep = tmp_path / ("d" * 80) / ("e" * 80)
    deep.mkdir(parents=True)
    folder = SocketFolder(deep)
    guest = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # the desktop's side of its Chrome port
    guest.bind(folder.path("chromium.sock"))
    guest.listen(1)
    published = PublishedPorts("127.0.0.1", deep)
    proxy = WebProxy(deep, HostAllowList([web.url.removeprefix("http://")]))
    try:
        with socket.create_connection(("127.0.0.1", published.ports["chromium"]), timeout=10):
            conn, _ = guest.accept()  # the host's TCP port led to the socket in the deep folder
            conn.close()
        answer = _ask(deep, f"GET {web.url}/deep HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"page /deep for x")
    finally:
        published.close()
        proxy.close()
        guest.close()
        folder.close()


def test_patterns_match_hosts_ports_and_subdomains():
    allow = HostAllowList(["www.delta.com", "*.github.com", "127.0.0.2:8000", "[::1]:9", "WIKIPEDIA.org:443"])
    assert allow.allows("www.delta.com", 443) and allow.allows("WWW.DELTA.COM", 80)
    assert allow.allows("github.com", 443) and allow.allows("raw.github.com", 443)
    assert not allow.allows("evilgithub.com", 443) and not allow.allows("delta.com", 443)
    assert allow.allows("127.0.0.2", 8000) and not allow.allows("127.0.0.2", 8001)
    assert allow.allows("::1", 9) and allow.allows("wikipedia.org", 443) and not allow.allows("wikipedia.org", 80)
    assert allow.names_address("127.0.0.2") and allow.names_address("::1") and not allow.names_address("127.0.0.1")
    for bad in ("", "a b", "http://x", "x:0", "x:99999", "x:port", "[::1]x", "user@host"):
        with pytest.raises(ValueError, match="not a host or host:port"):
            HostAllowList([bad])


@given(st.lists(st.text(max_size=30), max_size=4), st.text(max_size=30), st.integers(0, 70000))
def test_any_pattern_is_taken_or_refused_by_name_and_matching_never_fails(patterns, host, port):
    try:
        allow = HostAllowList(patterns)
    except ValueError as e:
        assert "not a host or host:port" in str(e)
        return
    assert allow.allows(host, port) in (True, False)
    assert allow.allows(host, port) is allow.allows(host.upper(), port) or host.upper().lower() != host.lower()
