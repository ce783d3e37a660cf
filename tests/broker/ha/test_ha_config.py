"""Roles and HA settings: CLI flags and RocketMQ's broker.conf keys."""

from __future__ import annotations

import argparse

import pytest

from trocket.broker.config import BrokerConfig, BrokerConfigError, load_properties_file
from trocket.cli_broker import add_broker_arguments, config_from_args


def parse(*argv: str) -> BrokerConfig:
    parser = argparse.ArgumentParser()
    add_broker_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)))


def test_cli_roles():
    assert parse().broker_role == "ASYNC_MASTER" and parse().ha_listen_addr() == ("127.0.0.1", 10912)
    assert parse("--listen", "127.0.0.1:0").ha_listen_addr() == ("127.0.0.1", 0)
    m = parse("--role", "sync_master", "--listen", "127.0.0.1:10911")
    assert m.broker_role == "SYNC_MASTER" and m.ha_listen_addr() == ("127.0.0.1", 10912)
    m = parse("--role", "ASYNC_MASTER", "--ha-listen", "0.0.0.0:20912")
    assert m.ha_listen_addr() == ("0.0.0.0", 20912)
    s = parse("--role", "SLAVE", "--master-ha", "10.0.0.5:10912")
    assert s.is_slave and s.broker_id == 1 and s.ha_master_address == ("10.0.0.5", 10912)
    assert s.ha_listen_addr() is None
    assert parse("--role", "SLAVE", "--broker-id", "2").broker_id == 2
    with pytest.raises(SystemExit):
        parse("--role", "BACKUP")


def test_broker_conf_keys(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerRole=SYNC_MASTER\nlistenPort=30911\nhaListenPort=30912\nhaSendHeartbeatInterval=1000\n"
        "haTransferBatchSize=65536\nsyncFlushTimeout=2000\nhaSlaveFallbehindMax=1048576\n"
        "haHousekeepingInterval=3000\nslaveReadEnable=true\naccessMessageInMemoryMaxRatio=30\n"
    )
    c = load_properties_file(conf)
    assert c.broker_role == "SYNC_MASTER" and c.ha_listen_addr() == ("127.0.0.1", 30912)
    assert (c.ha_send_heartbeat_interval_ms, c.ha_transfer_batch_size, c.sync_flush_timeout_ms) == (1000, 65536, 2000)
    assert (c.ha_slave_fallbehind_max, c.ha_housekeeping_interval_ms) == (1 << 20, 3000)
    assert c.slave_read_enable and c.access_message_in_memory_max_ratio == 30
    conf.write_text("brokerRole=SLAVE\nbrokerId=1\nhaMasterAddress=10.0.0.5:10912\n")
    s = load_properties_file(conf)
    assert s.is_slave and s.broker_id == 1 and s.ha_master_address == ("10.0.0.5", 10912)
    conf.write_text("brokerRole=BACKUP\n")
    with pytest.raises(BrokerConfigError, match="bad broker role"):
        load_properties_file(conf)
    conf.write_text("haTransferBatchSize=0\n")
    with pytest.raises(BrokerConfigError, match="must be positive"):
        load_properties_file(conf)
