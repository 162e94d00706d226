// The roce-frame harness's oracles after every step (session.hpp): the buffer, the frames the
// queue pair sent, the completions it wrote.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "test/fuzz/roce/session.hpp"

namespace rig::fuzz::roce {

namespace {

using proto::opcode;
using proto::psn_add;
using proto::psn_diff;

bool is_local_error(sr::completion_status s) {
    return s == sr::completion_status::local_length || s == sr::completion_status::local_qp_operation ||
           s == sr::completion_status::local_protection;
}

}  // namespace

// Every byte that changed lies where the step's packet may write (allow_for): the region its
// checked R_Key names, the receive it consumes, the READ it answers. Never a canary, never
// another protection domain's region, never a region without the right.
void session::check_memory(bool may_change) {
    const std::span<std::byte> now = _b.buffer();
    if (std::memcmp(now.data(), _snapshot.data(), now.size()) == 0) {
        return;
    }
    for (std::size_t i = 0; i < now.size(); ++i) {
        if (now[i] != _snapshot[i] && !(may_change && _allowed[i] != 0)) {
            std::fprintf(stderr, "buffer byte %zu (page %zu) changed\n", i, i / page_bytes);
            require(false, "the engine writes only inside registered memory, at R_Key-checked addresses");
        }
    }
    std::memcpy(_snapshot.data(), now.data(), now.size());
}

void session::check_sent() {
    bool nak_seen = false;
    _acks_sent = _read_responses_sent = 0;
    while (sr::frame* f = _b.outside->receive(_now)) {
        _b.outside->materialize(f);
        proto::decoded d;
        require(proto::decode_into(f->data(), d, f->sealed ? proto::icrc_check::verify : proto::icrc_check::skip)
                    .has_value(),
                "what the queue pair sends is a RoCEv2 packet");
        if (d.bth.op == opcode::acknowledge && proto::kind_of(d.bth.syndrome) == proto::ack_kind::nak &&
            static_cast<std::int64_t>(d.bth.psn) == _nak_for) {
            // a refusal's code: invalid request, remote access or remote operational error (IB spec vol. 1 9.7; rxe's RESPST_ERR_* NAKs)
            const std::uint8_t code = proto::value_of(d.bth.syndrome);
            require(code >= 1 && code <= 3, "a refused request's NAK says why: invalid request, access or operation");
            // IB spec C9-88 (rxe check_rkey): a zero-length RDMA operation's R_Key and VA are not checked
            require(!_zero_length_refused || code != static_cast<std::uint8_t>(proto::nak_code::remote_access_error),
                    "a zero-length WRITE or READ is not refused for its R_Key");
            nak_seen = true;
        }
        check_emitted(d);
        _b.outside->release(f);
    }
    // a request the responder refuses is answered with a NAK naming it (IB spec vol. 1 9.7; rxe send_ack on error)
    require(_nak_for < 0 || nak_seen || _local_failure, "a refused request is NAKed");
}

void session::check_emitted(const proto::decoded& d) {
    require(d.net.src_gid == _ours && d.net.dst_gid == _peer && d.net.dst_mac == bench::peer_mac &&
                d.bth.dest_qp == peer_qpn,
            "the queue pair sends on its path only");
    const std::uint32_t psn = d.bth.psn;
    const opcode op = d.bth.op;
    if (op == opcode::acknowledge) {
        ++_acks_sent;
        if (proto::kind_of(d.bth.syndrome) == proto::ack_kind::ack) {
            // coalesced: it acknowledges everything executed, up to the PSN before the expected one
            require(psn_add(psn, 1) == _epsn, "an ACK names the PSN before the expected PSN");
        } else {
            const bool expected = std::ranges::find(_nak_psns, psn) != _nak_psns.end();
            // a READ whose memory failed while it was answered: remote access error at the response's PSN
            const bool read_failed = proto::value_of(d.bth.syndrome) ==
                                         static_cast<std::uint8_t>(proto::nak_code::remote_access_error) &&
                                     std::ranges::any_of(_reads, [&](const read_asked& r) {
                                         return psn_diff(psn, r.first_psn) >= 0 &&
                                                psn_diff(psn, psn_add(r.first_psn, r.packets)) < 0;
                                     });
            require(expected || read_failed, "a NAK names the PSN the responder expected");
        }
        _nak_psns = {_epsn};
        return;
    }
    if (op >= opcode::read_response_first && op <= opcode::read_response_only) {
        ++_read_responses_sent;
        check_read_response(d);
        return;
    }
    // the requester's opcodes (rc_requester.cpp): no immediate, invalidate or atomic
    const bool request = op <= opcode::send_last || op == opcode::send_only ||
                         (op >= opcode::write_first && op <= opcode::write_last) || op == opcode::write_only ||
                         op == opcode::read_request;
    require(request, "the queue pair sends only SEND, WRITE and READ requests, ACKs, NAKs and READ responses");
    require(_qp.state() == sr::qp_state::rts || _qp.state() == sr::qp_state::error, "requests go out in RTS only");
    const std::uint32_t end =
        op == opcode::read_request ? psn_add(psn, sr::packets_of(d.bth.dma_length, _c.mtu)) : psn_add(psn, 1);
    require(psn_diff(psn, _c.sq_psn) >= 0 && psn_diff(end, _c.sq_psn) <= static_cast<std::int64_t>(_packets_posted),
            "a request takes PSNs from sq_psn on, one per packet of the messages posted");
    require(d.payload.size() <= _c.mtu, "a request packet carries an MTU at most");
    _last_request = psn;
    if (psn_diff(end, _sent_end) > 0) {
        _sent_end = end;
    }
}

// A READ response carries the bytes at the place a READ that passed the checks asked for, at
// its PSN's offset (rxe read_reply): never bytes the R_Key does not grant.
void session::check_read_response(const proto::decoded& d) {
    const std::uint32_t psn = d.bth.psn;
    for (auto it = _reads.rbegin(); it != _reads.rend(); ++it) {
        const read_asked& r = *it;
        if (psn_diff(psn, r.first_psn) < 0 || psn_diff(psn, psn_add(r.first_psn, r.packets)) >= 0) {
            continue;
        }
        const std::uint64_t offset = std::uint64_t(psn_diff(psn, r.first_psn)) * _c.mtu;
        const std::uint64_t len = std::min<std::uint64_t>(_c.mtu, r.bytes - std::min(offset, r.bytes));
        if (d.payload.size() != len) {
            continue;
        }
        const area* a = area_of(r.key);
        bool same = true;
        for (std::size_t i = 0; i < len && same; ++i) {
            const auto at = a == nullptr ? std::nullopt : host_of(*a, r.va + offset + i);
            same = at.has_value() && _b.host[*at] == d.payload[i];
        }
        if (same) {
            return;
        }
    }
    std::fprintf(stderr, "READ response PSN %u, %zu bytes\n", psn, d.payload.size());
    require(false, "a READ response carries the bytes a checked READ asked for");
}

// Completions of each ring come once per entry, in the order of its entries (sim/roce/work.hpp, rc_qp.hpp); a
// send succeeds only once the peer acknowledged its PSNs.
void session::check_completions() {
    sr::completion c;
    while (_qp.take(sr::completion_side::send, c)) {
        require(!_sends.empty() && c.index == _sends.front().wr.index && c.side == sr::completion_side::send,
                "a send completes once, in the order posted");
        const sr::send_request& wr = _sends.front().wr;
        if (c.status == sr::completion_status::success) {
            ++_successes;
            require(c.byte_len == wr.length() && c.op == wr.op, "a successful send completes with its length and op");
            require(_successes <= _acked, "a send succeeds only once the peer acknowledged its PSNs");
        }
        if (is_local_error(c.status)) {
            _local_failure = true;
        }
        _sends.pop_front();
    }
    while (_qp.take(sr::completion_side::receive, c)) {
        require(!_receives.empty() && c.index == _receives.front().index && c.side == sr::completion_side::receive,
                "a receive completes once, in the order posted");
        if (c.status == sr::completion_status::success) {
            require(c.byte_len <= _receives.front().capacity(), "a message fits the receive it completes");
        }
        _receives.pop_front();
    }
}

}  // namespace rig::fuzz::roce
