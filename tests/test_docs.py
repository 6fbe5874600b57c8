"""The examples in docstrings run."""

import doctest
from pathlib import Path

import analyzers
import analyzers.posterior


def test_docstring_examples():
    for mod in (analyzers, analyzers.posterior):
        result = doctest.testmod(mod)
        assert result.attempted > 0 and result.failed == 0, mod.__name__


def test_deploy_files_parse_and_give_workers_stable_ids(monkeypatch):
    """deploy/ cannot run here (no Docker, no cluster); at least it parses and keeps the worker's invariants."""
    import json

    import yaml

    root = Path(__file__).resolve().parents[1] / "deploy"
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())
    assert {"kafka", "worker", "prometheus", "grafana"} <= compose["services"].keys()
    assert compose["services"]["worker"]["deploy"]["replicas"] == 2
    docs = list(yaml.safe_load_all((root / "k8s" / "kibitz-worker.yaml").read_text()))
    sts = next(d for d in docs if d["kind"] == "StatefulSet")
    env = {e["name"]: e for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KIBITZ_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert "secretKeyRef" in env["KIBITZ_KAFKA_SASL_PASSWORD"]["valueFrom"]
    # the RocksDB store lives on the pod's own volume, where the image's KIBITZ_DATA_DIR points
    mount = sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]
    assert mount["mountPath"] == "/var/lib/kibitz" and sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == mount["name"]
    assert "ENV KIBITZ_DATA_DIR=/var/lib/kibitz" in (root / "Dockerfile").read_text()
    # the image's user (nobody) can write the volume: the pod's fsGroup gives it the volume
    assert "USER nobody" in (root / "Dockerfile").read_text()
    assert sts["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 65534
    json.loads((root / "grafana" / "kibitz.json").read_text())
    # Prometheus scrapes the workers from another container or pod: their metrics bind to every interface there
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--metrics-host") + 1] == "0.0.0.0"
    # the probes ask the worker's own /healthz (streamer.metrics), on the port its metrics are served on
    container = sts["spec"]["template"]["spec"]["containers"][0]
    port = next(p["containerPort"] for p in container["ports"] if p["name"] == "metrics")
    assert int(args[args.index("--metrics-port") + 1]) == port
    for probe in ("startupProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    cmd = compose["services"]["worker"]["command"]
    assert cmd[cmd.index("--metrics-host") + 1] == "0.0.0.0"
    # both commands are ones this kibitz takes, and their brokers' addresses pass its settings' checks
    from analyzers.profiles import DEFAULT_PROFILE
    from streamer.cli import build_parser
    from streamer.kafka_config import KafkaSettings

    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    # a production cluster's topics are replicated: the ConfigMap's variable reaches the settings the topics are made with
    for k, v in config.items():
        if k.startswith("KIBITZ_KAFKA_") and "SASL" not in k and "SECURITY" not in k:  # not the cluster's credentials
            monkeypatch.setenv(k, v)
    assert KafkaSettings.from_env().replication_factor == 3
    k8s_args = [a.replace("$(KIBITZ_PROFILE)", config["KIBITZ_PROFILE"]) for a in args]
    for argv in (cmd, k8s_args):
        parsed = build_parser().parse_args(argv)
        assert parsed.func is not None
        # the deployments run the profile the models are fitted for (the manifest ran `standard`, whose calibration is
        # provisional and which has no move model, event pooling or review)
        assert parsed.profile == DEFAULT_PROFILE
    assert KafkaSettings(broker=config["KIBITZ_KAFKA"]).broker and KafkaSettings(broker=cmd[cmd.index("--broker") + 1])
