import pytest

from trocket.codecs.codes import (
    RemotingSysResponseCode,
    RequestCode,
    ResponseCode,
    request_code_name,
    response_code_name,
)


@pytest.mark.parametrize(
    ("code", "value"),
    [
        (RequestCode.SEND_MESSAGE, 10),
        (RequestCode.PULL_MESSAGE, 11),
        (RequestCode.QUERY_CONSUMER_OFFSET, 14),
        (RequestCode.UPDATE_CONSUMER_OFFSET, 15),
        (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, 29),
        (RequestCode.GET_MAX_OFFSET, 30),
        (RequestCode.GET_MIN_OFFSET, 31),
        (RequestCode.HEART_BEAT, 34),
        (RequestCode.UNREGISTER_CLIENT, 35),
        (RequestCode.CONSUMER_SEND_MSG_BACK, 36),
        (RequestCode.END_TRANSACTION, 37),
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, 38),
        (RequestCode.CHECK_TRANSACTION_STATE, 39),
        (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, 40),
        (RequestCode.LOCK_BATCH_MQ, 41),
        (RequestCode.UNLOCK_BATCH_MQ, 42),
        (RequestCode.REGISTER_BROKER, 103),
        (RequestCode.GET_ROUTEINFO_BY_TOPIC, 105),
        (RequestCode.RESET_CONSUMER_CLIENT_OFFSET, 220),
        (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, 300),
        (RequestCode.GET_TOPICS_BY_CLUSTER, 224),
        (RequestCode.GET_CONSUMER_RUNNING_INFO, 307),
        (RequestCode.SEND_MESSAGE_V2, 310),
        (RequestCode.SEND_BATCH_MESSAGE, 320),
        (RequestCode.DELETE_EXPIRED_COMMITLOG, 329),
    ],
)
def test_request_codes_match_java(code, value):
    assert code == value


def test_request_code_table_size():
    # RequestCode.java of 4.9.8 declares 96 distinct codes.
    assert len(RequestCode) == 96
    assert len(RequestCode.__members__) == len(RequestCode)  # no aliases


def test_response_codes_match_java():
    expected = {
        "SUCCESS": 0,
        "SYSTEM_ERROR": 1,
        "SYSTEM_BUSY": 2,
        "REQUEST_CODE_NOT_SUPPORTED": 3,
        "TRANSACTION_FAILED": 4,
        "FLUSH_DISK_TIMEOUT": 10,
        "SLAVE_NOT_AVAILABLE": 11,
        "FLUSH_SLAVE_TIMEOUT": 12,
        "MESSAGE_ILLEGAL": 13,
        "SERVICE_NOT_AVAILABLE": 14,
        "VERSION_NOT_SUPPORTED": 15,
        "NO_PERMISSION": 16,
        "TOPIC_NOT_EXIST": 17,
        "TOPIC_EXIST_ALREADY": 18,
        "PULL_NOT_FOUND": 19,
        "PULL_RETRY_IMMEDIATELY": 20,
        "PULL_OFFSET_MOVED": 21,
        "QUERY_NOT_FOUND": 22,
        "SUBSCRIPTION_PARSE_FAILED": 23,
        "SUBSCRIPTION_NOT_EXIST": 24,
        "SUBSCRIPTION_NOT_LATEST": 25,
        "SUBSCRIPTION_GROUP_NOT_EXIST": 26,
        "FILTER_DATA_NOT_EXIST": 27,
        "FILTER_DATA_NOT_LATEST": 28,
        "TRANSACTION_SHOULD_COMMIT": 200,
        "TRANSACTION_SHOULD_ROLLBACK": 201,
        "TRANSACTION_STATE_UNKNOW": 202,
        "TRANSACTION_STATE_GROUP_WRONG": 203,
        "NO_BUYER_ID": 204,
        "NOT_IN_CURRENT_UNIT": 205,
        "CONSUMER_NOT_ONLINE": 206,
        "CONSUME_MSG_TIMEOUT": 207,
        "NO_MESSAGE": 208,
        "UPDATE_AND_CREATE_ACL_CONFIG_FAILED": 209,
        "DELETE_ACL_CONFIG_FAILED": 210,
        "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED": 211,
    }
    assert {m.name: int(m) for m in ResponseCode} == expected
    assert len(ResponseCode.__members__) == len(ResponseCode)  # no aliases in 4.9.8


def test_sys_response_codes_are_the_response_codes():
    for code in RemotingSysResponseCode:
        assert ResponseCode[code.name] == code


def test_names():
    assert request_code_name(10) == "SEND_MESSAGE"
    assert request_code_name(RequestCode.PULL_MESSAGE) == "PULL_MESSAGE"
    assert request_code_name(12345) == "UNKNOWN(12345)"
    assert request_code_name(-1) == "UNKNOWN(-1)"
    assert response_code_name(0) == "SUCCESS"
    assert response_code_name(19) == "PULL_NOT_FOUND"
    assert response_code_name(5) == "UNKNOWN(5)"
