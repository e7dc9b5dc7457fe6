#!/usr/bin/env bash
# Offline checks of the Kubernetes files under deploy/ (tests/deploy/check_deploy.py): YAML
# well-formed, each kustomization rendered (kubectl kustomize, or the script's own renderer for
# the subset deploy/ uses when kubectl is absent), core kinds validated against Kubernetes'
# schemas (PyPI kubernetes-validate), InferencePool / HTTPRoute / EPP config checked against the
# fields their specifications require. The venv is cached outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${KILN_DEPLOY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/deploy-venv}"
if ! "$VENV/bin/python" -c "import kubernetes_validate, yaml" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "kubernetes-validate==1.37.0" "pyyaml>=6"
fi
"$VENV/bin/python" tests/deploy/check_deploy.py deploy
