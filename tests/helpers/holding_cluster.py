"""A stand-in for DART's env-cluster server (the real one's desktops cannot run here) that holds every
screenshot request for ever: each episode that starts waits on it. It allocates and releases at once,
speaking the protocol's own routes and answers, and counts what it saw at GET /stats.

Run as a script in a process of its own (stdlib only, one asyncio loop: thousands of held requests cost
it nothing); it prints its port, then serves until killed.
"""

import asyncio
import json
import re
import sys

_LENGTH = re.compile(rb"(?i)\r\ncontent-length:\s*([0-9]+)")


class Holding:
    def __init__(self):
        self.stats = {"allocated": 0, "held": 0, "released": 0}  # held: screenshot requests, never answered
        self.ids = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                m = _LENGTH.search(head)
                if m:
                    await reader.readexactly(int(m.group(1)))
                path = head.split(b" ", 2)[1].decode()
                body = await self.route(path)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             % len(body) + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def route(self, path: str) -> bytes:
        if path.startswith("/server/getAvailableAndLock"):
            self.stats["allocated"] += 1
            self.ids += 1
            return json.dumps({"data": {"server_id": str(self.ids)}}).encode()
        if path.startswith("/server/execute/"):  # the episode's first screenshot: never answered
            self.stats["held"] += 1
            await asyncio.Event().wait()
        if path.startswith("/server/release/"):
            self.stats["released"] += 1
            return b'{"data": {}}'
        return json.dumps(self.stats).encode()  # GET /stats


async def main() -> None:
    holding = Holding()
    server = await asyncio.start_server(holding.handle, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
