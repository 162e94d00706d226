#!/usr/bin/env python3
"""Independent ICRC check for RoCEv2 frames in a pcap file (test oracle for abi/roce).

Follows Linux's drivers/infiniband/sw/rxe/rxe_icrc.c: CRC-32 (zlib's, i.e. IEEE 802.3) over
64 one-bits for the absent LRH, then the IP header with its variant fields forced to ones
(IPv4: TOS, TTL, header checksum; IPv6: traffic class, flow label, hop limit), the UDP header
with its checksum forced to ones, the BTH with byte 4 (FECN/BECN/reserved) forced to ones, and
the rest of the packet up to the ICRC, which is stored little-endian.

Prints one line per frame: "ok", "bad <expected> <found>", or "skip" for a frame that is not
RoCEv2 (not IPv4/IPv6, not UDP, or not to port 4791).
"""
import struct
import sys
import zlib


def frames(path):
    data = open(path, "rb").read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic != 0xA1B2C3D4:
        sys.exit("not a little-endian microsecond pcap file")
    at = 24
    while at < len(data):
        _, _, caplen, _ = struct.unpack_from("<IIII", data, at)
        at += 16
        yield data[at:at + caplen]
        at += caplen


def is_roce_v2(frame):
    if len(frame) < 14:
        return False
    ethertype = struct.unpack_from(">H", frame, 12)[0]
    if ethertype == 0x0800 and len(frame) >= 14 + 20 + 8 + 12 + 4:
        return frame[14 + 9] == 17 and struct.unpack_from(">H", frame, 14 + 20 + 2)[0] == 4791
    if ethertype == 0x86DD and len(frame) >= 14 + 40 + 8 + 12 + 4:
        return frame[14 + 6] == 17 and struct.unpack_from(">H", frame, 14 + 40 + 2)[0] == 4791
    return False


def icrc(frame):
    ethertype = struct.unpack_from(">H", frame, 12)[0]
    ip = bytearray(frame[14:14 + (20 if ethertype == 0x0800 else 40)])
    if ethertype == 0x0800:
        ip[1] = 0xFF          # TOS
        ip[8] = 0xFF          # TTL
        ip[10:12] = b"\xff\xff"  # header checksum
        ip_total = struct.unpack_from(">H", frame, 16)[0]
    else:
        ip[0] = (ip[0] & 0xF0) | 0x0F     # traffic class, high nibble
        ip[1] = 0xFF                      # traffic class low nibble + flow label high nibble
        ip[2:4] = b"\xff\xff"             # flow label
        ip[7] = 0xFF                      # hop limit
        ip_total = 40 + struct.unpack_from(">H", frame, 18)[0]
    end = 14 + ip_total
    udp = bytearray(frame[14 + len(ip):14 + len(ip) + 8])
    udp[6:8] = b"\xff\xff"
    bth_at = 14 + len(ip) + 8
    bth = bytearray(frame[bth_at:bth_at + 12])
    bth[4] = 0xFF
    rest = frame[bth_at + 12:end - 4]
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + rest) & 0xFFFFFFFF
    found = struct.unpack_from("<I", frame, end - 4)[0]
    return crc, found


for f in frames(sys.argv[1]):
    if not is_roce_v2(f):
        print("skip")
        continue
    expected, found = icrc(f)
    print("ok" if expected == found else "bad %08x %08x" % (expected, found))
