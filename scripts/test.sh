#!/usr/bin/env bash
# Installs what is missing, checks the docs, then runs the whole test suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup_env.sh"
cd "$ROOT"

# The docs: the generated pages are current, and the site builds without a single warning.
# The site goes to a temporary folder, never into the repo. Not `mkdocs build -q`: it hides the
# warnings from --strict too, so the output is kept aside and shown only when the build fails.
.venv/bin/python scripts/gen_docs.py --check
DOCS_TMP="$(mktemp -d)"
trap 'rm -rf "$DOCS_TMP"' EXIT
if ! NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$DOCS_TMP/site" >"$DOCS_TMP/log" 2>&1; then
    cat "$DOCS_TMP/log" >&2
    echo "docs: mkdocs build --strict failed (above)" >&2
    exit 1
fi
rm -rf "$DOCS_TMP"
trap - EXIT

exec .venv/bin/python -m pytest -q "$@"
