"""Offline checks of deploy/: every file is well-formed YAML, each kustomization renders, the
core kinds in the rendered output validate against Kubernetes' own schemas (the PyPI package
kubernetes-validate, strict: unknown fields are errors), and the Inference Extension and Gateway
API objects (InferencePool, HTTPRoute, the EPP's EndpointPickerConfig) are checked here against
the fields their specifications require, and against each other (selector vs pod labels, ports,
names). What only a cluster can tell (the CRDs' admission, the EPP accepting its config, routing)
is not checked here; README's scale-out section says so.

A kustomization with prefill/decode roles (deploy/pd) is also checked for how its parts connect
(check_pd): the pool selects the decode pods and not the prefill pods, the pd-proxy sidecar
listens on the pool's target port and sends the decode leg to kiln in its own pod and the
prefill leg to a Service that selects the producers, the producers announce their pod IP, the
consumers have a CPU tier.

Usage: check_deploy.py DEPLOY_DIR   (renders with `kubectl kustomize` when kubectl is on PATH,
and then also with render_kustomize(), the subset of kustomize deploy/ uses, which must give
the same objects; without kubectl, with render_kustomize() alone)."""

import pathlib
import shutil
import subprocess
import sys
import urllib.parse

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
SERVE_PORT = 8000  # kiln serve's default --port

failures = []


def fail(where, why):
    failures.append(f"{where}: {why}")


# Lists a strategic merge patch merges item by item, by this key (Kubernetes' patchMergeKey);
# other lists are replaced whole.
MERGE_KEYS = {"containers": "name", "initContainers": "name", "env": "name", "volumes": "name",
              "volumeMounts": "mountPath", "ports": "containerPort"}


def strip_directives(v):
    if isinstance(v, dict):
        return {k: strip_directives(x) for k, x in v.items() if k != "$patch"}
    if isinstance(v, list):
        return [strip_directives(x) for x in v if not (isinstance(x, dict) and x.get("$patch") == "replace" and len(x) == 1)]
    return v


def merge_patch(base, patch, field=None):
    """The part of kustomize's strategic merge deploy/ uses: maps merge (null deletes a key),
    MERGE_KEYS lists merge by key (`$patch: delete` removes an item), a `$patch: replace` item
    replaces the list, other lists and scalars are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge_patch(out[k], v, k) if k in out else strip_directives(v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and field in MERGE_KEYS:
        if {"$patch": "replace"} in patch:
            return strip_directives(patch)
        key, out = MERGE_KEYS[field], list(base)
        for p in patch:
            i = next((i for i, b in enumerate(out) if b.get(key) == p.get(key)), None)
            if p.get("$patch") == "delete":
                if i is not None:
                    del out[i]
            elif i is None:
                out.append(strip_directives(p))
            else:
                out[i] = merge_patch(out[i], p)
        return out
    return strip_directives(patch)


def pod_containers(spec, sidecars_only=True):
    """The pod's long-running containers: containers and native sidecars (initContainers with
    restartPolicy Always)."""
    inits = [c for c in spec.get("initContainers", []) or [] if c.get("restartPolicy") == "Always" or not sidecars_only]
    return (spec.get("containers", []) or []) + inits


def render_kustomize(kdir: pathlib.Path):
    """resources, configMapGenerator (files, no name hash), patches (strategic merge, from a
    file) and images: all deploy/ uses."""
    k = yaml.safe_load((kdir / "kustomization.yaml").read_text())
    known = {"apiVersion", "kind", "resources", "configMapGenerator", "generatorOptions", "patches", "images"}
    if set(k) - known:
        raise SystemExit(f"{kdir}: the fallback renderer does not know {sorted(set(k) - known)}; install kubectl")
    docs = []
    for r in k.get("resources", []):
        p = kdir / r
        docs += render_kustomize(p) if p.is_dir() else [d for d in yaml.safe_load_all(p.read_text()) if d]
    for g in k.get("configMapGenerator", []):
        data = {pathlib.Path(f).name: (kdir / f).read_text() for f in g.get("files", [])}
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": g["name"]}, "data": data})
    for pt in k.get("patches", []):
        if set(pt) != {"path"}:
            raise SystemExit(f"{kdir}: the fallback renderer takes patches from a file only ({pt}); install kubectl")
        for patch in [d for d in yaml.safe_load_all((kdir / pt["path"]).read_text()) if d]:
            i = [i for i, d in enumerate(docs) if (d.get("kind"), d["metadata"].get("name")) == (patch.get("kind"), patch["metadata"].get("name"))]
            if len(i) != 1:
                raise SystemExit(f"{kdir}: patch {pt['path']} targets {patch.get('kind')}/{patch['metadata'].get('name')}, found {len(i)}")
            docs[i[0]] = merge_patch(docs[i[0]], patch)
    images = {i["name"]: f'{i.get("newName", i["name"])}:{i["newTag"]}' if "newTag" in i else i.get("newName", i["name"]) for i in k.get("images", [])}
    for d in docs:
        for c in pod_containers(d.get("spec", {}).get("template", {}).get("spec", {}), sidecars_only=False):
            name = c.get("image", "").split(":")[0]
            if name in images:
                c["image"] = images[name]
    return docs


def render(kdir: pathlib.Path):
    if not shutil.which("kubectl"):
        try:
            return render_kustomize(kdir)
        except (SystemExit, yaml.YAMLError) as e:
            fail(str(kdir), f"render: {e}")
            return None
    r = subprocess.run(["kubectl", "kustomize", str(kdir)], capture_output=True, text=True)
    if r.returncode != 0:
        fail(str(kdir), f"kubectl kustomize: {r.stderr.strip()}")
        return None
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    # The fallback renderer (what runs where kubectl is absent) must give the same objects.
    try:
        fallback = render_kustomize(kdir)
    except SystemExit as e:
        fail(str(kdir), f"fallback renderer: {e}")
        return docs
    key = lambda d: (d.get("kind"), d.get("metadata", {}).get("name"))
    a, b = {key(d): d for d in docs}, {key(d): d for d in fallback}
    for k_ in sorted(set(a) | set(b), key=str):
        if a.get(k_) != b.get(k_):
            fail(str(kdir), f"the fallback renderer differs from kubectl kustomize on {k_[0]}/{k_[1]}")
    return docs


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
        ports = {p["containerPort"] for c in pod_containers(tmpl["spec"]) for p in c.get("ports", [])}
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


def selects(sel, labels):
    return bool(sel) and all(labels.get(k) == v for k, v in sel.items())


def pool_selected(docs):
    """Names of the Deployments whose pods some InferencePool selects."""
    sels = [p["spec"].get("selector", {}).get("matchLabels", {}) for p in by_kind(docs, "InferencePool")]
    return {n for n, labels, _ in pod_labels_and_ports(docs) if any(selects(s, labels) for s in sels)}


def kiln_containers(dep, command, sidecars_only=True):
    """The pod's long-running containers running `kiln <command>` (serve, pd-proxy)."""
    spec = dep["spec"]["template"]["spec"]
    return [c for c in pod_containers(spec, sidecars_only) if (c.get("args") or [None])[0] == command]


def flags(c):
    """A container's `--name=value` / `--name value` arguments as a dict (a bare flag: True)."""
    args, out, i = (c.get("args") or [])[1:], {}, 0
    while i < len(args):
        name, eq, val = args[i].removeprefix("--").partition("=")
        if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
            val, i = args[i + 1], i + 1
        out[name] = val if eq or val else True
        i += 1
    return out


def as_int(v, default=None):
    """A flag's value as an int (default when absent), None when it is not a number."""
    v = default if v is None else v
    return int(v) if str(v).isdigit() else None


def port_number(c, port):
    """A probe's or Service's port (a number, or the name of one of the container's ports)."""
    if isinstance(port, int):
        return port if port in {p["containerPort"] for p in c.get("ports", [])} else None
    return next((p["containerPort"] for p in c.get("ports", []) if p.get("name") == port), None)


def check_model_servers(docs, where):
    in_pool = pool_selected(docs)
    for dep in by_kind(docs, "Deployment"):
        name, spec = dep["metadata"]["name"], dep["spec"]["template"]["spec"]
        labels = dep["spec"]["template"]["metadata"].get("labels", {})
        for c in kiln_containers(dep, "serve") + kiln_containers(dep, "pd-proxy"):
            w = f"{where} {name}/{c['name']}"
            probe = c.get("readinessProbe", {}).get("httpGet", {})
            if probe.get("path") != "/health":
                fail(w, "readiness must be GET /health")
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                pr = c.get(kind, {})
                port = (pr.get("httpGet") or pr.get("tcpSocket") or {}).get("port")
                if pr and port_number(c, port) is None:
                    fail(w, f"{kind} port {port!r} is not a port of this container")
            if c["args"][0] == "serve":
                if "preStop" not in c.get("lifecycle", {}) or spec.get("terminationGracePeriodSeconds", 30) < 60:
                    fail(w, "graceful termination: a preStop and at least 60 s of grace")
                if name in in_pool and labels.get("inference.networking.k8s.io/engine-type") != "kiln":
                    fail(w, "kiln pods in the pool carry inference.networking.k8s.io/engine-type: kiln")


def check_pd(docs, where, expected):
    """The P/D wiring. Returns whether the render has P/D roles."""
    deps = {d["metadata"]["name"]: d for d in by_kind(docs, "Deployment")}
    role = lambda dep, r: [c for c in kiln_containers(dep, "serve") if flags(c).get("kv-role") == r]
    producers = {n: role(d, "producer") for n, d in deps.items() if role(d, "producer")}
    consumers = {n: role(d, "consumer") for n, d in deps.items() if role(d, "consumer")}
    proxies = {n: kiln_containers(d, "pd-proxy", False) for n, d in deps.items() if kiln_containers(d, "pd-proxy", False)}
    if not (producers or consumers or proxies):
        if expected:
            fail(where, "no --kv-role producer/consumer or pd-proxy rendered")
        return False
    for what, found in (("producer (kiln serve --kv-role=producer)", producers),
                        ("consumer (kiln serve --kv-role=consumer)", consumers), ("pd-proxy", proxies)):
        if not found:
            fail(where, f"P/D roles without a {what}")
    labels = {n: d["spec"]["template"]["metadata"].get("labels", {}) for n, d in deps.items()}
    in_pool = pool_selected(docs)
    for n in producers:
        if n in in_pool:
            fail(f"{where} {n}", "the InferencePool selects the prefill pods")
    for n in consumers:
        if n not in in_pool:
            fail(f"{where} {n}", "the InferencePool does not select the decode pods")
    for n in in_pool - set(proxies):
        fail(f"{where} {n}", "pods in the pool without a pd-proxy")
    target_ports = {p.get("number") for pool in by_kind(docs, "InferencePool") for p in pool["spec"].get("targetPorts", [])}
    images = {}
    for n, cs in producers.items():
        for c in cs:
            w, f = f"{where} {n}/{c['name']}", flags(c)
            images[w] = c.get("image")
            env = {e["name"]: e for e in c.get("env", [])}
            if f.get("kv-transfer-host") != "$(POD_IP)":
                fail(w, f"--kv-transfer-host={f.get('kv-transfer-host')}, want $(POD_IP)")
            if env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "status.podIP":
                fail(w, "env POD_IP must come from the downward API's status.podIP")
            if port_number(c, as_int(f.get("port"), SERVE_PORT)) is None:
                fail(w, f"--port {f.get('port')} is not a container port")
    for n, cs in consumers.items():
        for c in cs:
            w, f = f"{where} {n}/{c['name']}", flags(c)
            images[w] = c.get("image")
            if not as_int(f.get("cpu-kv-bytes")):
                fail(w, f"a consumer needs a CPU tier: --cpu-kv-bytes={f.get('cpu-kv-bytes')}")
    models = {flags(c).get("served-model-name") for cs in list(producers.values()) + list(consumers.values()) for c in cs}
    if len(models) != 1:
        fail(where, f"producers and consumers serve different model names: {sorted(map(str, models))}")
    for n, cs in proxies.items():
        if len(cs) != 1:
            fail(f"{where} {n}", f"{len(cs)} pd-proxy containers in one pod")
            continue
        c, w = cs[0], f"{where} {n}/{cs[0]['name']}"
        images[w] = c.get("image")
        f = flags(c)
        if c not in (deps[n]["spec"]["template"]["spec"].get("initContainers") or []) or c.get("restartPolicy") != "Always":
            fail(w, "pd-proxy must be a native sidecar (initContainers, restartPolicy Always) so it stops after kiln")
        port = as_int(f.get("port"))  # given explicitly
        if n in in_pool and port not in target_ports:
            fail(w, f"pd-proxy --port={f.get('port')} is not the pool's target port {sorted(map(str, target_ports))}")
        if port_number(c, port) is None:
            fail(w, f"pd-proxy --port={f.get('port')} is not a port of its container")
        if f.get("host") not in ("0.0.0.0", "::"):
            fail(w, f"pd-proxy --host={f.get('host')} must listen on all addresses")
        dec = urllib.parse.urlsplit(str(f.get("decode", "")))
        local = consumers.get(n, [])
        if dec.hostname not in ("127.0.0.1", "localhost", "::1"):
            fail(w, f"--decode={f.get('decode')} is not kiln in the same pod (127.0.0.1)")
        if len(local) != 1:
            fail(w, f"the pod holds {len(local)} consumer kiln containers, want 1")
        else:
            kport = as_int(flags(local[0]).get("port"), SERVE_PORT)
            if dec.port != kport:
                fail(w, f"--decode={f.get('decode')} is not the port of kiln in the pod (--port={kport})")
            if port_number(local[0], kport) is None:
                fail(w, f"kiln's --port={kport} is not a port of its container")
            if kport == port:
                fail(w, "pd-proxy and kiln listen on the same port")
        pre = urllib.parse.urlsplit(str(f.get("prefill", "")))
        svc = [s for s in by_kind(docs, "Service") if s["metadata"]["name"] == (pre.hostname or "").split(".")[0]]
        if not svc:
            fail(w, f"--prefill={f.get('prefill')} names no rendered Service")
            continue
        sname, sspec = svc[0]["metadata"]["name"], svc[0]["spec"]
        sport = [p for p in sspec.get("ports", []) if p["port"] == (pre.port or 80)]
        if not sport:
            fail(w, f"--prefill={f.get('prefill')}: Service {sname} has no port {pre.port or 80}")
        picked = {m for m, lab in labels.items() if selects(sspec.get("selector", {}), lab)}
        if not picked or picked - set(producers):
            fail(f"{where} Service/{sname}", f"selects {sorted(picked)}, want the producers {sorted(producers)} only")
        for m in picked & set(producers):
            for pc in producers[m]:
                tgt = sport[0].get("targetPort", sport[0]["port"]) if sport else None
                if sport and port_number(pc, tgt) != as_int(flags(pc).get("port"), SERVE_PORT):
                    fail(f"{where} Service/{sname}", f"targetPort {tgt!r} is not {m}'s kiln --port")
    if len(set(images.values())) != 1:
        fail(where, f"P/D containers run different images: {images}")
    return True


def check_overlay(kdir: pathlib.Path):
    where = str(kdir)
    docs = render(kdir)
    if docs is None:
        return 0, False
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
    pd = check_pd(docs, where, expected=kdir.name == "pd")
    return len(docs), pd


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "deploy")
    for f in sorted(root.rglob("*.yaml")):
        try:
            list(yaml.safe_load_all(f.read_text()))
        except yaml.YAMLError as e:
            fail(str(f), f"not well-formed YAML: {e}")
    kdirs = sorted(p.parent for p in root.rglob("kustomization.yaml"))
    for k in kdirs:
        n, pd = check_overlay(k)
        print(f"{k}: {n} objects rendered and checked" + (" (with the P/D wiring)" if pd else ""))
    if failures:
        print("\n".join(["deploy check FAILED:"] + failures))
        sys.exit(1)
    print(f"deploy: {len(kdirs)} kustomizations pass (Kubernetes {K8S_VERSION} schemas for {sorted(CORE_KINDS)})")


if __name__ == "__main__":
    main()
