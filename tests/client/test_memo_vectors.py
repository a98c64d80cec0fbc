"""The memoized test vectors, checked against an independent reading of docs/fleet-contract.md's
derivation (hmac, hashlib and integers only: none of the library's PRR code)."""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import math
import struct

import fastavro

from ldp_telemetry.client.vectors import MEMO_CASES, VECTORS_PATH
from ldp_telemetry.schemas import load_schema

STORED = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
MEMO = STORED["memoized_vectors"]


def reference_key(secret: bytes, metric: str, fingerprint: bytes, kind: str, item: int) -> bytes:
    name = metric.encode("utf-8")
    message = (b"ldp-telemetry/prr/v1\x00" + struct.pack(">I", len(name)) + name + fingerprint
               + kind.encode("ascii") + b"\x00" + struct.pack(">Q", item))
    return hmac.new(secret, message, hashlib.sha256).digest()


def reference_words(key: bytes, count: int) -> list[int]:
    stream = hashlib.shake_256(key).digest(8 * count)
    return [int.from_bytes(stream[8 * i:8 * i + 8], "big") for i in range(count)]


def coin(word: int, p: float) -> bool:
    return (word >> 11) < math.ceil(p * 2 ** 53)


def hex_real(text: str) -> float:
    return struct.unpack(">d", bytes.fromhex(text))[0]


def test_every_memoized_case_has_its_vectors_and_the_keys_follow_the_documented_derivation():
    assert len(MEMO) == sum(len(triples) for _, triples in MEMO_CASES)
    assert {v["registry_entry"]["protocol"] for v in MEMO} == {"grr", "oue", "sue", "olh"}
    for vector in MEMO:
        key = reference_key(bytes.fromhex(vector["device_secret"]),
                            vector["registry_entry"]["name"],
                            bytes.fromhex(vector["fingerprint"]), vector["prr_item"]["kind"],
                            vector["prr_item"]["item"])
        assert key.hex() == vector["prr_key"]
        assert hashlib.sha256(vector["canonical_text"].encode("ascii")).hexdigest()[:32] == \
            vector["fingerprint"]


def test_the_permanent_responses_follow_the_documented_mapping():
    for vector in MEMO:
        stage = vector["stages"]["prr"]
        p1, q1 = hex_real(stage["p"]), hex_real(stage["q"])
        words = reference_words(bytes.fromhex(vector["prr_key"]), 64)
        item = vector["prr_item"]["item"]
        protocol = vector["registry_entry"]["protocol"]
        response = vector["permanent_response"]
        if protocol == "grr":
            d = len(vector["registry_entry"]["domain"]["labels"])
            expected = item if coin(words[0], p1) else (words[1] * (d - 1)) >> 64
            if not coin(words[0], p1):
                expected += expected >= item
            assert response == {"value": expected}
        elif protocol in ("oue", "sue"):
            d = vector["registry_entry"]["domain"]["size"]
            bits = [coin(words[i], p1 if i == item else q1) for i in range(d)]
            packed = bytes(sum(bit << j for j, bit in enumerate(bits[8 * b:8 * b + 8]))
                           for b in range((d + 7) // 8))
            assert response == {"bits": packed.hex()}
        else:  # local hashing: the seed comes from the "seed" stream, y from the bucket's
            seed_key = reference_key(bytes.fromhex(vector["device_secret"]),
                                     vector["registry_entry"]["name"],
                                     bytes.fromhex(vector["fingerprint"]), "seed", 0)
            seed = reference_words(seed_key, 1)[0]
            assert response["seed"] == seed - (1 << 64) * (seed >= 1 << 63)
            g = json.loads(vector["canonical_text"])["parameters"]["g"]
            expected = item if coin(words[0], p1) else (words[1] * (g - 1)) >> 64
            if not coin(words[0], p1):
                expected += expected >= item
            assert response["y"] == expected


def test_the_memoized_reports_decode_to_their_fields():
    schema = load_schema("report")
    for vector in MEMO:
        record = fastavro.schemaless_reader(io.BytesIO(bytes.fromhex(vector["avro"])), schema,
                                            None, return_record_name=True)
        branch, payload = record["payload"]
        assert branch.endswith(vector["payload"]["record"])
        fields = {k: v.hex() if isinstance(v, bytes) else v for k, v in payload.items()}
        assert fields == vector["payload"]["fields"]
        assert record["fingerprint"].hex() == vector["fingerprint"]
