#!/usr/bin/env bash
# Fetches a lavapipe that offers cooperative matrices (Mesa 26 from Debian's trixie-backports,
# with the trixie libraries it links against, glibc included) into a cache, without installing
# anything: the packages are unpacked into a folder of their own. Prints the folder; run a
# program on that lavapipe with
#   VK_DRIVER_FILES=$dir/lvp_icd.json $dir/lib/ld-linux-x86-64.so.2 --library-path $dir/lib PROGRAM
# (the newer glibc's loader runs programs built against the system's older one).
# The system's Mesa (bookworm-backports' 25.0) has no VK_KHR_cooperative_matrix on lavapipe, so
# this is how the cooperative-matrix kernel runs in the tests here (scripts/test-cooperative.sh).
set -euo pipefail

dir="${KILN_LAVAPIPE_COOP:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/lavapipe-coop}"
lib="$dir/lib"
if [ -f "$dir/lvp_icd.json" ] && [ -f "$lib/libvulkan_lvp.so" ]; then
  echo "$dir"
  exit 0
fi
[ "$(uname -m)" = x86_64 ] || { echo "fetch-lavapipe-coop: x86_64 only" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "fetch-lavapipe-coop: needs apt-get" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/debs" "$work/root"
cat >"$work/sources.list" <<'EOF'
deb http://deb.debian.org/debian trixie main
deb http://deb.debian.org/debian trixie-backports main
EOF
apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$work/lists" -o Dir::Cache="$work/cache" -o APT::Sandbox::User=root)
mkdir -p "$work/cache/archives/partial"
apt-get "${apt[@]}" update -qq
# lavapipe from backports, with the LLVM it was built against; what they link against from
# trixie (every library `ld.so --list` names below must resolve inside the folder).
llvm="$(apt-cache "${apt[@]}" show mesa-vulkan-drivers/trixie-backports | awk '
  /^Depends:/ && !found && match($0, /libllvm[0-9]+/) { print substr($0, RSTART, RLENGTH); found = 1 }')"
[ -n "$llvm" ] || { echo "fetch-lavapipe-coop: no LLVM among Mesa's dependencies" >&2; exit 1; }
(cd "$work/debs" && apt-get "${apt[@]}" download -qq \
  mesa-vulkan-drivers/trixie-backports "$llvm" libvulkan1 \
  libc6 libstdc++6 libgcc-s1 zlib1g libzstd1 libdrm2 libexpat1 libxcb1 libxcb-randr0 \
  libx11-xcb1 libx11-6 libxcb-dri3-0 libxcb-present0 libxcb-xfixes0 libxcb-sync1 libxcb-shm0 \
  libxshmfence1 libwayland-client0 libdisplay-info2 libxau6 libxdmcp6 libbsd0 libmd0 \
  libffi8 libedit2 libxml2 libz3-4 libtinfo6 libicu76 liblzma5 libsensors5 libelf1t64)
for deb in "$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
done

mkdir -p "$lib"
cp -a "$work"/root/usr/lib/x86_64-linux-gnu/. "$lib/"
cp -a "$work"/root/lib/x86_64-linux-gnu/. "$lib/" 2>/dev/null || true
# Mesa's other drivers and OpenGL parts are not needed.
find "$lib" -maxdepth 1 -name 'libvulkan_*.so' ! -name libvulkan_lvp.so -delete
rm -rf "$lib/dri" "$lib/gbm" "$lib/libVkLayer_"*
if ! listed="$("$lib/ld-linux-x86-64.so.2" --library-path "$lib" --list "$lib/libvulkan_lvp.so" 2>&1)" \
   || grep -q 'not found' <<<"$listed"; then
  echo "fetch-lavapipe-coop: lavapipe's libraries do not all resolve in $lib:" >&2
  echo "$listed" >&2
  rm -rf "$lib"
  exit 1
fi
printf '{ "file_format_version": "1.0.1", "ICD": { "library_path": "%s", "api_version": "1.4.0" } }\n' \
  "$lib/libvulkan_lvp.so" >"$dir/lvp_icd.json"
echo "$dir"
