#!/usr/bin/env bash
# Execute every notebook in notebooks/ on the fixture data (nbclient); a failing cell fails.
# Installs notebooks/requirements.txt with pip when a module is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import polars, duckdb, matplotlib, nbclient, nbformat, ipykernel" 2>/dev/null; then
  python3 -m pip install -q -r notebooks/requirements.txt 2>/dev/null \
    || python3 -m pip install -q --break-system-packages -r notebooks/requirements.txt
fi
python3 - <<'PY'
import glob, sys, nbformat
from nbclient import NotebookClient
failed = 0
for path in sorted(glob.glob("notebooks/*.ipynb")):
    nb = nbformat.read(path, as_version=4)
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": "notebooks"}}).execute()
        print(f"notebook {path}: every cell ran")
    except Exception as e:
        failed += 1
        print(f"notebook {path}: FAILED: {e}", file=sys.stderr)
sys.exit(1 if failed else 0)
PY
