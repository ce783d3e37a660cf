"""One local SparkSession for every Spark test (local[2], two shuffle partitions, no UI),
and small synthetic captures analyzed once per session."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("pyspark", reason="the 'spark' extra is not installed")


@pytest.fixture(scope="session")
def spark():
    from trocket.spark.session import build_session

    session = build_session("local[2]", shuffle_partitions=2, driver_memory="768m", extra={"spark.sql.adaptive.enabled": "false"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def captures(tmp_path_factory):
    """A native and a pcap capture of the same synthetic traffic, and their truths."""
    from trocket.spark import synth

    d = tmp_path_factory.mktemp("captures")
    native = str(d / "synth.cap")
    pcap = str(d / "synth.pcap")
    synth.write_native(native, 3000, seed=11)
    synth.write_pcap(pcap, 3000, seed=11)
    with open(synth.truth_path(native)) as f:
        native_truth = json.load(f)
    with open(synth.truth_path(pcap)) as f:
        pcap_truth = json.load(f)
    return {"dir": d, "native": native, "pcap": pcap, "native_truth": native_truth, "pcap_truth": pcap_truth}


@pytest.fixture(scope="session")
def native_result(spark, captures, tmp_path_factory):
    """The synthetic native capture analyzed in ranges of ~64 KiB (several tasks)."""
    from trocket.spark.job import analyze

    out = str(tmp_path_factory.mktemp("native-out"))
    result = analyze(spark, [captures["native"]], out, split_bytes=64 * 1024)
    return result


def summary_without(summary: dict, *keys: str) -> dict:
    return {k: v for k, v in summary.items() if k not in keys}


__all__ = ["summary_without", "os"]
