#!/usr/bin/env python3
"""Seed frames for the `broker_request` fuzz target (ci/fuzz.sh runs this).

Writes one file per request into DIR, named `seed-<api>-v<version>...`: a frame as the broker's listener hands it
to dispatch (the 4-byte size prefix stripped), for every API the broker
implements, at its oldest version and at a flexible (compact) one where it has
one, so the fuzzer starts from frames that decode instead of having to find
each API's layout by itself. The Produce frames carry the record batches of a
real segment (SEGMENT, one of the reader's fixtures: ci/fuzz.sh picks one
whose batches the broker accepts — uncompressed, lz4 and zstd), so mutations
reach record-batch validation and the append on the produce path.

    python3 fuzz/seed_requests.py DIR SEGMENT

Layouts are Kafka's message schemas (clients/src/main/resources/common/message);
a frame here that stops decoding shows up as a seed the fuzzer never gets past
the header of, so `bash ci/fuzz.sh` checks each one decodes (see
`EPOCHAL_FUZZ_EXPECT_DECODE` in fuzz/fuzz_targets/broker_request.rs).
"""

import os
import struct
import sys


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def uvarint(v):
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class Enc:
    """Strings, arrays and bytes in the classic or the compact (flexible) form."""

    def __init__(self, flexible):
        self.flexible = flexible

    def string(self, s):
        if s is None:
            return uvarint(0) if self.flexible else i16(-1)
        b = s.encode()
        return (uvarint(len(b) + 1) if self.flexible else i16(len(b))) + b

    def array(self, items):
        if items is None:
            return uvarint(0) if self.flexible else i32(-1)
        head = uvarint(len(items) + 1) if self.flexible else i32(len(items))
        return head + b"".join(items)

    def bytes_(self, b):
        if b is None:
            return uvarint(0) if self.flexible else i32(-1)
        return (uvarint(len(b) + 1) if self.flexible else i32(len(b))) + b

    def tags(self):
        return uvarint(0) if self.flexible else b""

    def struct(self, *fields):
        return b"".join(fields) + self.tags()


def frame(key, version, flexible, body, correlation_id=7):
    # Request header v1 (client id a classic nullable string even in v2),
    # plus an empty tag buffer in v2.
    header = i16(key) + i16(version) + i32(correlation_id) + i16(2) + b"fz"
    if flexible:
        header += uvarint(0)
    return header + body


def requests(segment):
    out = {}
    e, c = Enc(False), Enc(True)

    # ApiVersions (18): v0 has no body; v3 is flexible and names the client.
    out["api-versions-v0"] = frame(18, 0, False, b"")
    out["api-versions-v3"] = frame(18, 3, True, c.string("fz") + c.string("1") + c.tags())
    out["api-versions-v9-unknown"] = frame(18, 9, True, c.tags())

    # Metadata (3).
    out["metadata-v0"] = frame(3, 0, False, e.array([e.string("t")]))
    out["metadata-v1-all"] = frame(3, 1, False, e.array(None))
    out["metadata-v4"] = frame(3, 4, False, e.array([e.string("t")]) + i8(0))
    topic_v12 = c.struct(bytes(16), c.string("t"))
    out["metadata-v12"] = frame(3, 12, True, c.array([topic_v12]) + i8(0) + i8(0) + c.tags())

    # Produce (0): v3 classic, v9 flexible; acks 1, -1 and 0.
    def produce(enc, version, acks, records, partition=0):
        part = enc.struct(i32(partition), enc.bytes_(records))
        topic = enc.struct(enc.string("t"), enc.array([part]))
        body = enc.string(None) + i16(acks) + i32(1000) + enc.array([topic]) + enc.tags()
        return frame(0, version, enc.flexible, body)

    out["produce-v3-acks1"] = produce(e, 3, 1, segment)
    out["produce-v3-acks-all"] = produce(e, 3, -1, segment)
    out["produce-v3-acks0"] = produce(e, 3, 0, segment)
    out["produce-v9-acks1"] = produce(c, 9, 1, segment)
    out["produce-v3-unknown-partition"] = produce(e, 3, 1, segment, partition=5)

    # Fetch (1): v4 and v11 (session, current leader epoch, rack).
    part_v4 = i32(0) + i64(0) + i32(1 << 20)
    out["fetch-v4"] = frame(
        1, 4, False,
        i32(-1) + i32(100) + i32(1) + i32(1 << 20) + i8(0)
        + e.array([e.string("t") + e.array([part_v4])]),
    )
    part_v11 = i32(0) + i32(-1) + i64(0) + i64(-1) + i32(1 << 20)
    out["fetch-v11-follower"] = frame(
        1, 11, False,
        i32(2) + i32(500) + i32(1) + i32(1 << 20) + i8(0) + i32(0) + i32(-1)
        + e.array([e.string("t") + e.array([part_v11])]) + e.array([]) + e.string(""),
    )

    # ListOffsets (2): v1 latest, v4 earliest with the current leader epoch.
    out["list-offsets-v1"] = frame(
        2, 1, False, i32(-1) + e.array([e.string("t") + e.array([i32(0) + i64(-1)])])
    )
    out["list-offsets-v4"] = frame(
        2, 4, False,
        i32(-1) + i8(1) + e.array([e.string("t") + e.array([i32(0) + i32(0) + i64(-2)])]),
    )

    # OffsetForLeaderEpoch (23): v0 and v3 (replica id, current leader epoch).
    out["offset-for-leader-epoch-v0"] = frame(
        23, 0, False, e.array([e.string("t") + e.array([i32(0) + i32(0)])])
    )
    out["offset-for-leader-epoch-v3"] = frame(
        23, 3, False, i32(2) + e.array([e.string("t") + e.array([i32(0) + i32(0) + i32(0)])])
    )

    # LeaderAndIsr (4): v0, partitions flat, one live leader.
    state = (
        e.string("t") + i32(0) + i32(1) + i32(1) + i32(3)
        + e.array([i32(1)]) + i32(0) + e.array([i32(1)])
    )
    leader = i32(1) + e.string("127.0.0.1") + i32(9092)
    out["leader-and-isr-v0"] = frame(
        4, 0, False, i32(1) + i32(1) + e.array([state]) + e.array([leader])
    )

    # UpdateMetadata (6): v5, one topic and one broker.
    partition = (
        i32(0) + i32(1) + i32(1) + i32(3) + e.array([i32(1)])
        + i32(0) + e.array([i32(1)]) + e.array([])
    )
    endpoint = i32(9092) + e.string("127.0.0.1") + e.string("PLAINTEXT") + i16(0)
    broker = i32(1) + e.array([endpoint]) + e.string(None)
    out["update-metadata-v5"] = frame(
        6, 5, False,
        i32(1) + i32(1) + i64(-1)
        + e.array([e.string("t") + e.array([partition])]) + e.array([broker]),
    )

    # CreateTopics (19): v0 with one config, v1 validate-only.
    topic = (
        e.string("u") + i32(1) + i16(1) + e.array([])
        + e.array([e.string("min.insync.replicas") + e.string("1")])
    )
    out["create-topics-v0"] = frame(19, 0, False, e.array([topic]) + i32(1000))
    out["create-topics-v1-validate"] = frame(19, 1, False, e.array([topic]) + i32(1000) + i8(1))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: seed_requests.py DIR SEGMENT")
    target, segment_path = sys.argv[1], sys.argv[2]
    with open(segment_path, "rb") as f:
        segment = f.read()
    os.makedirs(target, exist_ok=True)
    for name, data in requests(segment).items():
        with open(os.path.join(target, "seed-" + name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
