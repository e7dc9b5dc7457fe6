"""Offline checks of deploy/: every file is well-formed YAML, each kustomization renders, the
core kinds in the rendered output validate against Kubernetes' own schemas (the PyPI package
kubernetes-validate, strict: unknown fields are errors), and the Inference Extension and Gateway
API objects (InferencePool, HTTPRoute, the EPP's EndpointPickerConfig) are checked here against
the fields their specifications require, and against each other (selector vs pod labels, ports,
names). What only a cluster can tell (the CRDs' admission, the EPP accepting its config, routing)
is not checked here; README's scale-out section says so.

Usage: check_deploy.py DEPLOY_DIR   (renders with `kubectl kustomize` when kubectl is on PATH,
otherwise with render_kustomize(), the subset of kustomize deploy/ uses)."""

import pathlib
import shutil
import subprocess
import sys

import kubernetes_validate
import yaml

K8S_VERSION = "1.32.0"
CORE_KINDS = {"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "ConfigMap"}
CRD_KINDS = {"InferencePool", "HTTPRoute"}
KILN_METRICS = {
    "queuedRequestsSpec": "kiln_num_requests_waiting",
    "runningRequestsSpec": "kiln_num_requests_running",
    "kvUsageSpec": "kiln_kv_cache_usage_perc",
    "cacheInfoSpec": "kiln_cache_config_info",
}
REQUIRED_SCORERS = {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"}

failures = []


def fail(where, why):
    failures.append(f"{where}: {why}")


def render_kustomize(kdir: pathlib.Path):
    """resources, configMapGenerator (files, no name hash) and images: all deploy/ uses."""
    k = yaml.safe_load((kdir / "kustomization.yaml").read_text())
    known = {"apiVersion", "kind", "resources", "configMapGenerator", "generatorOptions", "images"}
    if set(k) - known:
        raise SystemExit(f"{kdir}: the fallback renderer does not know {sorted(set(k) - known)}; install kubectl")
    docs = []
    for r in k.get("resources", []):
        p = kdir / r
        docs += render_kustomize(p) if p.is_dir() else [d for d in yaml.safe_load_all(p.read_text()) if d]
    for g in k.get("configMapGenerator", []):
        data = {pathlib.Path(f).name: (kdir / f).read_text() for f in g.get("files", [])}
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": g["name"]}, "data": data})
    images = {i["name"]: f'{i.get("newName", i["name"])}:{i["newTag"]}' if "newTag" in i else i.get("newName", i["name"]) for i in k.get("images", [])}
    for d in docs:
        for c in (d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []) or []):
            if c.get("image") in images:
                c["image"] = images[c["image"]]
    return docs


def render(kdir: pathlib.Path):
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "kustomize", str(kdir)], check=True, capture_output=True, text=True).stdout
        return [d for d in yaml.safe_load_all(out) if d]
    return render_kustomize(kdir)


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def get(d, path, where):
    cur = d
    for p in path.split("."):
        if not isinstance(cur, dict) or p not in cur:
            fail(where, f"missing required field {path}")
            return None
        cur = cur[p]
    return cur


def pod_labels_and_ports(docs):
    out = []
    for dep in by_kind(docs, "Deployment"):
        tmpl = dep["spec"]["template"]
        ports = {p["containerPort"] for c in tmpl["spec"]["containers"] for p in c.get("ports", [])}
        out.append((dep["metadata"]["name"], tmpl["metadata"].get("labels", {}), ports))
    return out


def check_pool(pool, docs, where):
    sel = get(pool, "spec.selector.matchLabels", where) or {}
    if not sel:
        fail(where, "spec.selector.matchLabels must not be empty")
    ports = get(pool, "spec.targetPorts", where) or []
    if not 1 <= len(ports) <= 8 or not all(isinstance(p.get("number"), int) and 1 <= p["number"] <= 65535 for p in ports):
        fail(where, f"spec.targetPorts must hold 1..8 ports with a number: {ports}")
    ref = get(pool, "spec.endpointPickerRef", where) or {}
    if not ref.get("name"):
        fail(where, "spec.endpointPickerRef.name is required")
    if ref.get("kind", "Service") == "Service" and not isinstance(ref.get("port", {}).get("number"), int):
        fail(where, "spec.endpointPickerRef.port.number is required for a Service")
    if ref.get("failureMode", "FailClose") not in ("FailOpen", "FailClose"):
        fail(where, f"failureMode {ref.get('failureMode')!r}")
    # The selector picks model-server pods that listen on every target port.
    selected = [(n, ports_) for n, labels, ports_ in pod_labels_and_ports(docs) if sel and all(labels.get(k) == v for k, v in sel.items())]
    if not selected:
        fail(where, f"selector {sel} matches no Deployment's pods")
    for n, ports_ in selected:
        for p in ports:
            if p.get("number") not in ports_:
                fail(where, f"target port {p.get('number')} is not a container port of {n}")
    # The EPP Service exists, exposes the port and selects the EPP pods.
    svc = [s for s in by_kind(docs, "Service") if s["metadata"]["name"] == ref.get("name")]
    if not svc:
        fail(where, f"endpointPickerRef names Service {ref.get('name')!r}, which is not rendered")
    elif ref.get("port", {}).get("number") not in {p["port"] for p in svc[0]["spec"]["ports"]}:
        fail(where, f"Service {ref.get('name')} has no port {ref.get('port')}")


def check_route(route, pools, where):
    parents = get(route, "spec.parentRefs", where) or []
    if not parents or not all(p.get("name") for p in parents):
        fail(where, "spec.parentRefs needs at least one ref with a name")
    rules = get(route, "spec.rules", where) or []
    backends = [b for r in rules for b in r.get("backendRefs", [])]
    if not backends:
        fail(where, "no backendRefs")
    for b in backends:
        if b.get("group") != "inference.networking.k8s.io" or b.get("kind") != "InferencePool":
            fail(where, f"backendRef {b} is not an InferencePool of inference.networking.k8s.io")
        elif b.get("name") not in pools:
            fail(where, f"backendRef names pool {b.get('name')!r}, not rendered (have {sorted(pools)})")


def check_epp_config(cfg, where, engine_label_key):
    if cfg.get("apiVersion") != "inference.networking.x-k8s.io/v1alpha1" or cfg.get("kind") != "EndpointPickerConfig":
        fail(where, f"apiVersion/kind {cfg.get('apiVersion')}/{cfg.get('kind')}")
    plugins = cfg.get("plugins") or []
    names = {}
    for p in plugins:
        if "type" not in p:
            fail(where, f"plugin without type: {p}")
            continue
        names[p.get("name", p["type"])] = p
    if len(names) != len(plugins):
        fail(where, "plugin names (or types, for unnamed plugins) must be unique")
    extractor = [p for p in plugins if p.get("type") == "core-metrics-extractor"]
    if len(extractor) != 1:
        fail(where, "exactly one core-metrics-extractor")
    else:
        params = extractor[0].get("parameters", {})
        engines = {e.get("name"): e for e in params.get("engineConfigs", [])}
        kiln = engines.get("kiln")
        if not kiln:
            fail(where, "core-metrics-extractor has no `kiln` engine entry")
        else:
            for k, v in KILN_METRICS.items():
                if kiln.get(k) != v:
                    fail(where, f"kiln engine {k} = {kiln.get(k)!r}, kiln exposes {v!r}")
            if kiln.get("loraSpec", None) != "":
                fail(where, "loraSpec must be present and empty (kiln has no LoRA; engine entries replace defaults whole)")
        if params.get("defaultEngine") not in engines:
            fail(where, f"defaultEngine {params.get('defaultEngine')!r} is not an engine entry")
        if params.get("engineLabelKey", "inference.networking.k8s.io/engine-type") != engine_label_key:
            fail(where, f"engineLabelKey differs from the pods' label {engine_label_key}")
    profiles = cfg.get("schedulingProfiles") or []
    if not profiles:
        fail(where, "no schedulingProfiles")
    used = set()
    for prof in profiles:
        if not prof.get("name"):
            fail(where, "a scheduling profile without a name")
        for ref in prof.get("plugins") or []:
            r = ref.get("pluginRef")
            used.add(r)
            if r not in names:
                fail(where, f"profile {prof.get('name')} refers to undefined plugin {r!r}")
            if "weight" in ref and not (isinstance(ref["weight"], int) and ref["weight"] > 0):
                fail(where, f"weight of {r} must be a positive integer")
        types = {names[r.get("pluginRef")]["type"] for r in prof.get("plugins") or [] if r.get("pluginRef") in names}
        if not types & {"max-score-picker", "random-picker", "weighted-random-picker"}:
            fail(where, f"profile {prof.get('name')} has no picker")
    for src in (cfg.get("dataLayer") or {}).get("sources", []):
        for r in [src.get("pluginRef")] + [e.get("pluginRef") for e in src.get("extractors", [])]:
            used.add(r)
            if r not in names:
                fail(where, f"dataLayer refers to undefined plugin {r!r}")
    if missing := REQUIRED_SCORERS - {names[u]["type"] for u in used if u in names}:
        fail(where, f"scorers not used by any profile: {sorted(missing)}")


def check_epp_deployment(docs, cfg_map_name, pools, where):
    epps = [d for d in by_kind(docs, "Deployment") if any("--config-file" in " ".join(c.get("args", [])) for c in d["spec"]["template"]["spec"]["containers"])]
    if len(epps) != 1:
        fail(where, f"expected one EPP Deployment (a container with --config-file), found {len(epps)}")
        return
    spec = epps[0]["spec"]["template"]["spec"]
    c = spec["containers"][0]
    args = dict(a.lstrip("-").split("=", 1) for a in c.get("args", []) if "=" in a)
    if args.get("pool-name") not in pools:
        fail(where, f"EPP --pool-name {args.get('pool-name')!r} is no rendered pool")
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v.get("configMap", {}).get("name") for v in spec.get("volumes", [])}
    cfg_path = args.get("config-file", "")
    ok = any(vols.get(n) == cfg_map_name and cfg_path.startswith(p.rstrip("/") + "/") for n, p in mounts.items())
    if not ok:
        fail(where, f"--config-file {cfg_path} is not in a mount of ConfigMap {cfg_map_name}")
    if not spec.get("serviceAccountName"):
        fail(where, "the EPP needs a ServiceAccount (it watches pods and pools)")


def check_model_servers(docs, where):
    for name, labels, ports in pod_labels_and_ports(docs):
        dep = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == name][0]
        spec = dep["spec"]["template"]["spec"]
        for c in spec["containers"]:
            if c.get("args", [None])[0] != "serve":
                continue
            probe = c.get("readinessProbe", {}).get("httpGet", {})
            if probe.get("path") != "/health":
                fail(f"{where} {name}", "readiness must be GET /health")
            if "preStop" not in c.get("lifecycle", {}) or spec.get("terminationGracePeriodSeconds", 30) < 60:
                fail(f"{where} {name}", "graceful termination: a preStop and at least 60 s of grace")
            if labels.get("inference.networking.k8s.io/engine-type") != "kiln":
                fail(f"{where} {name}", "kiln pods carry inference.networking.k8s.io/engine-type: kiln")


def check_overlay(kdir: pathlib.Path):
    where = str(kdir)
    docs = render(kdir)
    for d in docs:
        kind, name = d.get("kind"), d.get("metadata", {}).get("name")
        if kind in CORE_KINDS:
            try:
                kubernetes_validate.validate(d, K8S_VERSION, strict=True)
            except kubernetes_validate.ValidationError as e:
                fail(f"{where} {kind}/{name}", f"schema: {e.message} at {list(e.path)}")
        elif kind not in CRD_KINDS:
            fail(f"{where} {kind}/{name}", "a kind this check does not know")
    pools = {p["metadata"]["name"] for p in by_kind(docs, "InferencePool")}
    if not pools:
        fail(where, "no InferencePool")
    for p in by_kind(docs, "InferencePool"):
        if p.get("apiVersion") != "inference.networking.k8s.io/v1":
            fail(where, f"InferencePool apiVersion {p.get('apiVersion')}")
        check_pool(p, docs, f"{where} InferencePool/{p['metadata']['name']}")
    routes = by_kind(docs, "HTTPRoute")
    if not routes:
        fail(where, "no HTTPRoute")
    for r in routes:
        if r.get("apiVersion") != "gateway.networking.k8s.io/v1":
            fail(where, f"HTTPRoute apiVersion {r.get('apiVersion')}")
        check_route(r, pools, f"{where} HTTPRoute/{r['metadata']['name']}")
    cms = [(m["metadata"]["name"], k, v) for m in by_kind(docs, "ConfigMap") for k, v in m.get("data", {}).items() if "EndpointPickerConfig" in v]
    if len(cms) != 1:
        fail(where, f"expected one ConfigMap holding an EndpointPickerConfig, found {len(cms)}")
    else:
        check_epp_config(yaml.safe_load(cms[0][2]), f"{where} ConfigMap/{cms[0][0]}", "inference.networking.k8s.io/engine-type")
        check_epp_deployment(docs, cms[0][0], pools, where)
    check_model_servers(docs, where)
    return len(docs)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "deploy")
    for f in sorted(root.rglob("*.yaml")):
        try:
            list(yaml.safe_load_all(f.read_text()))
        except yaml.YAMLError as e:
            fail(str(f), f"not well-formed YAML: {e}")
    kdirs = sorted(p.parent for p in root.rglob("kustomization.yaml"))
    for k in kdirs:
        n = check_overlay(k)
        print(f"{k}: {n} objects rendered and checked")
    if failures:
        print("\n".join(["deploy check FAILED:"] + failures))
        sys.exit(1)
    print(f"deploy: {len(kdirs)} kustomizations pass (Kubernetes {K8S_VERSION} schemas for {sorted(CORE_KINDS)})")


if __name__ == "__main__":
    main()
