#!/usr/bin/env bash
# Browser test of the WebGPU build: headless Chromium on SwiftShader must produce the same greedy
# token ids as the native engine (lavapipe, WGPU_BACKEND=vulkan) for a tiny random GGUF model,
# with two generations running at once on one engine, then one alone (timed), then one with
# repetition, presence and frequency penalties; then the demo page itself, driven through its
# controls (web-demo/test/demo.html): its greedy and penalised replies, made with guesses of
# their next tokens, must be the native front end's, a stop string must cut the reply, the
# model file must be kept in the browser and read from there the next time, and so on.
#
# Usage: scripts/test-web.sh            (builds with scripts/build-web.sh first)
#   SKIP_BUILD=1           reuse web-demo/pkg
#   CHROMIUM_EXTRA_FLAGS   more flags for Chromium
#   CHROMIUM_WEBGPU_FLAGS  replaces the flags that turn on SwiftShader WebGPU (set it to
#                          "--disable-features=WebGPU" to see the test fail without an adapter)
#   KILN_WEB_MODEL=FILE    also run FILE (e.g. models/SmolLM2-135M-Instruct.Q4_1.gguf) and report
#                          its speed; its ids are compared too, a mismatch there only warns
# Fails when no WebGPU adapter is found, on any error in the page, or on any id mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [[ -z "${SKIP_BUILD:-}" ]]; then
  scripts/build-web.sh
fi
[[ -f web-demo/pkg/kiln_web.js ]] || { echo "test-web: web-demo/pkg is missing; run scripts/build-web.sh" >&2; exit 1; }

chrome=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$chrome" ]]; then
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  chrome=$(command -v chromium)
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

N=16
prompts=('The quick brown fox' 'in the beginning there was')
prompts_json=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${prompts[@]}")

echo "test-web: native greedy ids (WGPU_BACKEND=vulkan)" >&2
# scripts/test.sh sets KILN_BUILT (it has built the workspace's examples already).
[ "${KILN_BUILT:-0}" = 1 ] || cargo build -q -p kiln-web --example web_fixture
fixture=target/debug/examples/web_fixture
WGPU_BACKEND=vulkan "$fixture" "$work" "$N" "${prompts[@]}" > "$work/native.json"

mkdir "$work/site"
for f in web-demo/*; do ln -s "$root/$f" "$work/site/"; done
ln -s "$work/tiny.gguf" "$work/site/tiny.gguf"
ln -s "$work/tiny-think.gguf" "$work/site/tiny-think.gguf"
ln -s "$work/tiny-hf" "$work/site/tiny-hf"
ln -s "$work/tiny-hf-sharded" "$work/site/tiny-hf-sharded"
ln -s "$work/tiny-tools.gguf" "$work/site/tiny-tools.gguf"
ln -s "$work/tiny-kv8.gguf" "$work/site/tiny-kv8.gguf"
ln -s "$work/tiny-lora.gguf" "$work/site/tiny-lora.gguf"
ln -s "$work/tiny-lora-peft" "$work/site/tiny-lora-peft"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

webgpu_flags=${CHROMIUM_WEBGPU_FLAGS-"--enable-unsafe-webgpu --use-webgpu-adapter=swiftshader --enable-unsafe-swiftshader --use-angle=swiftshader"}

# Runs test.html for model $1 (a path under the site) and leaves the page's JSON in $2.
run_page() {
  local model=$1 out=$2 timeout=$3 query
  query=$(python3 -c 'import sys,urllib.parse as u; print(u.urlencode({"model":sys.argv[1],"prompts":sys.argv[2],"n":sys.argv[3],"kvMiB":"64","tools_model":"tiny-tools.gguf",**({"kv8_model":"tiny-kv8.gguf","lora_model":"tiny-lora.gguf"} if sys.argv[1]=="tiny.gguf" else {})}))' "$model" "$prompts_json" "$N")
  run_url "test.html?$query" "$out" "$timeout" "$model"
}

# Opens page $1 (a path and query under the site), leaving the JSON it posts in $2.
run_url() {
  local url=$1 out=$2 timeout=$3 profile=$4
  python3 web-demo/test/server.py "$work/site" "$port" "$timeout" "$out" &
  local server=$!
  pids+=("$server")
  sleep 0.5
  "$chrome" --headless=new --no-sandbox --disable-gpu-sandbox \
    $webgpu_flags \
    --disable-background-networking --disable-component-update --no-first-run --no-default-browser-check \
    --user-data-dir="$work/profile-$profile" --enable-logging=stderr --v=0 --remote-debugging-port=0 \
    ${CHROMIUM_EXTRA_FLAGS:-} \
    "http://127.0.0.1:$port/$url" > "$work/chromium.log" 2>&1 &
  local browser=$!
  pids+=("$browser")
  local rc=0
  wait "$server" || rc=$?
  kill "$browser" 2>/dev/null || true
  wait "$browser" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then
    echo "test-web: the page did not report within ${timeout}s; page console:" >&2
    grep -a "CONSOLE\|Uncaught\|WebGPU" "$work/chromium.log" | tail -30 >&2 || true
    return 1
  fi
}

echo "test-web: headless Chromium (SwiftShader WebGPU) on the tiny model" >&2
run_page tiny.gguf "$work/web.json" 300

python3 - "$work/native.json" "$work/web.json" <<'PY'
import json, sys
native, web = (json.load(open(p)) for p in sys.argv[1:3])
fails = []
if not web.get("ok"):
    fails.append(f"page failed: {web.get('error') or web.get('gpu_error') or 'unknown'}")
else:
    for key in ("prompt_ids", "output_ids", "single_ids", "penalised_ids"):
        if web.get(key) != native.get(key):
            fails.append(f"{key} differ:\n  native {native.get(key)}\n  web    {web.get(key)}")
    # Guessing each decode's next tokens (speculative decoding) changes no id, and guesses
    # were made and some confirmed.
    if web.get("speculative_ids") != web.get("output_ids"):
        fails.append(f"speculative decoding changed the ids:\n  {web.get('speculative_ids')}")
    if "speculativeTokens" not in (web.get("bad_count") or ""):
        fails.append(f"speculativeTokens 2.5 was not refused: {web.get('bad_count')}")
    # 8-bit KV caches in the tab: the native engine's ids with the same cache type, twice
    # the f16 cache's blocks in the same memory, and q8_0 refused where rows are 32 wide.
    kv8 = web.get("kv8") or {}
    for t in ("fp8", "q8_0"):
        got = (kv8.get(t) or {})
        if got.get("outs") != native["kv8_ids"][t]:
            fails.append(f"{t} KV cache ids differ:\n  native {native['kv8_ids'][t]}\n  web    {got.get('outs')}")
        if got.get("kvDtype") != t:
            fails.append(f"the {t} engine reports a {got.get('kvDtype')} KV cache")
    if not (kv8.get("f16_dtype") == "f16" and (kv8.get("fp8") or {}).get("kvBlocks", 0) >= 2 * kv8.get("f16_blocks", 1) - 1):
        fails.append(f"fp8 blocks against f16's: {kv8}")
    if "q8_0" not in (kv8.get("refused") or "") or "accepted" in (kv8.get("refused") or ""):
        fails.append(f"q8_0 on 32-wide K/V rows was not refused: {kv8.get('refused')}")
    # A LoRA adapter in the tab: the native ids through it, which differ from the plain ones.
    lora = web.get("lora") or {}
    if lora.get("outs") != native["lora_ids"] or lora.get("loras") != ["style"]:
        fails.append(f"ids through the LoRA adapter differ:\n  native {native['lora_ids']}\n  web    {lora}")
    if native["lora_ids"] == native["output_ids"]:
        fails.append("the LoRA adapter did not change the ids: the check proves nothing")
    if "no adapter named `nope`" not in (lora.get("unknown") or ""):
        fails.append(f"an unknown adapter was not refused: {lora.get('unknown')}")
    if lora.get("runtime") != native["lora_ids"]:
        fails.append(f"ids through the adapter loaded while running differ:\n  native {native['lora_ids']}\n  web    {lora.get('runtime')}")
    if "not a GGUF file" not in (lora.get("bad_file") or "") or lora.get("after_unload") != []:
        fails.append(f"a bad adapter file was not refused, or the unloaded adapter is listed: {lora}")
    if "no adapter named `style`" not in (lora.get("unloaded") or ""):
        fails.append(f"an unloaded adapter was not refused: {lora.get('unloaded')}")
    g = web.get("guesses") or {}
    if not (0 < g.get("confirmed", 0) <= g.get("made", 0)):
        fails.append(f"speculative decoding in the page: {g}")
    # The penalties must change the greedy reply, or the comparison above proves nothing.
    if native.get("penalised_ids") == native.get("single_ids", [])[:24]:
        fails.append("the penalties did not change the greedy ids")
    if "shader-f16" in web.get("device_features", []):
        fails.append("the device was opened with shader-f16")
    c = web.get("constrained") or {}
    import re
    checks = {
        "choice": lambda t: t in ("yes", "no", "maybe"),
        "regex": lambda t: re.fullmatch(r"[0-9]{3}-[a-z]{2}", t) is not None,
        "json": lambda t: isinstance(json.loads(t).get("n"), int) and list(json.loads(t)) == ["n"],
    }
    for key, ok in checks.items():
        out = c.get(key) or {}
        try:
            good = out.get("finished") == "stop" and ok(out.get("text", ""))
        except ValueError:
            good = False
        if not good:
            fails.append(f"structured output {key} in the page: {out}")
    if "cannot be compiled" not in c.get("bad_grammar", ""):
        fails.append(f"a bad grammar was not refused: {c.get('bad_grammar')}")
    # OpenAI's chat completions in the page (openai.js): the greedy reply to "Hello" is the
    # native front end's, whole and streamed, with its usage; unserved fields are refused by
    # name; an aborted stream ends with an AbortError.
    o = web.get("openai") or {}
    reply = native["demo"]["greedy"]["text"]
    for how in ("whole", "streamed"):
        got = o.get(how) or {}
        u = got.get("usage") or {}
        if (got.get("content") != reply or got.get("finish") != "length" or got.get("role") != "assistant"
                or u.get("completion_tokens") != 16 or u.get("total_tokens") != u.get("prompt_tokens", 0) + 16):
            fails.append(f"chat completion ({how}) in the page: {got}, native reply {reply!r}")
    if (o.get("whole") or {}).get("object") != "chat.completion" or (o.get("streamed") or {}).get("chunks", 0) < 4:
        fails.append(f"chat completion objects in the page: {o}")
    for field, refusal in (o.get("refused") or {}).items():
        if not refusal or field not in refusal:
            fails.append(f"`{field}` was not refused by name in the page: {refusal}")
    if len(o.get("refused") or {}) != 3 or o.get("aborted") != "AbortError":
        fails.append(f"chat completions in the page: refusals {o.get('refused')}, abort {o.get('aborted')}")
    # The same reply from the engine in a dedicated worker; a bad file's error comes back.
    wk = web.get("worker") or {}
    if wk.get("content") != reply or wk.get("streamed") != reply or "bad.gguf" not in (wk.get("bad") or ""):
        fails.append(f"the engine in a worker: {wk}, native reply {reply!r}")
    # Tool calling through openai.js (`start_chat`): the required call, whole and streamed,
    # and the reply after the tool's result are the native front end's; a tool message
    # answering no call is refused by its field.
    t, want = web.get("tools") or {}, native["demo"]["tools"]
    as_msg = lambda m: [m.get("content"), m.get("calls"), m.get("finish")]
    if not want["required"]["calls"]:
        fails.append(f"the native reply under tool_choice required made no call: {want['required']}")
    for how in ("whole", "streamed"):
        if as_msg(t.get(how) or {}) != as_msg(want["required"]):
            fails.append(f"tool call ({how}) in the page: {t.get(how)}, native {want['required']}")
    st = t.get("streamed") or {}
    if not st.get("ids") or st.get("chunks", 0) < 4 or not str(t.get("call_id") or "").startswith("call-"):
        fails.append(f"tool call deltas in the page: {st}, call id {t.get('call_id')}")
    if as_msg(t.get("follow") or {}) != as_msg(want["follow"]):
        fails.append(f"the reply after the tool's result in the page: {t.get('follow')}, native {want['follow']}")
    if "tool_call_id" not in (t.get("unanswered") or ""):
        fails.append(f"a tool message answering no call was not refused in the page: {t.get('unanswered')}")
    # The same call from a model whose template renders tools: Hermes `<tool_call>` blocks.
    h = web.get("hermes") or {}
    for how in ("whole", "streamed"):
        if as_msg(h.get(how) or {}) != as_msg(want["hermes"]):
            fails.append(f"Hermes tool call ({how}) in the page: {h.get(how)}, native {want['hermes']}")
    if not want["hermes"]["calls"] or "<tool_call>" not in (h.get("raw") or ""):
        fails.append(f"the Hermes model's reply is not a <tool_call> block: {h}, native {want['hermes']}")
    # Template variables reach the template: the dated prompt is the native one's length.
    dated = want["dated_prompt_tokens"]
    if h.get("datedPromptTokens") != dated or not (h.get("plainPromptTokens") or dated) < dated:
        fails.append(f"chat_template_kwargs in the page: {h.get('datedPromptTokens')} prompt tokens "
                     f"(without: {h.get('plainPromptTokens')}), native {dated}")
    if "chat_template_kwargs" not in (h.get("kwargsInStart") or ""):
        fails.append(f"start() took chat_template_kwargs: {h.get('kwargsInStart')}")
    if (wk.get("tools") or {}).get("calls") != want["required"]["calls"]:
        fails.append(f"tool call from the engine in a worker: {wk.get('tools')}, native {want['required']}")
    # Text completions and embeddings through openai.js: the native front end's greedy
    # completion of "Hello" and its embedding (unit length, within 1e-3 of the native one:
    # SwiftShader and lavapipe round differently), from the page and from a worker.
    c, demo = web.get("completions") or {}, native["demo"]
    for how in ("completion", "streamed"):
        got = c.get(how) or {}
        u = got.get("usage") or {}
        if (got.get("text") != demo["completion"]["text"] or got.get("finish") != "length"
                or got.get("object") != "text_completion" or u.get("completion_tokens") != 16):
            fails.append(f"text completion ({how}) in the page: {got}, native {demo['completion']}")
    e = c.get("embeddings") or {}
    near = lambda v: v is not None and len(v) == len(demo["embedding"]) and max(
        abs(a - b) for a, b in zip(v, demo["embedding"])) < 1e-3
    if (not near(e.get("first")) or e.get("count") != 2 or not e.get("differ") or not e.get("base64_equal")
            or any(abs(n - 1) > 1e-4 for n in e.get("norms") or [0])
            or (e.get("usage") or {}).get("prompt_tokens", 0) < 2):
        fails.append(f"embeddings in the page: {e}, native {demo['embedding'][:4]}...")
    if not near(wk.get("embedding")):
        fails.append(f"an embedding from the engine in a worker: {(wk.get('embedding') or [])[:4]}")
    for field, refusal in (c.get("refused") or {}).items():
        if not refusal or field not in refusal:
            fails.append(f"`{field}` was not refused by name in the page's completions or embeddings: {refusal}")
    lp = o.get("logprobs") or {}
    if (lp.get("content") != reply or lp.get("count") != 16 or lp.get("streamed") != 16
            or not lp.get("greedy_first") or not lp.get("bytes") or lp.get("without") is not None):
        fails.append(f"log-probabilities in the page's chat completions: {lp}")
    # A reply after a prompt that opened a <think> block: all reasoning, equal to the same
    # reply not split.
    r = web.get("reasoning") or {}
    think, none = r.get("think") or {}, r.get("none") or {}
    if not (think.get("text") == "" and none.get("reasoning") == ""
            and think.get("reasoning") and think.get("reasoning") == none.get("text", "").strip("\n")):
        fails.append(f"reasoning in the page: {r}")
    # A thinking budget: the reasoning cut short of the unbounded reply's, then an answer.
    b, u = r.get("budget") or {}, (r.get("unbounded") or {}).get("reasoning", "")
    if not (b.get("reasoning") and u.startswith(b["reasoning"]) and len(b["reasoning"]) < len(u)
            and b.get("text")):
        fails.append(f"thinking budget in the page: {r}")
print(f"native adapter: {native['adapter']}")
print(f"web adapter:    {web.get('adapter')}  features: {', '.join(web.get('adapter_features', []))}")
if web.get("limits"):
    print(f"web device limits: {web['limits']['device']}")
print(f"output ids (native): {native['output_ids']}")
print(f"output ids (web):    {web.get('output_ids')}")
print(f"speculative decoding in the page: {web.get('guesses')} guesses, the same ids")
k = web.get("kv8") or {}
print(f"8-bit KV caches in the page: fp8 and q8_0 ids equal to native; fp8 {(k.get('fp8') or {}).get('kvBlocks')} blocks, f16 {k.get('f16_blocks')} in 16 MiB")
print(f"penalised ids (native): {native['penalised_ids']}")
print(f"penalised ids (web):    {web.get('penalised_ids')}")
print(f"structured outputs in the page: {web.get('constrained')}")
print(f"reasoning in the page: {web.get('reasoning')}")
print(f"chat completions in the page: {web.get('openai')}")
print(f"the engine in a worker: {web.get('worker')}")
print(f"tool calls in the page: {web.get('tools')}")
print(f"Hermes tool calls in the page: {web.get('hermes')}")
print(f"completions and embeddings in the page: {json.dumps(web.get('completions'))[:600]}")
if web.get("single"):
    print(f"tiny model decode, one chat: web {web['single']['decode_tokens_per_s']:.1f} tok/s "
          f"(TTFT {web['single']['ttft_ms']:.0f} ms) vs native {native['decode_tokens_per_s']:.1f} tok/s")
    print(f"tiny model, two chats at once: web {web['batched']['decode_tokens_per_s']:.1f} tok/s total")
for f in fails:
    print("MISMATCH: " + f, file=sys.stderr)
print(f"{0 if fails else 1} passed, {len(fails)} failed")
sys.exit(1 if fails else 0)
PY

echo "test-web: the demo page driven through its controls (web-demo/test/demo.html)" >&2
# The stop string: two printable ASCII characters from inside the native greedy reply.
stop=$(python3 - "$work/native.json" <<'PY'
import json, sys
text = json.load(open(sys.argv[1]))["demo"]["greedy"]["text"]
pick = next((text[i:i + 2] for i in range(3, len(text) - 1)
             if all(c.isascii() and c.isprintable() for c in text[i:i + 2])), None)
if pick is None:
    sys.exit(f"no stop string to try in the greedy reply {text!r}")
print(pick)
PY
)
demo_query=$(python3 -c 'import sys,urllib.parse as u; print(u.urlencode({"model":"tiny.gguf","think_model":"tiny-think.gguf","hf_model":"tiny-hf/","hf_sharded_model":"tiny-hf-sharded/","kv8_model":"tiny-kv8.gguf","lora_model":"tiny-lora.gguf","lora_peft":"tiny-lora-peft/","stop":sys.argv[1]}))' "$stop")
run_url "test/demo.html?$demo_query" "$work/demo.json" 300 demo
python3 - "$work/native.json" "$work/demo.json" "$stop" <<'PY'
import json, re, sys
native, page = (json.load(open(p)) for p in sys.argv[1:3])
stop = sys.argv[3]
want = native["demo"]
fails = []
def same(key, got, expected):
    got = got or {}
    if any(got.get(k) != expected[k] for k in ("text", "reasoning", "finished")):
        fails.append(f"{key}: page {got}, native {expected}")
if not page.get("ok"):
    fails.append(f"page failed: {page.get('error')}")
else:
    # The model file: downloaded and kept, read from the browser's store, then downloaded
    # again once the store was emptied by "Forget kept models".
    loads = [l["status"] for l in page["loads"]]
    origins = ["(downloaded, kept in this browser)", "(from this browser's store, not downloaded)",
               "(downloaded, kept in this browser)"]
    if any(o not in l for o, l in zip(origins, loads)) or page["forgotten"] != "none kept":
        fails.append(f"keeping the model in the browser: loads {loads}, after forgetting {page['forgotten']!r}")
    if page["gets"].get("/tiny.gguf") != 2:
        fails.append(f"the model file was fetched {page['gets'].get('/tiny.gguf')} times, not 2: {page['gets']}")
    # Every reply was made with guesses (the panel's speculative tokens), some confirmed.
    confirmed = [int(m[1]) for r in (page["greedy"], page["penalised"], *page["together"], page["thinking"])
                 if (m := re.search(r"guesses (\d+) of \d+ confirmed", r.get("stats") or ""))]
    if not confirmed or max(confirmed) == 0:
        fails.append(f"no guesses confirmed in the demo page: {page['greedy'].get('stats')}")
    same("greedy reply", page["greedy"], want["greedy"])
    same("penalised reply", page["penalised"], want["penalised"])
    if want["penalised"]["text"] == want["greedy"]["text"]:
        fails.append("the penalties did not change the reply")
    cut = want["greedy"]["text"]
    same(f"reply with stop string {stop!r}", page["stopped"],
         {"text": cut[:cut.index(stop)], "reasoning": "", "finished": "stop"})
    if page["choice"].get("text") not in ("yes", "no", "maybe") or page["choice"].get("finished") != "stop":
        fails.append(f"'one of' output: {page['choice']}")
    if page["bad_schema"].get("text") is not None or "error" not in (page["bad_schema"].get("error") or ""):
        fails.append(f"a schema that is not JSON was not refused in the chat: {page['bad_schema']}")
    import re
    if not re.fullmatch(r"[0-9]{3}", page["regex"].get("text") or "") or page["regex"].get("finished") != "stop":
        fails.append(f"regular-expression output: {page['regex']}")
    try:
        n = json.loads(page["schema"].get("text") or "")["n"]
        if not (isinstance(n, int) and 0 <= n <= 99) or page["schema"].get("finished") != "stop":
            raise ValueError(n)
    except (ValueError, KeyError, TypeError) as e:
        fails.append(f"JSON-schema output ({e!r}): {page['schema']}")
    if not (page["json_object"].get("text") or "").startswith("{"):
        fails.append(f"JSON-object output: {page['json_object']}")
    for i, got in enumerate(page["together"]):
        same(f"chat {i} of two at once", got, want["greedy"])
    # A chat longer than the context: the second long message's prompt left the first
    # exchange out, and the reply is the native one to that message alone.
    same("reply in a chat longer than the context", page["fitted"], want["fitted"])
    if "2 earlier messages left out" not in (page["fitted"].get("stats") or ""):
        fails.append(f"the chat longer than the context did not say what it left out: {page['fitted']}")
    if page["stop_button"].get("finished") != "abort":
        fails.append(f"the Stop button did not abort the reply: {page['stop_button']}")
    # The page's tools: the first reply's call is the native one, run in the page (its
    # result shown after the call), and the tool loop ended.
    tools = page.get("tools") or {}
    native_call = (want["tools"]["demo_page"]["calls"] or [[None, None]])[0]
    first = (tools.get("results") or [""])[0]
    if (not native_call[0] or not first.startswith(f"{native_call[0]}({native_call[1]}) → ")
            or first.endswith("→ ") or "finished:" not in (tools.get("stats") or "")):
        fails.append(f"the demo page's tool call: {tools}, native {want['tools']['demo_page']}")
    # The random model never closes the block its prompt opened: all of it is reasoning.
    same("reply of a model that reasons", page["thinking"], want["thinking"])
    # A Hugging Face folder (config, tokenizer, safetensors) loaded by its URL.
    same("reply of a Hugging Face folder", page["hf"], want["hf"])
    # The same folder in three shards with an index: each shard fetched, the same reply.
    same("reply of a sharded Hugging Face folder", page["hf_sharded"], want["hf"])
    shards = [f"/tiny-hf-sharded/model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    if any(page["gets"].get(s) != 1 for s in shards):
        fails.append(f"the shards were not each fetched once: {page['gets']}")
    if want["hf"]["text"] == want["greedy"]["text"]:
        fails.append("the folder's model replies as the GGUF one does: the check proves nothing")
    # An adapter picked from disk into the page's one LoRA slot and picked for replies: the
    # native reply through it; unloaded, gone from the list.
    lora = page.get("lora") or {}
    same("reply through the adapter picked on the page", lora, want["lora"])
    if want["lora"]["text"] == want["greedy"]["text"] or lora.get("after_unload") != [""]:
        fails.append(f"the page's adapter: {lora}, native {want['lora']}")
    # The same adapter as a PEFT folder picked on the page: the same reply.
    same("reply through the PEFT folder picked on the page", page.get("lora_peft") or {}, want["lora"])
    # The panel's KV cache type reached the engine: q8_0's blocks, and a reply through them.
    kv8 = page.get("kv8") or {}
    if "KV blocks of q8_0" not in (kv8.get("status") or "") or kv8.get("finished") not in ("length", "stop"):
        fails.append(f"the panel's q8_0 KV cache: {kv8}")
    if not want["thinking"]["reasoning"] or want["thinking"]["text"]:
        fails.append(f"the native reply of the reasoning model is not all reasoning: {want['thinking']}")
print(f"demo page: {page.get('loaded')}")
print(f"demo page replies: {json.dumps({k: v for k, v in page.items() if k not in ('ok', 'loaded', 'long_first')}, ensure_ascii=False)}")
for f in fails:
    print("MISMATCH: " + f, file=sys.stderr)
print(f"demo page: {0 if fails else 1} passed, {len(fails)} failed")
sys.exit(1 if fails else 0)
PY

if [[ -n "${KILN_WEB_MODEL:-}" ]]; then
  model=$(realpath "$KILN_WEB_MODEL")
  echo "test-web: $model, native then browser" >&2
  WGPU_BACKEND=vulkan "$fixture" --model "$model" "$work" "$N" "${prompts[@]}" > "$work/native2.json"
  ln -s "$model" "$work/site/big.gguf"
  run_page big.gguf "$work/web2.json" 600
  python3 - "$work/native2.json" "$work/web2.json" <<'PY'
import json, sys
native, web = (json.load(open(p)) for p in sys.argv[1:3])
if not web.get("ok"):
    print(f"page failed: {web.get('error') or web.get('gpu_error')}", file=sys.stderr)
    sys.exit(1)
same = all(web.get(k) == native.get(k) for k in ("prompt_ids", "output_ids", "single_ids"))
print(f"{'ids match' if same else 'WARNING: ids differ from native'}")
print(f"one chat: web {web['single']['decode_tokens_per_s']:.2f} tok/s (TTFT {web['single']['ttft_ms']:.0f} ms, load {web['load_s']:.1f} s) "
      f"vs native {native['decode_tokens_per_s']:.2f} tok/s; two chats at once: web {web['batched']['decode_tokens_per_s']:.2f} tok/s total")
PY
fi
