from __future__ import annotations

from skyoap.proto import common_pb2, register_pb2
from skyoap.receiver.wire import key_int_pairs


def test_hand_encoded_pairs_equal_protobufs_encoding() -> None:
    pairs = [("a", 1), ("svc-ü-名前", 127), ("x" * 200, 128), ("big", 2**31 - 1), ("zero", 0), ("", 5)]
    expected = register_pb2.ServiceRegisterMapping(
        services=[common_pb2.KeyIntValuePair(key=k, value=v) for k, v in pairs]
    ).SerializeToString()
    assert key_int_pairs(1, pairs) == expected
    decoded = register_pb2.NetAddressMapping.FromString(key_int_pairs(1, pairs))
    assert [(kv.key, kv.value) for kv in decoded.addressIds] == pairs
    assert key_int_pairs(1, []) == b""
