"""OSWorld's tasks through cua: its task files, their setup steps and its evaluator, run on the
client as OSWorld runs them, against OSWorld's in-VM HTTP API (see docs and notes/osworld.md).

    desktop_api   the client of the in-VM server (port 5000): every call has a deadline
    local_files   the client's own files: per-task folders, safe names, the download cache
    task_files    OSWorld's task layouts -> cua task dicts; clear errors for bad files
    setup         the `config` / `postconfig` steps
    getters/      evaluator getters: what the metric compares, one module per family of apps
    metrics/      evaluator metrics: plain functions over values and files, one module per family
    registry      how families register getters and metrics, and the extra each needs
    evaluator     OSWorld's scoring rule: postconfig, the infeasible rule, func/conj
    support       which steps, getters and metrics a task uses that cua lacks

Nothing here runs task or model code on the client: commands go to the desktop as data.
"""

# The OSWorld evaluator code cua's scores follow (its getters, metrics and their quirks): the code
# behind OSWorld-Verified, on PyPI. Each OSWorld run records it in run.json as `scored_as`.
OSWORLD_EVALUATOR = "OSWorld desktop-env 1.0.2"
