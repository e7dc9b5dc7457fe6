#!/usr/bin/env python3
"""Time between tokens of running streams while a long prompt arrives (chunked prefill).

Starts STREAMS streaming completions that decode for a long time, waits until each has
produced a few tokens, then sends one LONG-token prompt (token ids, max_tokens 1). Prints,
for the streams, the largest gap between two tokens and the 99th percentile of the gaps
while the long prompt was being prefilled, and the long prompt's time to first token.
Run it against `kiln serve` started with different --max-num-batched-tokens: a budget at
least the prompt's length prefills it in one step (chunked prefill off for it), a smaller
one in chunks that share steps with the decodes. Standard library only.

usage: bench-interference.py BASE_URL [STREAMS] [LONG]
"""

import json
import sys
import threading
import time
import urllib.request

BASE = sys.argv[1]
STREAMS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
LONG = int(sys.argv[3]) if len(sys.argv) > 3 else 2000


def post(body):
    req = urllib.request.Request(
        BASE + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    return urllib.request.urlopen(req, timeout=7200)


def stream(i, arrivals, stop):
    prompt = [(j * 131 + i * 7 + 11) % 30000 + 200 for j in range(32)]
    body = {"prompt": prompt, "max_tokens": 2000, "ignore_eos": True, "temperature": 0, "stream": True}
    with post(body) as r:
        for line in r:
            if line.startswith(b"data: {"):
                arrivals[i].append(time.time())
            if stop.is_set():
                return


def main():
    arrivals = [[] for _ in range(STREAMS)]
    stop = threading.Event()
    threads = [threading.Thread(target=stream, args=(i, arrivals, stop), daemon=True) for i in range(STREAMS)]
    for t in threads:
        t.start()
    while min(len(a) for a in arrivals) < 5:
        time.sleep(0.05)
    long_prompt = [(j * 7919) % 40000 + 100 for j in range(LONG)]
    sent = time.time()
    with post({"prompt": long_prompt, "max_tokens": 1}) as r:
        json.load(r)
    done = time.time()
    # Tokens of the streams until a few steps after the long prompt's answer.
    time.sleep(max(2.0, 3 * (done - sent) / max(1, LONG // 256)))
    stop.set()
    gaps = []
    for a in arrivals:
        gaps += [b - x for x, b in zip(a, a[1:]) if b > sent and x < done]
    gaps.sort()
    p99 = gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))]
    print(json.dumps({
        "streams": STREAMS,
        "long_prompt_tokens": LONG,
        "long_prompt_ttft_s": round(done - sent, 2),
        "stream_gaps_during_prefill": len(gaps),
        "max_gap_s": round(gaps[-1], 2),
        "p99_gap_s": round(p99, 2),
        "median_gap_s": round(gaps[len(gaps) // 2], 2),
    }))


main()
