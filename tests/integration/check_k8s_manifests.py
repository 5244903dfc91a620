#!/usr/bin/env python3
"""Checks deploy/kubernetes/*.yaml (run by tests/integration/test_k8s_sidecar.sh; needs python3-yaml).

Debian 12 packages no Kubernetes schema validator (no kubeconform, kubeval or kubectl), so this is the part of
the schema and of deploy/kubernetes/README.md's promises that can be checked here: every document parses and
has apiVersion, kind and metadata.name; the DaemonSet's selector matches its template; every volumeMount names
a volume; probes and annotations name the metrics port that cuasyncd's --metrics-listen opens; liveness is
/livez (never /healthz or /readyz, which fail when a device is drained) and readiness /readyz; the socket
directory is a hostPath; the sidecar gets NODE_NAME from the downward API and reaches the operator socket's
volume, which client pods cannot; the RBAC grants exactly what the sidecar uses. Prints each failure; exit 1.
"""
import glob
import os
import re
import sys

import yaml

KNOWN = {  # kind -> apiVersion
    "Namespace": "v1", "ServiceAccount": "v1", "ConfigMap": "v1", "Pod": "v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1", "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "DaemonSet": "apps/v1",
}
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
    return cond


def containers(pod_spec):
    return pod_spec.get("containers", []) + pod_spec.get("initContainers", [])


def check_pod_spec(name, spec):
    vols = {v["name"] for v in spec.get("volumes", [])}
    check(len(vols) == len(spec.get("volumes", [])), f"{name}: duplicate volume names")
    for c in containers(spec):
        check(DNS1123.match(c.get("name", "")), f"{name}: container name {c.get('name')!r}")
        check("image" in c, f"{name}/{c.get('name')}: no image")
        for m in c.get("volumeMounts", []):
            check(m.get("name") in vols, f"{name}/{c['name']}: volumeMount {m.get('name')!r} names no volume")
            check(str(m.get("mountPath", "")).startswith("/"), f"{name}/{c['name']}: mountPath not absolute")
        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
        for probe in ("livenessProbe", "readinessProbe"):
            g = c.get(probe, {}).get("httpGet")
            if g:
                check(g.get("port") in ports or isinstance(g.get("port"), int),
                      f"{name}/{c['name']}: {probe} port {g.get('port')!r} is no port of the container")
        for e in c.get("env", []):
            check(("value" in e) != ("valueFrom" in e), f"{name}/{c['name']}: env {e.get('name')} value/valueFrom")
            check(isinstance(e.get("value", ""), str), f"{name}/{c['name']}: env {e.get('name')} not a string")
    return vols


def check_daemonset(d):
    spec = d["spec"]
    tmpl = spec["template"]
    sel = spec["selector"]["matchLabels"]
    check(all(tmpl["metadata"]["labels"].get(k) == v for k, v in sel.items()), "DaemonSet: selector != labels")
    ps = tmpl["spec"]
    check_pod_spec("DaemonSet", ps)
    check(ps.get("serviceAccountName") == "cuasyncd", "DaemonSet: serviceAccountName")
    check(any(k.startswith("nvidia.com/") for k in ps.get("nodeSelector", {})), "DaemonSet: GPU nodeSelector")
    vols = {v["name"]: v for v in ps.get("volumes", [])}
    byname = {c["name"]: c for c in ps["containers"]}
    if not check({"cuasyncd", "sidecar"} <= set(byname), "DaemonSet: containers cuasyncd and sidecar"):
        return
    d_c, s_c = byname["cuasyncd"], byname["sidecar"]
    args = d_c.get("command", []) + d_c.get("args", [])
    opt = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if a.startswith("--") and "=" in a}
    mport = re.match(r"http://[^:]+:(\d+)$", opt.get("--metrics-listen", ""))
    if check(mport, "cuasyncd: --metrics-listen http://HOST:PORT"):
        port = int(mport.group(1))
        ann = tmpl["metadata"].get("annotations", {})
        check(ann.get("prometheus.io/scrape") == "true", "prometheus.io/scrape")
        check(ann.get("prometheus.io/port") == str(port), "prometheus.io/port != --metrics-listen's port")
        check(ann.get("prometheus.io/path") == "/metrics", "prometheus.io/path")
        named = {p["name"]: p["containerPort"] for p in d_c.get("ports", [])}
        for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
            g = d_c.get(probe, {}).get("httpGet", {})
            check(g.get("path") == path, f"cuasyncd: {probe} path must be {path} (is {g.get('path')})")
            check(named.get(g.get("port"), g.get("port")) == port, f"cuasyncd: {probe} port != metrics port")
    sock = re.match(r"ipc://(/.*)/[^/]+$", opt.get("--listen", ""))
    mounts = {m["mountPath"]: m["name"] for m in d_c.get("volumeMounts", [])}
    if check(sock, "cuasyncd: --listen ipc://DIR/SOCKET"):
        v = vols.get(mounts.get(sock.group(1)), {})
        check(v.get("hostPath", {}).get("path") == "/run/cuasyncd", "the socket directory is not hostPath /run/cuasyncd")
    op = re.match(r"ipc://(/.*)/[^/]+$", opt.get("--operator-url", ""))
    if check(op, "cuasyncd: --operator-url ipc://DIR/SOCKET"):
        vname = mounts.get(op.group(1))
        check(vname and "hostPath" not in vols.get(vname, {}), "the operator socket must not be on a hostPath")
        smounts = {m["mountPath"]: m["name"] for m in s_c.get("volumeMounts", [])}
        check(smounts.get(op.group(1)) == vname, "the sidecar does not mount the operator socket's directory")
        env = {e["name"]: e for e in s_c.get("env", [])}
        check(env.get("CUASYNC_OPERATOR_URL", {}).get("value") == opt["--operator-url"],
              "sidecar: CUASYNC_OPERATOR_URL != cuasyncd's --operator-url")
        check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
              "sidecar: NODE_NAME from the downward API (spec.nodeName)")
        check(str(env.get("CUASYNC_SHARES", {}).get("value", "")).isdigit(), "sidecar: CUASYNC_SHARES")
    check(s_c.get("command", [None])[0] == "cuasync-k8s-sidecar", "sidecar: command")
    cm = {v.get("configMap", {}).get("name") for v in vols.values()} - {None}
    return cm


def check_rbac(docs):
    roles = [d for d in docs if d["kind"] == "ClusterRole"]
    if not check(len(roles) == 1, "one ClusterRole"):
        return
    rules = {(r, v) for rule in roles[0]["rules"] for r in rule["resources"] for v in rule["verbs"]}
    check(rules == {("nodes/status", "get"), ("nodes/status", "patch"), ("pods", "get"), ("pods", "list")},
          f"ClusterRole rules: {sorted(rules)}")
    b = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    if check(len(b) == 1, "one ClusterRoleBinding"):
        check(b[0]["roleRef"]["name"] == roles[0]["metadata"]["name"], "binding's roleRef")
        check(any(s["kind"] == "ServiceAccount" and s["name"] == "cuasyncd" and s["namespace"] == "cuasync-system"
                  for s in b[0]["subjects"]), "binding's subject: ServiceAccount cuasync-system/cuasyncd")


def main(d):
    docs = []
    for path in sorted(glob.glob(os.path.join(d, "*.yaml"))):
        try:
            with open(path) as f:
                got = [x for x in yaml.safe_load_all(f) if x is not None]
        except yaml.YAMLError as e:
            check(False, f"{path}: {e}")
            continue
        for x in got:
            where = f"{os.path.basename(path)}: {x.get('kind')}/{x.get('metadata', {}).get('name')}"
            check(KNOWN.get(x.get("kind")) == x.get("apiVersion"), f"{where}: kind/apiVersion")
            check(DNS1123.match(str(x.get("metadata", {}).get("name", ""))), f"{where}: metadata.name")
            docs.append(x)
    byk = {}
    for x in docs:
        byk.setdefault(x["kind"], []).append(x)
    ds = byk.get("DaemonSet", [])
    if check(len(ds) == 1, "one DaemonSet"):
        cms = check_daemonset(ds[0]) or set()
        have = {c["metadata"]["name"] for c in byk.get("ConfigMap", [])}
        check(cms <= have, f"DaemonSet names ConfigMaps {sorted(cms - have)} that are not defined")
        ns = {n["metadata"]["name"] for n in byk.get("Namespace", [])}
        check(ds[0]["metadata"].get("namespace") in ns, "the DaemonSet's namespace is not defined")
    check_rbac(docs)
    for p in byk.get("Pod", []):
        check_pod_spec("Pod " + p["metadata"]["name"], p["spec"])
        shares = [c.get("resources", {}).get("limits", {}).get("cuasync.io/shares") for c in p["spec"]["containers"]]
        check(any(isinstance(s, str) and s.isdigit() for s in shares), "example pod: cuasync.io/shares as a string")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
