// roce-frame: RoCEv2 frames from the wire into the model's RC engine (sim/roce/engine.cpp,
// rc_qp.cpp, rc_responder.cpp, rc_requester.cpp, memory.cpp), by the way frames from another
// host arrive: an uplink port of the model's switch transmits them to the function's port and
// the engine's poll() takes them (rig::roce::decode_into, then rc_qp::on_frame), as a NIC
// model's data-path pass calls it (memory and DMA view pinned). One fresh engine and RC queue
// pair per input, in RTS (or RTR) with a responder whose regions lie in an in-process buffer
// (bench.hpp), and a sequence of steps: frames built from fields (every RC opcode, PSNs near
// what the queue pair expects, R_Keys of every kind of region, lengths around the MTU, AETH
// syndromes), raw frames, the local queue pair posting sends and receives (so that ACKs, NAKs
// and READ responses meet requests outstanding), and time passing (ack and RNR timers).
// A frame is sealed with a correct ICRC (abi/roce's seal), left unsealed (the in-process
// path, no ICRC check) or left as it is.
//
// Oracles (session.hpp, checks.cpp): no crash or UB; the engine drops exactly the frames that
// do not decode or are not for its queue pair, and the queue pair sees the others; the
// responder's expected PSN, shadowed from outside, moves only when a request at it executes
// (never on a dropped, duplicate or out-of-sequence frame), every ACK names the PSN before it
// and every NAK a PSN it expected; a refused request is NAKed; the buffer changes only where the
// step's packet may write (the range its checked R_Key names, the receive it consumes, the READ
// it answers): canaries, read-only, other-PD and unregistered bytes never; a READ response
// carries the bytes a checked READ asked for; completions come once per entry, in order, a send
// succeeding only once acknowledged; what the queue pair sends decodes and takes PSNs it owns.
#include <array>
#include <chrono>
#include <cstring>
#include <vector>

#include "test/fuzz/harness.hpp"
#include "test/fuzz/reader.hpp"
#include "test/fuzz/roce/session.hpp"

namespace {

using namespace rig::fuzz::roce;
using proto::opcode;
// This harness reads its multi-byte fields in network order (u16_be, u32_be), as its corpus holds them.
using rig::fuzz::reader;

constexpr std::array<opcode, 22> all_opcodes{
    opcode::send_first, opcode::send_middle, opcode::send_last, opcode::send_last_imm, opcode::send_only,
    opcode::send_only_imm, opcode::write_first, opcode::write_middle, opcode::write_last, opcode::write_last_imm,
    opcode::write_only, opcode::write_only_imm, opcode::read_request, opcode::read_response_first,
    opcode::read_response_middle, opcode::read_response_last, opcode::read_response_only, opcode::acknowledge,
    opcode::atomic_acknowledge, opcode::compare_swap, opcode::fetch_add, opcode::send_only_inv};

// The keys a field picks: every kind of region (bench.hpp), and one no region has.
std::uint32_t key_of(std::uint8_t pick, reader& in) {
    static constexpr std::array<std::uint32_t, 7> keys{rkey, readonly, scattered, foreign, unmapped, lkey, rcvkey};
    return (pick & 7) == 7 ? in.u32_be() : keys[pick & 7];
}

std::uint64_t start_of(std::uint32_t key) {
    const area* a = area_of(key);
    return a == nullptr ? va_base : a->start;
}

session_config config_of(reader& in) {
    static constexpr std::array<std::uint8_t, 8> timeouts{0, 1, 4, 8, 12, 14, 20, 31};
    static constexpr std::array<std::uint8_t, 4> rnr_retries{0, 1, 3, 7};
    static constexpr std::array<std::uint8_t, 4> rights{
        sr::access_remote_read | sr::access_remote_write, sr::access_remote_read, sr::access_remote_write, 0};
    static constexpr std::array<std::uint8_t, 4> rd_atomic{1, 2, 4, 16};
    const std::uint8_t a = in.u8(), b = in.u8(), c = in.u8();
    session_config s;
    s.v6 = (a & 1) != 0;
    s.stay_in_rtr = (a & 2) != 0;
    s.mtu = 256u << std::min((a >> 2) & 7, 4);
    s.remote_rights = rights[(a >> 5) & 3];
    s.rq_psn = (a & 0x80) != 0 ? 0xfffff0 : 0x100;
    s.timeout = timeouts[b & 7];
    s.retry_count = static_cast<std::uint8_t>((b >> 3) & 7);
    s.rnr_retry = rnr_retries[b >> 6];
    s.max_dest_rd_atomic = s.max_rd_atomic = rd_atomic[c & 3];
    s.min_rnr_timer = static_cast<std::uint8_t>((c >> 2) & 31);
    s.sq_psn = (c & 0x80) != 0 ? 0xfffffa : 0x5000;
    return s;
}

std::uint32_t psn_of(const session& s, std::uint8_t anchor, reader& in) {
    const auto delta = static_cast<std::int8_t>(in.u8());
    std::uint32_t base = 0;
    switch (anchor & 7) {
    case 0: base = proto::psn_add(s.last_injected_psn(), 1); break;
    case 1: base = s.expected_psn(); break;
    case 2: base = s.config().rq_psn; break;
    case 3: base = s.last_request_psn(); break;
    case 4: base = s.config().sq_psn; break;
    case 5: base = proto::psn_add(s.sent_end(), proto::psn_mask); break;
    case 6: base = proto::psn_add(s.expected_psn(), proto::psn_mask); break;
    default: base = in.u32_be(); break;
    }
    return static_cast<std::uint32_t>(static_cast<std::int64_t>(base) + delta) & proto::psn_mask;
}

seal_mode seal_of(std::uint8_t bits) {
    return (bits & 3) < 2 ? seal_mode::seal : (bits & 3) == 2 ? seal_mode::unsealed : seal_mode::as_is;
}

// A frame from fields: headers as a peer's NIC writes them, then optionally one byte flipped.
std::vector<std::byte> built_frame(const session& s, reader& in) {
    proto::transport t;
    t.op = all_opcodes[in.u8() % all_opcodes.size()];
    const std::uint8_t flags = in.u8();
    t.psn = psn_of(s, flags, in);
    t.ack_req = (flags & 0x08) != 0;
    t.dest_qp = (flags & 0x30) == 0x30 ? peer_qpn : our_qpn;   // another queue pair's: a quarter of them
    const std::uint8_t shape = in.u8();
    t.rkey = key_of(shape, in);
    t.va = (shape & 0x10) != 0 ? (std::uint64_t{in.u32_be()} << 32 | in.u32_be())
                               : start_of(t.rkey) + static_cast<std::uint64_t>(static_cast<std::int16_t>(in.u16_be()));
    t.dma_length = (shape & 0x08) != 0 ? in.u32_be() : in.u16_be();
    t.syndrome = in.u8();
    t.msn = in.u8();
    t.immediate = 0x12345678;
    const std::uint8_t size = in.u8();
    const std::uint32_t mtu = s.config().mtu, low = size & 63u;
    std::size_t payload = size >> 6 == 0 ? mtu : size >> 6 == 1 ? low : size >> 6 == 2 ? mtu + low - 32 : in.u16_be();
    if (!proto::carries_payload(t.op)) {
        payload = 0;
    }
    const std::uint8_t seed = in.u8();
    proto::route r;
    r.src_mac = bench::peer_mac;
    r.dst_mac = bench::nic_mac;
    r.src_gid = s.peer_gid();
    r.dst_gid = (shape & 0x60) == 0x60 ? gid_of(s.config().v6, 0x42) : s.our_gid();   // 0x42: not ours
    while (payload > 0 && proto::frame_bytes(r, t.op, payload) > sr::frame_capacity) {
        payload = sr::frame_capacity - (proto::frame_bytes(r, t.op, payload) - payload);
    }
    std::vector<std::byte> body(payload);
    for (std::size_t i = 0; i < payload; ++i) {
        body[i] = static_cast<std::byte>((seed + i * 7) & 0xff);
    }
    std::vector<std::byte> f(sr::frame_capacity);
    f.resize(proto::encode(r, t, body, f));
    if ((flags & 0x30) == 0x20) {   // a quarter of them: one byte flipped
        const std::size_t at = in.u16_be() % f.size();
        f[at] ^= static_cast<std::byte>(in.u8() | 1);
    }
    return f;
}

sr::sge sge_of(reader& in) {
    static constexpr std::array<std::uint32_t, 8> keys{lkey, lkey, lkey, rcvkey, rkey, readonly, foreign, 0x99};
    sr::sge s;
    s.key = keys[in.u8() & 7];
    s.va = start_of(s.key) + in.u16_be() % 9000;
    s.length = in.u16_be() % 9000u;
    return s;
}

sr::send_request send_of(reader& in) {
    static constexpr std::array<sr::work_op, 4> ops{sr::work_op::send, sr::work_op::write, sr::work_op::read,
                                                    sr::work_op::write};
    const std::uint8_t f = in.u8();
    sr::send_request r;
    r.op = ops[f & 3];
    r.signaled = true;
    r.is_inline = (f & 4) != 0;
    if (r.is_inline) {
        r.inline_bytes = in.u16_be() % 300u;
        for (std::size_t i = 0; i < sr::max_inline; ++i) {
            r.inline_data[i] = static_cast<std::byte>(i * 3);
        }
    } else {
        r.sge_count = (f & 8) != 0 ? 2 : (f & 0x10) != 0 ? 0 : 1;
        for (std::size_t i = 0; i < r.sge_count; ++i) {
            r.sg[i] = sge_of(in);
        }
        if ((f & 0x20) != 0) {
            r.sge_count = sr::max_sge + 1;   // malformed: the NIC cannot run it
        }
    }
    const std::uint8_t remote = in.u8();
    r.rkey = key_of(remote, in);
    r.remote_va = start_of(r.rkey) + static_cast<std::uint64_t>(static_cast<std::int16_t>(in.u16_be()));
    return r;
}

sr::receive_request receive_of(reader& in) {
    const std::uint8_t f = in.u8();
    sr::receive_request r;
    r.sge_count = static_cast<std::uint8_t>(f & 3);
    for (std::size_t i = 0; i < r.sge_count; ++i) {
        r.sg[i] = sge_of(in);
    }
    if ((f & 4) != 0) {
        r.sge_count = sr::max_sge + 1;
    }
    return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    reader in(data, size);
    session s(config_of(in));
    std::vector<std::byte> last;
    for (int step = 0; step < 64 && !in.empty(); ++step) {
        const std::uint8_t op = in.u8();
        switch (op & 7) {
        case 0:
        case 1:
        case 2:
            last = built_frame(s, in);
            s.deliver(last, seal_of(op >> 3));
            break;
        case 3: {
            const auto raw = in.take(in.u16_be() % (sr::frame_capacity + 1));
            last.assign(raw.begin(), raw.end());
            s.deliver(last, seal_of(op >> 3));
            break;
        }
        case 4: s.post_send(send_of(in)); break;
        case 5: s.post_receive(receive_of(in)); break;
        case 6: s.advance(std::chrono::nanoseconds(std::int64_t{1} << (in.u8() % 44))); break;
        default: s.deliver(last, seal_of(op >> 3)); break;   // the same frame again: a duplicate
        }
    }
    s.finish();
    return 0;
}
