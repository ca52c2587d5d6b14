"""A desktop's folder of unix sockets, reached from the host by a short path: a socket path may hold
108 bytes, and the folder can sit deep (a test's tmp_path, a long --workdir); through an fd of the
folder, `/proc/self/fd/<fd>/<name>` is always short, for connect() and bind() alike."""

import os


class SocketFolder:
    def __init__(self, folder) -> None:
        self._fd: int | None = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def path(self, name: str) -> str:
        return f"/proc/self/fd/{self._fd}/{name}"

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
