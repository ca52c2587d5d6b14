#!/usr/bin/python3 -I
"""sudo for a desktop: the host's setuid sudo cannot work in a user namespace, so this shim asks the
desktop's PID 1 (sudod.py) to run the command as desktop-root, if the password is `password`.
Supports what OSWorld's tasks use: -S (password from stdin), -u USER, -E, -k/-K, -n/-H/-- and a
prompt on the terminal otherwise. As Ubuntu's sudo, it asks no password again for 15 minutes on the
same terminal (or, without one, from the same parent process): PID 1 keeps those time stamps."""

import array
import json
import os
import socket
import sys

SOCKET = "/run/sudo.sock"


def die(message: str, code: int = 1):
    sys.stderr.write(f"sudo: {message}\n")
    sys.exit(code)


def parse(args: list[str]) -> tuple[dict, list[str]]:
    opts = {"stdin": False, "user": "root", "preserve_env": False, "prompt": "[sudo] password for user: ",
            "non_interactive": False, "reset": False}
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        a = args[i]
        if a == "--":
            i += 1
            break
        if a.startswith("--"):
            if a in ("--stdin",):
                opts["stdin"] = True
            elif a in ("--preserve-env",):
                opts["preserve_env"] = True
            elif a.startswith("--user="):
                opts["user"] = a.split("=", 1)[1]
            elif a == "--user":
                i += 1
                opts["user"] = args[i] if i < len(args) else die("option requires an argument -- 'u'")
            elif a in ("--reset-timestamp", "--remove-timestamp"):
                opts["reset"] = True
            elif a not in ("--set-home", "--login", "--non-interactive"):
                die(f"unrecognized option '{a}'")
            if a == "--non-interactive":
                opts["non_interactive"] = True
            i += 1
            continue
        j = 1
        while j < len(a):
            c = a[j]
            if c == "S":
                opts["stdin"] = True
            elif c == "E":
                opts["preserve_env"] = True
            elif c == "n":
                opts["non_interactive"] = True
            elif c in "uUpg":
                value = a[j + 1:] or (args[i + 1] if i + 1 < len(args) else die(f"option requires an argument -- '{c}'"))
                if not a[j + 1:]:
                    i += 1
                if c == "u":
                    opts["user"] = value
                elif c == "p":
                    opts["prompt"] = value.replace("%p", "user").replace("%u", "user")
                break
            elif c in "kK":
                opts["reset"] = True
            elif c not in "Hiesb":
                die(f"invalid option -- '{c}'")
            j += 1
        i += 1
    return opts, args[i:]


def read_password(opts: dict) -> str | None:
    if opts["non_interactive"]:
        die("a password is required")
    if opts["stdin"]:
        sys.stderr.write(opts["prompt"])
        sys.stderr.flush()
        line = bytearray()
        while True:  # byte by byte: what follows the password belongs to the command
            b = os.read(0, 1)
            if not b or b == b"\n":
                break
            line += b
        return line.decode(errors="replace") if line or b else None
    try:
        import getpass
        return getpass.getpass(opts["prompt"])
    except (OSError, EOFError):
        die("a terminal is required to read the password; either use the -S option to read from "
            "standard input or configure an askpass helper")


def ask(request: dict) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(SOCKET)
        s.sendmsg([json.dumps(request).encode()],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        return json.loads(s.recv(4096) or b"{}")


def main() -> None:
    opts, command = parse(sys.argv[1:])
    if opts["reset"]:
        ask({"reset": True})
    if not command:
        if opts["reset"]:
            return
        die("usage: sudo [-S] [-E] [-u user] command")
    request = {"argv": command, "user": opts["user"], "preserve_env": opts["preserve_env"],
               "env": dict(os.environ), "cwd": os.getcwd(), "password": None}
    reply = ask(request)  # no password yet: a recent one on this terminal may stand
    wrong = 0
    while reply.get("status") in ("need_password", "bad_password"):
        if reply["status"] == "bad_password":
            wrong += 1
            if wrong == 3:
                die("3 incorrect password attempts")
            sys.stderr.write("Sorry, try again.\n")
        request["password"] = read_password(opts)
        if request["password"] is None:
            die("no password was provided")
        reply = ask(request)
    if reply.get("status") != "exit":
        die(reply.get("message", "internal error"))
    sys.exit(reply["code"] & 0xFF if reply["code"] >= 0 else 128 - reply["code"])


if __name__ == "__main__":
    main()
