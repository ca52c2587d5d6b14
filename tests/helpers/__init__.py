"""Helpers of the test suite, one module per concept; tests import them as `from helpers.<module> import ...`.

pytest puts tests/ on sys.path (tests/ has a conftest.py and no __init__.py: its rootdir-based
"prepend" import mode), so `helpers` is this package whether pytest runs from the repo root or
from a fresh clone, with nothing installed. conftest.py holds only fixtures and hooks.

  cli               the real `cua` in a child process: ROOT, CUA, run_cua, start_cua, finish
  processes         signals to a child only as its own process group: signal_group, kill_group
  global_state      the plugin that puts back signal handlers, environment and working directory
  ray_cluster       a real multi-node Ray cluster in a process of its own
  waiting           wait_for: poll a condition, fail naming it
  net               free_port: a loopback port nothing listens on
  envserver         the built-in env server in this process: start_env_server, stop_env_server
  models            the tiny random Qwen2-VL, built here or served by a real vLLM fleet
  servers           loopback servers that answer slowly, wrongly or as scripted (model, env cluster, raw bytes)
  faultproxy        a fault-injecting proxy in front of a real server
  agentgym_standins AgentGym's env servers, as stand-ins speaking their real protocols
  mariadb           a real MariaDB server in a temporary folder
"""
