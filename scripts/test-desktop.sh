#!/usr/bin/env bash
# The desktop app's real window under Xvfb, drawn through wgpu on lavapipe: it opens the
# default model, sends one message in a new chat, waits for the reply and saves the window as
# a PNG (README's screenshot is made by this script). Fails when the window, the adapter or
# the model fails, when no reply was written, or when the picture is missing.
#   scripts/test-desktop.sh [OUT.png]      default: target/desktop-window.png
#   KILN_DESKTOP_MAX_TOKENS=300 KILN_DESKTOP_GREEDY=0 scripts/test-desktop.sh docs/desktop.png
# (greedy by default, so the run is the same each time; the small model loops when greedy)
# The reply's text is saved beside the picture (OUT.reply.txt). KILN_DESKTOP_EXE runs another
# build of the app (scripts/test-desktop-windows.sh: the Windows one under Wine).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/desktop-window.png}
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || scripts/fetch-model.sh
command -v xvfb-run >/dev/null || { apt-get update -qq && apt-get install -y -qq xvfb >/dev/null; }
# scripts/test.sh sets KILN_BUILT: it has built the app with the rest of the workspace, so it
# is not built a second time with the features of a plain build (about 3 minutes).
exe=(target/debug/kiln-desktop)
if [ -n "${KILN_DESKTOP_EXE:-}" ]; then
  read -r -a exe <<<"$KILN_DESKTOP_EXE"
elif [ "${KILN_BUILT:-0}" = 1 ]; then
  [ -x target/debug/kiln-desktop ] || { echo "test-desktop: target/debug/kiln-desktop is missing" >&2; exit 1; }
else
  cargo build -p kiln-desktop
fi
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
# The new chat takes the settings of the chat open at start: a token limit, greedy unless told.
mkdir -p "$data/chats"
temperature='"temperature": 0.0, '
[ "${KILN_DESKTOP_GREEDY:-1}" = 0 ] && temperature=
cat > "$data/chats/0.json" <<JSON
{"id": "0", "title": "New chat", "sampling": {${temperature}"max_tokens": ${KILN_DESKTOP_MAX_TOKENS:-40}}}
JSON
mkdir -p "$(dirname "$out")"
rm -f "$out"
WGPU_BACKEND=${WGPU_BACKEND:-vulkan} timeout 900 xvfb-run -a -s "-screen 0 1280x800x24" \
  "${exe[@]}" --data-dir "$data" --model "$model" \
  --prompt "Write a Rust function that reverses a string, with a short explanation." \
  --screenshot "$out"
python3 - "$out" "$data" <<'PY'
import glob, json, os, struct, sys
out, data = sys.argv[1], sys.argv[2]
with open(out, "rb") as f:
    head = f.read(24)
assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{out} is not a PNG"
w, h = struct.unpack(">II", head[16:24])
# Wine may size the window to its own liking (1024 wide in a fresh prefix): there, any
# window of a usable size will do.
if os.environ.get("KILN_DESKTOP_ANY_SIZE") == "1":
    assert w >= 640 and h >= 480, f"the window is {w}x{h}"
else:
    assert (w, h) == (1100, 720), f"the window is {w}x{h}"
replies = [m for p in glob.glob(f"{data}/chats/*.json") for m in json.load(open(p)).get("messages", [])
           if m["role"] == "assistant"]
assert replies and replies[0]["text"].strip(), "no reply was written"
with open(out.removesuffix(".png") + ".reply.txt", "w") as f:
    f.write(replies[0]["text"])
s = replies[0]["stats"]
print(f"desktop window: {out} ({w}x{h}); reply of {s['generated']} tokens, "
      f"{s['ttft_s']:.2f} s to first token")
PY
