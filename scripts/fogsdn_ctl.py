#!/usr/bin/env python3
"""Talk to a running testbed's REST API (docs/view.md).

    python scripts/fogsdn_ctl.py [--url http://127.0.0.1:8080] state
    python scripts/fogsdn_ctl.py summary
    python scripts/fogsdn_ctl.py --token-file results/RUN/api_token policy nodiff --param alpha=0.7
    python scripts/fogsdn_ctl.py --token-file results/RUN/api_token policy --file my_policy.py

Writes need the run's token: --token, --token-file, or FOGSDN_TOKEN.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import requests


def value(text: str) -> Any:
    """A --param value: a number or boolean where it reads as one, else the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def policy_body(name: str | None, file: str | None, params: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if name:
        body["name"] = name
    if file:
        body["module"] = str(Path(file).resolve()) if file.endswith(".py") else file
    pairs = {}
    for p in params:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise SystemExit(f"fogsdn_ctl.py: error: --param {p!r}: write KEY=VALUE")
        if k == "alpha":
            body["alpha"] = value(v)
        else:
            pairs[k] = value(v)
    if pairs:
        body["params"] = pairs
    return body


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("FOGSDN_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--token", default=os.environ.get("FOGSDN_TOKEN"))
    ap.add_argument("--token-file", help="the run folder's api_token")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("state", help="GET /api/state")
    sub.add_parser("summary", help="GET /api/summary")
    sub.add_parser("topology", help="GET /api/topology")
    pol = sub.add_parser("policy", help="PUT /api/policy: swap the running policy")
    pol.add_argument("name", nargs="?", help="a registered policy (nodiff, basic, ...)")
    pol.add_argument("--file", help="a policy file (or module) instead of / beside a name")
    pol.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args(argv)
    base = a.url.rstrip("/")
    try:
        if a.cmd == "policy":
            token = a.token or (Path(a.token_file).read_text().strip() if a.token_file else "")
            r = requests.put(f"{base}/api/policy", json=policy_body(a.name, a.file, a.param),
                             headers={"Authorization": f"Bearer {token}"}, timeout=30)
        else:
            r = requests.get(f"{base}/api/{a.cmd}", timeout=10)
    except requests.ConnectionError:
        print(f"fogsdn_ctl.py: error: nothing answers at {base} (is a run going, with its "
              "REST API on that address? --url names another)", file=sys.stderr)
        return 1
    except (requests.RequestException, OSError) as err:
        print(f"fogsdn_ctl.py: error: {err}", file=sys.stderr)
        return 1
    try:
        out = r.json()
    except ValueError:
        out = {"error": r.text.strip()[:200]}
    print(json.dumps(out, indent=1))
    return 0 if r.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
