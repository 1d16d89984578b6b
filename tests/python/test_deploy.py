"""deploy/: the Kubernetes manifests and the Dockerfile.

Every manifest parses and validates against the Kubernetes schemas (kubernetes-validate, strict:
unknown fields fail); the cross-checks tie them to the real binary: probe paths answer on a
running server, container args are flags `tachyon serve/route --help` lists, Services select
pods that exist, the router discovers the StatefulSet's pods through its headless Service
(--dns), the HPA's metric is in /metrics, grace periods cover --shutdown-timeout. The Dockerfile
parses with FROM debian:12 in every stage and runs scripts/setup.sh.
"""

import json
import re
import signal
import subprocess
import threading
from pathlib import Path

import dockerfile_parse  # scripts/requirements.txt
import kubernetes_validate  # scripts/requirements.txt
import pytest
import yaml

from conftest import REPO, binary_path, model_path, require_serve

K8S_VERSION = "1.33.0"  # the schemas the manifests are checked against
MANIFEST_DIR = REPO / "deploy" / "kubernetes"


def load_manifests():
    docs = []
    for path in sorted(MANIFEST_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    return docs


MANIFESTS = load_manifests()


def of_kind(kind):
    return [d for _, d in MANIFESTS if d["kind"] == kind]


def workloads():
    return of_kind("StatefulSet") + of_kind("Deployment")


def containers(workload):
    spec = workload["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def tachyon_container(workload):
    """The main container, whose args start with the tachyon command."""
    (c,) = workload["spec"]["template"]["spec"]["containers"]
    return c


def registered_routes():
    """(method, path) pairs of the server's route table (src/server/routes.h keeps one
    {"METHOD", "/path", RouteId::kName} per line)."""
    text = (REPO / "src" / "server" / "routes.h").read_text()
    return set(re.findall(r'\{"([A-Z]+)", "(/[^"]*)", RouteId::k\w+\}', text))


def help_flags(command):
    binary = binary_path()
    if not binary.exists():
        pytest.skip(f"tachyon binary not found at {binary} (set TACHYON_BINARY)")
    out = subprocess.run([str(binary), command, "--help"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", out.stdout))


def probes(container):
    return [container[k] for k in ("startupProbe", "livenessProbe", "readinessProbe")
            if k in container]


def flag_values(args, flag):
    values = []
    for i, a in enumerate(args):
        if a.startswith(flag + "="):
            values.append(a.split("=", 1)[1])
        elif a == flag:
            values.append(args[i + 1])
    return values


def test_manifests_cover_the_deployment():
    kinds = sorted(d["kind"] for _, d in MANIFESTS)
    assert kinds == sorted(["Service", "StatefulSet", "PodDisruptionBudget",
                            "HorizontalPodAutoscaler", "Deployment", "Service"])


@pytest.mark.parametrize("name,doc", MANIFESTS,
                         ids=[f"{n}:{d['kind']}/{d['metadata']['name']}" for n, d in MANIFESTS])
def test_manifest_validates_against_kubernetes_schema(name, doc):
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        pytest.fail(f"{name}: {doc['kind']}/{doc['metadata']['name']}: {e.message} "
                    f"at {'.'.join(map(str, e.path))}")


def test_validator_rejects_a_broken_manifest():
    (sts,) = of_kind("StatefulSet")
    broken = yaml.safe_load(yaml.safe_dump(sts))
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)
    broken = yaml.safe_load(yaml.safe_dump(sts))
    tachyon_container(broken)["readinessProb"] = {"httpGet": {"path": "/ready", "port": 8080}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_container_args_are_flags_the_binary_lists():
    checked = set()
    for w in workloads():
        c = tachyon_container(w)
        command, *args = c["args"]
        assert command in ("serve", "route"), c["args"]
        known = help_flags(command)
        for a in args:
            assert a.startswith("--"), f"{w['metadata']['name']}: positional arg {a!r}"
            flag = a.split("=", 1)[0]
            assert flag in known, f"{w['metadata']['name']}: {flag} is not a `tachyon " \
                                  f"{command}` flag"
        checked.add(command)
    assert checked == {"serve", "route"}


def test_probe_paths_are_registered_routes():
    routes = registered_routes()
    assert ("GET", "/health") in routes  # the table was read
    for w in workloads():
        c = tachyon_container(w)
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert probes(c), f"{w['metadata']['name']} has no probes"
        for p in probes(c):
            assert ("GET", p["httpGet"]["path"]) in routes, p
            assert p["httpGet"]["port"] in ports
        assert "readinessProbe" in c and "livenessProbe" in c


def test_probe_paths_answer_on_a_running_server(server):
    (sts,) = of_kind("StatefulSet")
    c = tachyon_container(sts)
    seen = set()
    for p in probes(c):
        path = p["httpGet"]["path"]
        status, _, body = server.request("GET", path, headers={"Authorization": ""})
        assert status == 200, (path, body)
        seen.add(path)
    assert "/ready" in seen


def test_hpa_metric_is_in_the_servers_metrics(server):
    (hpa,) = of_kind("HorizontalPodAutoscaler")
    (sts,) = of_kind("StatefulSet")
    assert hpa["spec"]["scaleTargetRef"]["kind"] == "StatefulSet"
    assert hpa["spec"]["scaleTargetRef"]["name"] == sts["metadata"]["name"]
    names = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]}
    exported = {key.split("{", 1)[0] for key in server.metrics()}
    assert names and names <= exported, names - exported


def test_services_select_pods_of_a_workload():
    for svc in of_kind("Service"):
        selector = svc["spec"]["selector"]
        matching = [w for w in workloads()
                    if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
        assert len(matching) == 1, svc["metadata"]["name"]
        c = tachyon_container(matching[0])
        port_names = {p["name"] for p in c["ports"]}
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in port_names
    for w in workloads():
        sel = w["spec"]["selector"]["matchLabels"]
        assert sel.items() <= w["spec"]["template"]["metadata"]["labels"].items()
    for pdb in of_kind("PodDisruptionBudget"):
        sel = pdb["spec"]["selector"]["matchLabels"]
        assert any(sel.items() <= w["spec"]["template"]["metadata"]["labels"].items()
                   for w in of_kind("StatefulSet"))


def test_router_discovers_the_statefulset_pods():
    (sts,) = of_kind("StatefulSet")
    (router,) = of_kind("Deployment")
    (hpa,) = of_kind("HorizontalPodAutoscaler")
    headless = [s for s in of_kind("Service") if s["metadata"]["name"] == sts["spec"]["serviceName"]]
    assert len(headless) == 1 and headless[0]["spec"]["clusterIP"] == "None"
    port = tachyon_container(sts)["ports"][0]["containerPort"]
    assert flag_values(tachyon_container(sts)["args"], "--port") == [str(port)]
    svc = headless[0]["metadata"]["name"]
    args = tachyon_container(router)["args"]
    # Every pod the HPA may run is an address of the headless Service's name.
    assert flag_values(args, "--dns") == [f"{svc}:{port}"]
    assert flag_values(args, "--replica") == [] and flag_values(args, "--etcd") == []
    assert sts["spec"]["replicas"] >= hpa["spec"]["minReplicas"]


def test_grace_period_covers_the_shutdown_timeout():
    for w in workloads():
        args = tachyon_container(w)["args"]
        (timeout,) = flag_values(args, "--shutdown-timeout")
        grace = w["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace > float(timeout), w["metadata"]["name"]


def test_model_paths_agree_with_fetch_model():
    out = subprocess.run([str(REPO / "scripts" / "fetch_model.sh"), "--print-path"],
                         capture_output=True, text=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": "/models"})
    assert out.returncode == 0, out.stderr
    model = out.stdout.strip()
    for w in workloads():
        c = tachyon_container(w)
        given = flag_values(c["args"], "--model") + flag_values(c["args"], "--tokenizer")
        assert given == [model], w["metadata"]["name"]
        (init,) = w["spec"]["template"]["spec"]["initContainers"]
        assert {"name": "XDG_CACHE_HOME", "value": "/models"} in init["env"]


def test_containers_run_as_non_root():
    for w in workloads():
        assert w["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
        for c in containers(w):
            assert "requests" in c["resources"], c["name"]


def dockerfile():
    parser = dockerfile_parse.DockerfileParser(str(REPO / "Dockerfile"))
    return parser.structure


def test_dockerfile_builds_on_debian_12_with_setup_sh():
    insns = dockerfile()
    froms = [i["value"].split()[0] for i in insns if i["instruction"] == "FROM"]
    assert froms and all(f in ("debian:12", "debian:bookworm") or f.startswith("debian:12-")
                         or f.startswith("debian:bookworm-") for f in froms), froms
    runs = " ".join(i["value"] for i in insns if i["instruction"] == "RUN")
    assert "scripts/setup.sh" in runs and "scripts/build.sh release" in runs
    users = [i["value"] for i in insns if i["instruction"] == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert "8080" in [i["value"] for i in insns if i["instruction"] == "EXPOSE"]
    (health,) = [i["value"] for i in insns if i["instruction"] == "HEALTHCHECK"]
    path = re.search(r"http://127\.0\.0\.1:8080(/\S*)", health).group(1)
    assert ("GET", path) in registered_routes()
    for i in insns:
        if i["instruction"] == "COPY" and i["value"].startswith("scripts/"):
            assert (REPO / i["value"].split()[0]).exists(), i["value"]


def test_dockerfile_cmd_uses_serve_flags():
    insns = dockerfile()
    (cmd,) = [json.loads(i["value"]) for i in insns if i["instruction"] == "CMD"]
    (entry,) = [json.loads(i["value"]) for i in insns if i["instruction"] == "ENTRYPOINT"]
    assert entry == ["tachyon"] and cmd[0] == "serve"
    known = help_flags("serve")
    for a in cmd[1:]:
        if a.startswith("--"):
            assert a in known, a


def test_dockerignore_keeps_build_outputs_out():
    lines = {l.strip() for l in (REPO / ".dockerignore").read_text().splitlines()
             if l.strip() and not l.startswith("#")}
    assert {".git", ".venv", "build"} <= lines


def start_with_manifest_args(workload, tmp_path):
    """Runs the workload's tachyon container args on this machine, stories260K standing in for
    the model file and 127.0.0.1:0 for the pod address; returns the first stdout line and the
    exit status after SIGTERM."""
    require_serve()
    swap = {"--model": str(model_path()), "--tokenizer": str(model_path()), "--port": "0",
            "--host": "127.0.0.1"}
    args = []
    for a in tachyon_container(workload)["args"]:
        flag = a.split("=", 1)[0]
        args.append(f"{flag}={swap[flag]}" if flag in swap and "=" in a else a)
    log = open(tmp_path / "log.txt", "w")
    proc = subprocess.Popen([str(binary_path()), *args], stdout=subprocess.PIPE, stderr=log,
                            text=True)
    line = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(120)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    log.close()
    return (line[0] if line else ""), rc, (tmp_path / "log.txt").read_text()


@pytest.mark.parametrize("kind", ["StatefulSet", "Deployment"])
def test_binary_starts_with_the_manifest_args(kind, tmp_path):
    (workload,) = of_kind(kind)
    line, rc, log = start_with_manifest_args(workload, tmp_path)
    assert "ready at http://127.0.0.1:" in line, log
    assert rc == 0, log
