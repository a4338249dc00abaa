"""Validates the rendered manifests of every overlay, offline.

Core objects against the Kubernetes schemas that `kubernetes-validate` ships
(strict: an unknown field is an error), the KEDA and Prometheus Operator
resources against the openAPIV3Schema of the CRDs vendored in crds/ (made
strict the same way: the API server would silently drop an unknown field, so
a misspelt one would be lost without a word). Then the rules no schema
states: no Secret in a manifest, grace periods longer than the processes'
own, containers that run as the image's user on a read-only root, and one
runbook in the README and one firing and one silent test per alert.

Usage: validate.py README ALERT_TESTS RENDERED.yaml...   (exit 1 on any error)
       validate.py --expect-invalid RENDERED.yaml...      (exit 1 unless every
       document is refused: keeps the validator itself honest)
       validate.py --extract DIR RENDERED.yaml DASHBOARD.json
           writes DIR/rules.yaml (the PrometheusRule's groups, for promtool)
           and DIR/queries.yaml (every dashboard and KEDA query as a
           recording rule, so `promtool check rules` parses each one)
"""

import copy
import json
import pathlib
import re
import sys

import jsonschema
import kubernetes_validate
import yaml

KUBERNETES = "1.31"
HERE = pathlib.Path(__file__).resolve().parent
CRDS = {
    ("keda.sh", "ScaledObject"): "keda.sh_scaledobjects.yaml",
    ("monitoring.coreos.com", "ServiceMonitor"): "monitoring.coreos.com_servicemonitors.yaml",
    ("monitoring.coreos.com", "PrometheusRule"): "monitoring.coreos.com_prometheusrules.yaml",
}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def strict(schema):
    """The schema with `additionalProperties: false` wherever properties are
    listed and nothing else is allowed (the API server's pruning)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            if node.get("nullable"):
                kind = node.get("type")
                if isinstance(kind, str):
                    node["type"] = [kind, "null"]
            if node.get("x-kubernetes-int-or-string"):
                node.pop("type", None)
                node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def crd_validator(file):
    crd = yaml.safe_load((HERE / "crds" / file).read_text())
    versions = {}
    for version in crd["spec"]["versions"]:
        schema = strict(version["schema"]["openAPIV3Schema"])
        # metadata is the API server's to check; the CRD leaves it open.
        schema["properties"]["metadata"] = {"type": "object"}
        versions[f'{crd["spec"]["group"]}/{version["name"]}'] = jsonschema.Draft7Validator(schema)
    return versions


def validator_for(doc, cache):
    group = doc["apiVersion"].split("/")[0]
    file = CRDS.get((group, doc["kind"]))
    if file is None:
        return None
    if file not in cache:
        cache[file] = crd_validator(file)
    validator = cache[file].get(doc["apiVersion"])
    if validator is None:
        raise ValueError(f'{doc["apiVersion"]} is not served by the vendored {file}')
    return validator


def schema_errors(doc, cache):
    """Why `doc` does not validate (empty: it does)."""
    name = doc.get("metadata", {}).get("name", "")
    if not DNS_SUBDOMAIN.match(name):
        return [f"metadata.name {name!r} is not a DNS subdomain"]
    try:
        validator = validator_for(doc, cache)
    except ValueError as error:
        return [str(error)]
    if validator is not None:
        return [
            f'{".".join(str(p) for p in e.absolute_path)}: {e.message}'
            for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
        ]
    try:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as error:
        path = ".".join(str(p) for p in error.path)
        return [f"{path}: {error.message}"]
    except kubernetes_validate.SchemaNotFoundError as error:
        return [f"no schema: {error.message}"]
    return []


def config(docs):
    settings = {}
    for doc in docs:
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"].startswith("svc-config"):
            settings.update(doc.get("data", {}))
    return settings


def policy_errors(docs, readme, tests):
    errors = []
    settings = config(docs)
    for doc in docs:
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind == "Secret":
            errors.append(f"Secret/{name}: no secret belongs in a manifest; the operator creates it")
        pod = None
        if kind in ("Deployment", "Job"):
            pod = doc["spec"]["template"]["spec"]
        if pod is None:
            continue
        security = pod.get("securityContext", {})
        if not security.get("runAsNonRoot"):
            errors.append(f"{kind}/{name}: runAsNonRoot is not set")
        for container in pod["containers"]:
            if not container.get("securityContext", {}).get("readOnlyRootFilesystem"):
                errors.append(f"{kind}/{name}: {container['name']} has a writable root filesystem")
        grace = pod.get("terminationGracePeriodSeconds", 30)
        pre_stop = sum(
            c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0) for c in pod["containers"]
        )
        own = {"svc-api": "SVC_SHUTDOWN_GRACE_SECS", "svc-worker": "SVC_WORKER_SHUTDOWN_GRACE_SECS"}.get(name)
        if own is not None and grace <= int(settings.get(own, 0)) + pre_stop:
            errors.append(f"{kind}/{name}: terminationGracePeriodSeconds {grace} is not above {own} + preStop")
    alerts = [
        rule["alert"]
        for doc in docs
        if doc["kind"] == "PrometheusRule"
        for group in doc["spec"]["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]
    fired, silent = set(), set()
    for test in tests.get("tests", []):
        for case in test.get("alert_rule_test", []):
            (fired if case.get("exp_alerts") else silent).add(case["alertname"])
    for alert in alerts:
        if f"#### {alert}" not in readme:
            errors.append(f"alert {alert}: no runbook (a '#### {alert}' section) in the README")
        if alert not in fired:
            errors.append(f"alert {alert}: no rules test where it fires")
        if alert not in silent:
            errors.append(f"alert {alert}: no rules test where it stays silent")
    return errors


def load(paths):
    docs = []
    for path in paths:
        docs.extend(d for d in yaml.safe_load_all(pathlib.Path(path).read_text()) if d)
    return docs


def extract(out, rendered, dashboard):
    docs = load([rendered])
    out = pathlib.Path(out)
    groups = [g for d in docs if d["kind"] == "PrometheusRule" for g in d["spec"]["groups"]]
    (out / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    # Grafana's variables, as Grafana would fill them in.
    fill = {"$__rate_interval": "5m", "$namespace": "svc"}
    queries = []
    for panel in json.loads(pathlib.Path(dashboard).read_text())["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in fill.items():
                expr = expr.replace(variable, value)
            queries.append({"record": f'dashboard:panel_{panel["id"]}_{target["refId"]}', "expr": expr})
    for doc in docs:
        if doc["kind"] == "ScaledObject":
            for trigger in doc["spec"]["triggers"]:
                if trigger["type"] == "prometheus":
                    queries.append({"record": 'keda:' + trigger["name"].replace("-", "_"), "expr": trigger["metadata"]["query"]})
    (out / "queries.yaml").write_text(yaml.safe_dump({"groups": [{"name": "queries", "rules": queries}]}))
    print(f"{len(groups)} rule groups, {len(queries)} queries")
    return 0


def main(argv):
    cache = {}
    if argv[:1] == ["--extract"]:
        return extract(*argv[1:])
    if argv[:1] == ["--expect-invalid"]:
        accepted = [
            f'{d["kind"]}/{d["metadata"]["name"]}' for d in load(argv[1:]) if not schema_errors(d, cache)
        ]
        for doc in accepted:
            print(f"ERROR {doc}: an invalid document was accepted")
        return 1 if accepted else 0
    readme = pathlib.Path(argv[0]).read_text()
    tests = yaml.safe_load(pathlib.Path(argv[1]).read_text())
    status = 0
    for path in argv[2:]:
        docs = load([path])
        errors = [
            f'{d["kind"]}/{d["metadata"]["name"]}: {e}' for d in docs for e in schema_errors(d, cache)
        ] + policy_errors(docs, readme, tests)
        for error in errors:
            print(f"ERROR {path}: {error}")
        print(f"{path}: {len(docs)} objects, {len(errors)} errors")
        status |= 1 if errors else 0
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
