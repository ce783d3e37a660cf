"""docs/broker.conf.sample is generated from the config table and cannot drift: the file
is what the generator writes today (regenerate it with ``python -m
trocket.broker.config_sample > docs/broker.conf.sample``), it names every key trocket
reads, and its values, uncommented and read back, are the defaults."""

from __future__ import annotations

from pathlib import Path

from trocket.broker.config import PROPERTY_KEYS, load_properties_file
from trocket.broker.config_sample import default_values, sample_text

SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "broker.conf.sample"


def test_the_sample_is_what_the_table_generates():
    assert SAMPLE.read_text(encoding="utf-8") == sample_text(), (
        "docs/broker.conf.sample is stale: python -m trocket.broker.config_sample > docs/broker.conf.sample")


def test_the_sample_names_every_key_once_with_a_line_on_it():
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    settings = [line[1:].partition("=")[0] for line in lines if line[:1] == "#" and "=" in line and " " not in line.partition("=")[0]]
    assert settings == list(PROPERTY_KEYS)
    for i, line in enumerate(lines):
        if line[1:].partition("=")[0] in PROPERTY_KEYS and "=" in line:
            assert lines[i - 1].startswith("# ") and len(lines[i - 1]) > 4, lines[i - 1]


def test_its_values_read_back_are_the_defaults(tmp_path):
    text = SAMPLE.read_text(encoding="utf-8")
    settings = [line[1:] for line in text.splitlines()
                if line[:1] == "#" and line[1:].partition("=")[0] in PROPERTY_KEYS and line.partition("=")[2]]
    # every key with a default is there to uncomment (derived or empty defaults stay commented)
    assert {s.partition("=")[0] for s in settings} == {k for k, v in default_values().items() if v}
    conf = tmp_path / "broker.conf"
    conf.write_text("\n".join(settings) + "\n", encoding="utf-8")
    assert default_values(load_properties_file(conf)) == default_values()
