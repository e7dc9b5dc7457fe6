#!/usr/bin/env python3
"""Time to first token after a restart, with the KV disk tier and without.

Starts `kiln serve` (the binary at KILN, default target/release/kiln) with a CPU tier and
`--kv-disk-dir` on an empty folder, sends SESSIONS prompts of TOKENS token ids each
(max_tokens 1: the time is the prefill's), stops the server (a shutdown writes the blocks
still waiting) and starts a new one on the same folder, sends the same prompts again; then once more
with a new server without the disk tier, as a restart is today. Prints each pass's median
time and the prompt tokens served from cache. Extra arguments go to `kiln serve`.
Standard library only.

usage: bench-kv-disk.py [SESSIONS] [TOKENS] [-- SERVE ARGS...]
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

args = sys.argv[1:]
extra = args[args.index("--") + 1:] if "--" in args else []
args = args[: args.index("--")] if "--" in args else args
SESSIONS = int(args[0]) if args else 4
TOKENS = int(args[1]) if len(args) > 1 else 1000
KILN = os.environ.get("KILN", "target/release/kiln")
PORT = 8731
BASE = f"http://127.0.0.1:{PORT}"


def post(body):
    req = urllib.request.Request(
        BASE + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=7200) as r:
        return json.load(r)


def metrics():
    with urllib.request.urlopen(BASE + "/metrics", timeout=60) as r:
        text = r.read().decode()
    return {l.split()[0]: float(l.split()[1]) for l in text.splitlines() if l and not l.startswith("#") and "{" not in l}


def serve(disk):
    cmd = [KILN, "serve", "--port", str(PORT), "--cpu-kv-bytes", str(1 << 30), *extra]
    if disk:
        cmd += ["--kv-disk-dir", disk]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            with urllib.request.urlopen(BASE + "/health", timeout=5):
                return p
        except Exception:
            time.sleep(0.5)
    p.kill()
    sys.exit("kiln serve did not come up")


def run(label):
    times, cached = [], 0
    for s in range(SESSIONS):
        prompt = [(j * 7919 + s * 104729) % 40000 + 100 for j in range(TOKENS)]
        t = time.time()
        r = post({"prompt": prompt, "max_tokens": 1, "temperature": 0})
        times.append(time.time() - t)
        cached += r["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    times.sort()
    return {"pass": label, "median_s": round(times[len(times) // 2], 3),
            "total_s": round(sum(times), 2), "cached_tokens": cached,
            "prompt_tokens": SESSIONS * TOKENS}


def stop(p):
    p.terminate()
    p.wait(timeout=120)


def main():
    disk = tempfile.mkdtemp(prefix="kiln-kv-disk-")
    out = []
    p = serve(disk)
    out.append(run("cold (first server)"))
    t = time.time()
    stop(p)  # a shutdown writes what still waits
    out.append({"shutdown_s": round(time.time() - t, 2)})
    p = serve(disk)
    m = metrics()
    out.append({"blocks_on_disk": m["kiln_kv_disk_blocks_resident"],
                "disk_bytes": m["kiln_kv_disk_bytes_resident"]})
    out.append(run("restarted, disk tier"))
    m = metrics()
    out.append({"restored_blocks": m["kiln_kv_disk_blocks_restored_total"]})
    stop(p)
    p = serve(None)
    out.append(run("restarted, no disk tier"))
    stop(p)
    for o in out:
        print(json.dumps(o))


main()
