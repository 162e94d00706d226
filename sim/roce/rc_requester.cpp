// rc_qp, requester side (IB spec vol. 1 9.7; Linux rxe_req.c, rxe_comp.c): sending request packets, ACK/NAK and READ
// response processing, the ack timer, RNR waits and go-back-N retransmission.
#include <algorithm>

#include "sim/roce/rc_qp.hpp"
#include "sim/roce/engine.hpp"   // rc_qp::timer_armed: engine::arm

namespace rig::sim::roce {

namespace proto = rig::roce;
using proto::psn_add;
using proto::psn_diff;

namespace {

// FIRST/MIDDLE/LAST/ONLY of a message kind (spec table 38: the four are consecutive codes).
proto::opcode segment_opcode(proto::opcode first, std::uint32_t seg, std::uint32_t packets) noexcept {
    const auto base = static_cast<std::uint8_t>(first);
    if (packets == 1) {
        return first == proto::opcode::send_first ? proto::opcode::send_only
               : first == proto::opcode::write_first ? proto::opcode::write_only
                                                     : proto::opcode::read_response_only;
    }
    const std::uint8_t step = seg == 0 ? 0 : seg + 1 == packets ? 2 : 1;
    return static_cast<proto::opcode>(base + step);
}

// The LAST or ONLY opcode of a SEND or WRITE as its "with Immediate" form (spec table 38).
proto::opcode with_immediate(proto::opcode last_or_only) noexcept {
    switch (last_or_only) {
    case proto::opcode::send_last: return proto::opcode::send_last_imm;
    case proto::opcode::send_only: return proto::opcode::send_only_imm;
    case proto::opcode::write_last: return proto::opcode::write_last_imm;
    case proto::opcode::write_only: return proto::opcode::write_only_imm;
    default: return last_or_only;
    }
}

}  // namespace

// The entry holding `psn`, searched from the oldest unacknowledged; _sq_started when none.
std::uint32_t rc_qp::entry_of(std::uint32_t psn) noexcept {
    for (std::uint32_t i = _una_entry; i != _sq_started; ++i) {
        const send_entry& e = sq(i);
        if (psn_diff(psn, e.first_psn) >= 0 && psn_diff(psn, psn_add(e.first_psn, e.packets)) < 0) {
            return i;
        }
    }
    return _sq_started;
}

// Gives the entry `psn` lies in its PSNs: the next one past the last started. A request the NIC
// cannot run (found at post, or its local scatter list refused here) stops the send queue; it
// fails when every entry before it has completed.
bool rc_qp::start_next_entry() noexcept {
    prefetch_followers();
    send_entry& e = sq(_sq_started);
    // A one-packet SEND or WRITE from one non-empty scatter entry is checked by its gather
    // (send_request_packet), which reads that entry whole with the same key, range and right
    // and fails it the same way, local protection, before any of its bytes leave: checking it
    // here too would look the region up twice per small message.
    const bool gather_checks = e.op != work_op::read && e.sge_count == 1 && sges(e)[0].length != 0 &&
                               e.bytes <= _path.mtu;
    if (e.local_error == completion_status::success && !e.is_inline && !gather_checks) {
        const std::uint8_t needed = e.op == work_op::read ? access_local_write : access_local_read;
        for (const sge& s : sges(e)) {
            if (_mem.check(s.key, _config.pd, s.va, s.length, needed) != mem_status::ok) {
                e.local_error = completion_status::local_protection;
                break;
            }
        }
    }
    if (e.local_error != completion_status::success) {
        retire_completed();
        return false;
    }
    if (e.op == work_op::read && _reads_outstanding >= _send.max_rd_atomic) {
        return false;
    }
    e.first_psn = _next_psn;
    e.packets = packets_of(e.bytes, _path.mtu);
    _next_psn = psn_add(_next_psn, e.packets);
    if (e.op == work_op::read) {
        ++_reads_outstanding;
    }
    ++_sq_started;
    return true;
}

bool rc_qp::send_request_packet(clock::time_point now) noexcept {
    send_entry& e = sq(_tx_entry);
    const auto seg = static_cast<std::uint32_t>(psn_diff(_tx_psn, e.first_psn));
    const std::uint64_t offset = std::uint64_t{seg} * _path.mtu;
    proto::transport t;
    t.dest_qp = _path.dest_qpn;
    t.psn = _tx_psn;
    std::uint32_t next_psn;
    frame* f = nullptr;
    if (e.op == work_op::read) {
        // one request for the rest of the READ; its responses take the PSNs up to the end
        t.op = proto::opcode::read_request;
        t.va = e.remote_va + offset;
        t.rkey = e.rkey;
        t.dma_length = static_cast<std::uint32_t>(e.bytes - std::min(offset, e.bytes));
        t.ack_req = true;
        next_psn = psn_add(e.first_psn, e.packets);
        std::span<std::byte> none;
        if ((f = start_frame(t, 0, none)) == nullptr) {
            return false;
        }
    } else {
        const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(_path.mtu, e.bytes - offset));
        const bool write = e.op == work_op::write;
        t.op = segment_opcode(write ? proto::opcode::write_first : proto::opcode::send_first, seg, e.packets);
        const bool last = seg + 1 == e.packets;
        if (last && e.with_immediate) {
            t.op = with_immediate(t.op);
            t.immediate = e.immediate;
        }
        if (write && seg == 0) {
            t.va = e.remote_va;
            t.rkey = e.rkey;
            t.dma_length = static_cast<std::uint32_t>(e.bytes);
        }
        t.ack_req = last || seg % 16 == 15 || psn_diff(psn_add(_tx_psn, 1), _una) >= static_cast<std::int32_t>(_send.max_inflight);
        // The payload stays in host memory, by reference: the receiver copies it from there
        // (wire.hpp). Else (inline, pieces of several scatter entries, a window without fd, a
        // refused access) it goes from host memory straight into the frame.
        if (const std::byte* ref = reference(e, offset, len); ref != nullptr) {
            if ((f = start_frame(t, ref, len)) == nullptr) {
                return false;
            }
        } else if (std::span<std::byte> payload; (f = start_frame(t, len, payload)) == nullptr) {
            return false;
        } else if (gather(e, offset, payload) != mem_status::ok) {
            _port.release(f);
            e.local_error = completion_status::local_protection;   // e.g. deregistered after start
            retire_completed();
            return false;
        }
        next_psn = psn_add(_tx_psn, 1);
    }
    send_frame(f);
    if (psn_diff(_tx_psn, _sent_end) < 0) {
        ++_counters.retransmitted;
    }
    _tx_psn = next_psn;
    if (_tx_psn == psn_add(e.first_psn, e.packets)) {
        ++_tx_entry;
    }
    if (psn_diff(_tx_psn, _sent_end) > 0) {
        _sent_end = _tx_psn;
    }
    if (!_timer_armed && _ack_timeout.count() > 0) {
        _timer_armed = true;
        _deadline = now + _ack_timeout;
        timer_armed(_deadline);
    }
    return true;
}

bool rc_qp::send_requests(clock::time_point now) noexcept {
    if (_rnr_waiting) {
        if (now < _rnr_until) {
            return false;
        }
        _rnr_waiting = false;   // the RNR timer ran out: send again from the NAKed PSN
        go_back();
    }
    bool did = false;
    for (int n = 0; n < burst && _state == qp_state::rts; ++n) {
        if (_tx_entry == _sq_started && (_sq_started == _sq_post || !start_next_entry())) {
            break;
        }
        if (_state != qp_state::rts || sq(_tx_entry).local_error != completion_status::success ||
            psn_diff(_tx_psn, _una) >= static_cast<std::int32_t>(_send.max_inflight) || !send_request_packet(now)) {
            break;
        }
        did = true;
    }
    return did;
}

clock::time_point rc_qp::next_timer() const noexcept {
    auto next = clock::time_point::max();
    if (_timer_armed) {
        next = _deadline;
    }
    if (_rnr_waiting) {
        next = std::min(next, _rnr_until);
    }
    return next;
}

void rc_qp::timer_armed(clock::time_point due) noexcept {
    if (_engine != nullptr) {
        _engine->arm(*this, due);
    }
}

bool rc_qp::requester_timers(clock::time_point now) noexcept {
    if (!_timer_armed || now < _deadline) {
        return false;
    }
    _timer_armed = false;
    if (_una == _sent_end) {
        return false;   // nothing outstanding
    }
    ++_counters.timeouts;
    if (_retry_left == 0) {
        fail_entry_at(_una_entry, completion_status::retry_exceeded);
        return true;
    }
    --_retry_left;
    go_back();
    return true;
}

// Go-back-N: send again from the oldest unacknowledged PSN. The next packet sent
// arms the timer again. With a retransmit_locator, the family's NIC must first find the entry
// holding that PSN by its own means; when it cannot, the entry fails and the queue pair with it.
bool rc_qp::go_back() noexcept {
    if (_locator != nullptr && _state == qp_state::rts && _una_entry != _sq_started) {
        const send_entry& e = sq(_una_entry);
        const completion_status s = _locator->locate({e.index, e.op, e.with_immediate, e.first_psn, e.packets, _una});
        if (s != completion_status::success) {
            retire_completed();   // the entries before it were acknowledged
            if (_state == qp_state::rts) {
                fail_entry_at(_una_entry, s);
            }
            return false;
        }
    }
    _tx_entry = _una_entry;
    _tx_psn = _una;
    _timer_armed = false;
    return true;
}

// Every PSN before `psn` is acknowledged (an ACK through psn - 1, a NAK of psn). An
// acknowledgement past a READ whose responses have not all come means they were lost: go back
// to the READ (an implicit NAK), once per oldest-unacknowledged PSN.
void rc_qp::acknowledge_before(std::uint32_t psn, clock::time_point now) noexcept {
    bool moved = false;
    while (psn_diff(psn, _una) > 0 && _una_entry != _sq_started) {
        const send_entry& e = sq(_una_entry);
        if (e.op == work_op::read) {
            if (!_gap_rewound) {
                _gap_rewound = true;
                go_back();
            }
            break;
        }
        const std::uint32_t end = psn_add(e.first_psn, e.packets);
        if (psn_diff(psn, end) >= 0) {
            _una = end;
            ++_una_entry;
        } else {
            _una = psn;
        }
        moved = true;
    }
    if (moved && _state == qp_state::rts) {
        on_progress(now);
    }
}

void rc_qp::on_progress(clock::time_point now) noexcept {
    _gap_rewound = false;
    _retry_left = _send.retry_count;
    _rnr_left = _send.rnr_retry;
    if (psn_diff(_una, _tx_psn) > 0) {   // acknowledged past what a go-back would resend
        _tx_psn = _una;
        _tx_entry = _una_entry;
    }
    if (_una == _sent_end || _ack_timeout.count() == 0) {
        _timer_armed = false;
    } else {
        _timer_armed = true;
        _deadline = now + _ack_timeout;
        timer_armed(_deadline);
    }
    retire_completed();
}

// Entries before the one holding the oldest unacknowledged PSN are done: complete them in
// order. An entry the NIC could not run fails once it is the oldest.
void rc_qp::retire_completed() noexcept {
    for (; _sq_done != _una_entry; ++_sq_done) {
        const send_entry& e = sq(_sq_done);
        if (e.op == work_op::read) {
            --_reads_outstanding;
        }
        complete_send(e, completion_status::success);
    }
    if (_sq_done != _sq_post && sq(_sq_done).local_error != completion_status::success &&
        (_sq_done == _sq_started || _sq_done == _tx_entry)) {
        fail_entry_at(_sq_done, sq(_sq_done).local_error);
    }
}

// The entry fails with `status`; entries before it without completion are flushed ahead of it
// (completions keep the order of the entries), then the queue pair fails.
void rc_qp::fail_entry_at(std::uint32_t entry, completion_status status) noexcept {
    for (; _sq_done != entry && _sq_done != _sq_post; ++_sq_done) {
        complete_send(sq(_sq_done), completion_status::flushed);
    }
    if (_sq_done != _sq_post) {
        complete_send(sq(_sq_done), status);
        ++_sq_done;
    }
    enter_error();
}

void rc_qp::on_response(const proto::decoded& packet, clock::time_point now) noexcept {
    if (_state != qp_state::rts) {
        return;
    }
    const std::uint32_t psn = packet.bth.psn;
    if (psn_diff(psn, _sent_end) >= 0) {
        return;   // names a PSN never sent: a stale or stray packet
    }
    if (packet.bth.op == proto::opcode::acknowledge) {
        const std::uint8_t syn = packet.bth.syndrome;
        switch (proto::kind_of(syn)) {
        case proto::ack_kind::ack:
            acknowledge_before(psn_add(psn, 1), now);
            return;
        case proto::ack_kind::rnr_nak:
            if (psn_diff(psn, _una) < 0 || (_rnr_waiting && psn == _una)) {
                return;   // stale, or a copy of the NAK being waited out
            }
            ++_counters.rnr_naks_received;
            acknowledge_before(psn, now);
            if (_state != qp_state::rts || _una != psn) {
                return;
            }
            if (_send.rnr_retry != 7) {   // 7: retry without end
                if (_rnr_left == 0) {
                    fail_entry_at(_una_entry, completion_status::rnr_retry_exceeded);
                    return;
                }
                --_rnr_left;
            }
            _rnr_waiting = true;
            _rnr_until = now + rnr_timer(proto::value_of(syn));
            _timer_armed = false;
            timer_armed(_rnr_until);
            return;
        case proto::ack_kind::nak:
            break;
        case proto::ack_kind::reserved:
            return;
        }
        if (psn_diff(psn, _una) < 0) {
            return;
        }
        acknowledge_before(psn, now);
        if (_state != qp_state::rts) {
            return;   // a retransmission that could not be located failed the queue pair
        }
        switch (static_cast<proto::nak_code>(proto::value_of(syn))) {
        case proto::nak_code::psn_sequence_error:
            ++_counters.seq_naks_received;
            if (_una == psn) {
                go_back();
            }
            return;
        case proto::nak_code::remote_access_error:
            fail_entry_at(entry_of(psn), completion_status::remote_access);
            return;
        case proto::nak_code::remote_operational_error:
            fail_entry_at(entry_of(psn), completion_status::remote_operation);
            return;
        default:   // invalid request, invalid RD request, reserved codes
            fail_entry_at(entry_of(psn), completion_status::remote_invalid_request);
            return;
        }
    }
    if (packet.bth.op == proto::opcode::atomic_acknowledge || psn_diff(psn, _una) < 0) {
        return;   // no atomics are sent; a READ response before _una is a duplicate
    }
    // A READ response: it acknowledges every PSN before it (an implicit ACK).
    const std::uint32_t entry = entry_of(psn);
    if (entry == _sq_started || sq(entry).op != work_op::read) {
        return;
    }
    acknowledge_before(psn, now);
    if (_state != qp_state::rts) {
        return;
    }
    if (_una != psn) {
        // a gap: a response (or an earlier READ's) was lost; ask again from _una, once
        if (!_gap_rewound) {
            _gap_rewound = true;
            go_back();
        }
        return;
    }
    send_entry& e = sq(entry);
    const auto seg = static_cast<std::uint32_t>(psn_diff(psn, e.first_psn));
    const std::uint64_t offset = std::uint64_t{seg} * _path.mtu;
    const std::uint64_t len = std::min<std::uint64_t>(_path.mtu, e.bytes - offset);
    // A READ asked again from the middle is answered as a new READ (FIRST or ONLY at the PSN it
    // names, as rxe's responder does), so the opcode tells only whether this is the READ's last packet.
    const bool last = seg + 1 == e.packets;
    const proto::opcode op = packet.bth.op;
    const bool ends = op == proto::opcode::read_response_last || op == proto::opcode::read_response_only;
    if (last != ends || packet.payload.size() != len) {
        return;   // not the response this PSN must carry: dropped, the timer recovers
    }
    if (scatter(sges(e), offset, packet.payload) !=
        mem_status::ok) {
        fail_entry_at(entry, completion_status::local_protection);
        return;
    }
    _una = psn_add(psn, 1);
    if (_una == psn_add(e.first_psn, e.packets)) {
        ++_una_entry;
    }
    on_progress(now);
}

}  // namespace rig::sim::roce
