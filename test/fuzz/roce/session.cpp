#include "test/fuzz/roce/session.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace rig::fuzz::roce {

namespace {

using proto::opcode;
using proto::psn_add;
using proto::psn_diff;

bool is_response(opcode op) {
    return op >= opcode::read_response_first && op <= opcode::atomic_acknowledge;
}

bool is_read_response(opcode op) { return op >= opcode::read_response_first && op <= opcode::read_response_only; }

bool is_send(opcode op) {
    return op <= opcode::send_only_imm || op == opcode::send_last_inv || op == opcode::send_only_inv;
}

sr::qp_config qp_config_of(const proto::gid& ours) {
    sr::qp_config q;
    q.qpn = our_qpn;
    q.pd = our_pd;
    q.mac = bench::nic_mac;
    q.gid = ours;
    q.sq_size = q.rq_size = ring_entries;
    return q;
}

// One time base for the process: an input's clock starts there, whatever ran before it.
sr::clock::time_point base_time() {
    static const sr::clock::time_point base = sr::clock::now();
    return base;
}

// Where the ICRC of a frame that decodes lies: at the end of its IP packet (Ethernet may pad).
std::size_t packet_end(std::span<const std::byte> f) {
    const auto be16 = [&](std::size_t at) {
        return static_cast<std::size_t>(static_cast<std::uint8_t>(f[at])) << 8 | static_cast<std::uint8_t>(f[at + 1]);
    };
    return be16(12) == 0x0800 ? 14 + be16(16) : 14 + 40 + be16(18);
}

}  // namespace

session::session(const session_config& c)
    : _b(bench::get()), _c(c), _ours(gid_of(c.v6, 1)), _peer(gid_of(c.v6, 0x99)), _engine(*_b.nic, _ours),
      _qp(_b.mem, *_b.nic, qp_config_of(_ours)), _now(base_time()) {
    _b.fill();
    _snapshot.assign(_b.buffer().begin(), _b.buffer().end());
    _allowed.assign(buffer_bytes, 0);
    _engine.add(_qp);
    _qp.to_init(c.remote_rights);
    sr::path p;
    p.dest_qpn = peer_qpn;
    p.dest_mac = bench::peer_mac;
    p.dest_gid = _peer;
    p.mtu = c.mtu;
    p.rq_psn = c.rq_psn;
    p.min_rnr_timer = c.min_rnr_timer;
    p.max_dest_rd_atomic = c.max_dest_rd_atomic;
    _qp.to_rtr(p);
    if (!c.stay_in_rtr) {
        sr::send_params s;
        s.sq_psn = c.sq_psn;
        s.timeout = c.timeout;
        s.retry_count = c.retry_count;
        s.rnr_retry = c.rnr_retry;
        s.max_rd_atomic = c.max_rd_atomic;
        _qp.to_rts(s);
    }
    _epsn = c.rq_psn;
    _nak_psns = {_epsn};
    _last_injected = psn_add(c.rq_psn, proto::psn_mask);
    _last_request = _sent_end = c.sq_psn;
}

session::~session() {
    _engine.remove(_qp);
    // nothing of this input stays on the wire for the next
    for (sr::port* p : {_b.nic.get(), _b.outside.get()}) {
        while (sr::frame* f = p->receive(_now + std::chrono::hours(1))) {
            p->release(f);
        }
    }
}

void session::poll() {
    // as a NIC model's data-path pass (sim/mlx5/datapath.cpp): the region table, then the DMA view
    sr::memory::pin pinned(_b.mem);
    _engine.poll(_now);
}

void session::deliver(std::span<const std::byte> bytes, seal_mode mode) {
    sr::frame* f = _b.outside->allocate();
    require(f != nullptr, "the switch has a frame to spare");
    const std::size_t n = std::min(bytes.size(), sr::frame_capacity);
    if (n != 0) {
        std::memcpy(f->bytes.data(), bytes.data(), n);
    }
    f->size = static_cast<std::uint32_t>(n);
    if (n >= 6) {
        std::memcpy(f->bytes.data(), bench::nic_mac.data(), 6);   // the switch delivers by destination MAC
    }
    f->payload_ref = nullptr;
    f->sealed = mode != seal_mode::unsealed;
    proto::decoded d;
    bool ok = proto::decode_into(f->data(), d, proto::icrc_check::skip).has_value();
    if (ok && mode == seal_mode::seal) {
        proto::seal(f->writable().first(packet_end(f->data())));
    }
    // what the engine will see, decoded from a copy (the frame is the wire's once sent)
    std::vector<std::byte> copy(f->data().begin(), f->data().end());
    ok = ok && proto::decode_into(copy, d, f->sealed ? proto::icrc_check::verify : proto::icrc_check::skip).has_value();
    const bool reaches = ok && d.net.dst_gid == _ours && d.bth.dest_qp == our_qpn;
    const sr::qp_state state_before = _qp.state();
    const bool live = state_before == sr::qp_state::rtr || state_before == sr::qp_state::rts;
    const sr::qp_counters before = _qp.counters();
    const sr::engine_counters engine_before = _engine.counters();
    std::fill(_allowed.begin(), _allowed.end(), std::uint8_t{0});
    if (reaches && live) {
        allow_for(d);
    }
    _nak_for = -1;
    _answer_due = false;
    _local_failure = false;

    _b.outside->transmit(f, _now);
    poll();

    const sr::qp_counters after = _qp.counters();
    const sr::engine_counters engine_after = _engine.counters();
    const std::uint64_t dropped = (engine_after.not_roce - engine_before.not_roce) +
                                  (engine_after.not_for_us - engine_before.not_for_us) +
                                  (engine_after.no_qp - engine_before.no_qp);
    require(engine_after.frames_received - engine_before.frames_received == (n >= 6 ? 1u : 0u),
            "a frame for this function's MAC reaches its engine");
    // spec 9.6 and annex A17.3.3: a packet failing the header or ICRC checks is dropped silently
    require(dropped == (n >= 6 && !reaches ? 1u : 0u),
            "the engine drops (and counts) exactly the frames that are no good RoCEv2 packet for its queue pair");
    require(after.packets_received - before.packets_received == (reaches ? 1u : 0u),
            "the queue pair sees exactly the frames the engine takes");
    bool at_expected = false;
    if (reaches && live) {
        _last_injected = d.bth.psn;
        if (is_response(d.bth.op)) {
            if (state_before == sr::qp_state::rts) {
                follow_response(d);
            }
            at_expected = is_read_response(d.bth.op);
        } else {
            follow_request(d, before, at_expected);
        }
    }
    check_completions();
    check_sent();
    check_memory(at_expected);
    // 9.7.5.1: a request with AckReq, a duplicate and a first packet out of sequence are each
    // answered, at once unless READ responses queue ahead of the answer (a pass sends 128 at most)
    require(!_answer_due || _acks_sent != 0 || _read_responses_sent >= 128 || _local_failure,
            "the responder answers what asks for an answer");
}

void session::post_send(const sr::send_request& r) {
    _local_failure = false;
    _nak_for = -1;
    sr::send_request wr = r;
    wr.index = _next_index;
    if (_qp.post_send(wr)) {
        ++_next_index;
        _sends.push_back({wr});
        _packets_posted += sr::packets_of(std::min(wr.length(), sr::max_message), _c.mtu);
    }
    poll();
    check_completions();
    check_sent();
    check_memory(false);
}

void session::post_receive(const sr::receive_request& r) {
    _nak_for = -1;
    sr::receive_request wr = r;
    wr.index = _next_index;
    if (_qp.post_receive(wr)) {
        ++_next_index;
        _receives.push_back(wr);
    }
    poll();
    check_completions();
    check_sent();
    check_memory(false);
}

void session::advance(std::chrono::nanoseconds by) {
    _nak_for = -1;
    _now += by;
    poll();
    check_completions();
    check_sent();
    check_memory(false);
}

void session::finish() {
    _qp.to_error();
    check_completions();
    require(_sends.empty() && _receives.empty(),
            "every entry posted completes exactly once, flushed at the latest when the queue pair fails");
}

// ---- the shadow ----------------------------------------------------------------------------------

bool session::legal_remote(std::uint32_t key, std::uint64_t va, std::uint64_t bytes, std::uint8_t right) const {
    if ((_c.remote_rights & right) == 0) {
        return false;
    }
    if (bytes == 0) {
        return true;   // a zero-length RDMA operation moves nothing: the R_Key need not be checked (9.4.3, 9.4.4)
    }
    const area* a = area_of(key);
    return a != nullptr && a->pd == our_pd && (a->rights & right) != 0 && va >= a->start &&
           va - a->start <= a->length && bytes <= a->length - (va - a->start);
}

void session::allow_for(const proto::decoded& d) {
    const opcode op = d.bth.op;
    const auto allow_local = [&](const auto& sg, std::size_t count) {
        for (std::size_t i = 0; i < std::min(count, sr::max_sge); ++i) {
            const area* a = area_of(sg[i].key);
            if (a != nullptr && a->pd == our_pd && (a->rights & sr::access_local_write) != 0) {
                allow(_allowed, sg[i].key, sg[i].va, sg[i].length);
            }
        }
    };
    if (op == opcode::write_first || op == opcode::write_only) {
        if (legal_remote(d.bth.rkey, d.bth.va, d.bth.dma_length, sr::access_remote_write)) {
            allow(_allowed, d.bth.rkey, d.bth.va, d.bth.dma_length);
        }
    } else if (op == opcode::write_middle || op == opcode::write_last) {
        if (_inbound.valid) {
            allow(_allowed, _inbound.key, _inbound.va, _inbound.bytes);
        }
    } else if (is_send(op)) {
        if (!_receives.empty()) {
            allow_local(_receives.front().sg, _receives.front().sge_count);
        }
    } else if (is_read_response(op)) {
        for (const pending_send& s : _sends) {
            if (s.wr.op == sr::work_op::read) {
                allow_local(s.wr.sg, s.wr.sge_count);
            }
        }
    }
}

void session::move_epsn(std::uint32_t to) {
    _epsn = to;
    _nak_psns.push_back(to);
}

// rc_responder.cpp's on_request as seen from outside (IB spec vol. 1 9.7, rxe check_psn): a
// duplicate lies before the expected PSN, a packet ahead of it is out of sequence, and only a
// request at the expected PSN executes, moving it one PSN on (a READ: one per response packet).
void session::follow_request(const proto::decoded& d, const sr::qp_counters& before, bool& executed) {
    const sr::qp_counters after = _qp.counters();
    const std::uint32_t psn = d.bth.psn;
    const opcode op = d.bth.op;
    const bool read = op == opcode::read_request;
    const auto remember_read = [&] {
        _reads.push_back({psn, sr::packets_of(d.bth.dma_length, _c.mtu), d.bth.rkey, d.bth.va, d.bth.dma_length});
        if (_reads.size() > 128) {
            _reads.erase(_reads.begin());
        }
    };
    if (after.duplicates_received != before.duplicates_received) {
        require(psn_diff(psn, _epsn) < 0, "a request is a duplicate only before the expected PSN");
        if (read && legal_remote(d.bth.rkey, d.bth.va, d.bth.dma_length, sr::access_remote_read)) {
            remember_read();   // answered again from the PSN it names
        }
        _answer_due = !read;   // its ACK was lost: acknowledged again
        return;
    }
    if (after.out_of_sequence != before.out_of_sequence) {
        require(psn_diff(psn, _epsn) > 0, "a request is out of sequence only after the expected PSN");
        _answer_due = after.seq_naks_sent != before.seq_naks_sent;   // the first one: a sequence NAK
        return;
    }
    require(psn == _epsn, "a request executes only at the expected PSN");
    executed = true;
    if (_qp.state() == sr::qp_state::error) {
        _nak_for = psn;   // refused: its NAK goes out with this step
        _zero_length_refused = (read || op == opcode::write_first || op == opcode::write_only) && d.bth.dma_length == 0;
        _inbound.valid = false;
        return;
    }
    if (after.rnr_naks_sent != before.rnr_naks_sent) {
        require(op == opcode::send_first || op == opcode::send_only || op == opcode::send_only_imm ||
                    op == opcode::send_only_inv,
                "only the first packet of a SEND meets an empty receive queue");
        _answer_due = true;   // the RNR NAK
        return;   // the expected PSN stays: the requester sends it again
    }
    if (read) {
        require(legal_remote(d.bth.rkey, d.bth.va, d.bth.dma_length, sr::access_remote_read),
                "a READ the responder takes passes the R_Key checks over its whole range (rxe check_rkey)");
        remember_read();
        move_epsn(psn_add(psn, sr::packets_of(d.bth.dma_length, _c.mtu)));
        return;
    }
    if (op == opcode::write_first || op == opcode::write_only) {
        require(legal_remote(d.bth.rkey, d.bth.va, d.bth.dma_length, sr::access_remote_write),
                "a WRITE the responder takes passes the R_Key checks over its whole range");
        _inbound = {true, d.bth.rkey, d.bth.va, d.bth.dma_length};
    }
    _answer_due = d.bth.ack_req;
    move_epsn(psn_add(psn, 1));
}

// What a response may acknowledge (9.7.5.1: an ACK acknowledges every PSN up to the one it
// names, a NAK every PSN before it, a READ response every PSN up to its own), bounded by what
// was sent: a send completes successfully only once its PSNs are among these.
void session::follow_response(const proto::decoded& d) {
    const std::uint32_t psn = d.bth.psn;
    std::uint32_t through = psn;
    if (d.bth.op == opcode::acknowledge) {
        switch (proto::kind_of(d.bth.syndrome)) {
        case proto::ack_kind::ack: through = psn_add(psn, 1); break;
        case proto::ack_kind::rnr_nak:
        case proto::ack_kind::nak: break;
        case proto::ack_kind::reserved: return;
        }
    } else if (is_read_response(d.bth.op)) {
        through = psn_add(psn, 1);
    } else {
        return;
    }
    const std::int64_t sent = psn_diff(_sent_end, _c.sq_psn);
    const std::int64_t acked = std::clamp<std::int64_t>(psn_diff(through, _c.sq_psn), 0, sent);
    _acked = std::max(_acked, acked);
}

}  // namespace rig::fuzz::roce
