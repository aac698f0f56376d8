"""Run Node.js scripts that use MongoDB's Node.js driver (`mongodb` from npm, installed
under `.ci/node` by the README's test command) against the test server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def node_modules() -> Path | None:
    """The `node_modules` holding the driver, or None."""
    base = ROOT / ".ci" / "node" / "node_modules"
    return base if (base / "mongodb").is_dir() else None


def run_node(uri: str, body: str, timeout: float = 60.0) -> Any:
    """Run `body` inside an async function with `client` (a connected MongoClient) and
    `db` (its default database); the function's return value comes back as relaxed EJSON."""
    modules = node_modules()
    node = shutil.which("node")
    if modules is None or node is None:
        pytest.fail("the Node.js driver is not installed (the README test command installs it)")
    script = f"""
const {{ MongoClient, BSON }} = require('mongodb');
(async () => {{
  const client = new MongoClient({json.dumps(uri)}, {{ serverSelectionTimeoutMS: 10000 }});
  await client.connect();
  try {{
    const out = await (async () => {{ {body} }})();
    console.log(BSON.EJSON.stringify(out === undefined ? null : out, {{ relaxed: true }}));
  }} finally {{
    await client.close();
  }}
}})().catch(e => {{ console.error(e); process.exit(1); }});
"""
    res = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "NODE_PATH": str(modules)})
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])
