// rc_qp, responder side (IB spec vol. 1 9.7; Linux rxe_resp.c): PSN and opcode-sequence checks, executing SEND,
// RDMA WRITE and RDMA READ requests, READ responses, coalesced ACKs, NAKs and RNR NAKs.
#include <algorithm>

#include "sim/roce/rc_qp.hpp"

namespace rig::sim::roce {

namespace proto = rig::roce;
using proto::opcode;
using proto::psn_add;
using proto::psn_diff;

namespace {

// The most a RETH may ask for (IBA C9-94; rxe_resp.c rxe_resp_check_length).
constexpr std::uint32_t max_dma_length = std::uint32_t{1} << 31;

struct request_kind {
    enum { send, write, read, other } what;
    bool first;
    bool last;
    bool immediate = false;   // the packet carries ImmDt: the message consumes a receive
};

request_kind classify(opcode op) noexcept {
    switch (op) {
    case opcode::send_first: return {request_kind::send, true, false};
    case opcode::send_middle: return {request_kind::send, false, false};
    case opcode::send_last:
    case opcode::send_last_inv: return {request_kind::send, false, true};
    case opcode::send_last_imm: return {request_kind::send, false, true, true};
    case opcode::send_only:
    case opcode::send_only_inv: return {request_kind::send, true, true};
    case opcode::send_only_imm: return {request_kind::send, true, true, true};
    case opcode::write_first: return {request_kind::write, true, false};
    case opcode::write_middle: return {request_kind::write, false, false};
    case opcode::write_last: return {request_kind::write, false, true};
    case opcode::write_last_imm: return {request_kind::write, false, true, true};
    case opcode::write_only: return {request_kind::write, true, true};
    case opcode::write_only_imm: return {request_kind::write, true, true, true};
    case opcode::read_request: return {request_kind::read, true, true};
    default: return {request_kind::other, true, true};   // atomics: not taken
    }
}

}  // namespace

void rc_qp::on_request(const proto::decoded& packet) noexcept {
    const std::uint32_t psn = packet.bth.psn;
    const std::int32_t d = psn_diff(psn, _epsn);
    if (d < 0) {
        // A duplicate (rxe: duplicate_request): its ACK was lost. Not executed again, except a READ, whose
        // responses are sent again from the PSN it names (the requester may ask for a tail).
        ++_counters.duplicates_received;
        if (packet.bth.op == opcode::read_request) {
            // Go-back-N: the requester asks again for everything from `psn` on, in order. The
            // answers queued for later READs go (they will be asked for again behind this one;
            // left in place, a long one restarted by each retry would starve this one), and a
            // READ still being answered goes back to the PSN asked for.
            while (_reads_tail != _reads_head &&
                   psn_diff(_reads[(_reads_tail - 1) % _reads.size()].first_psn, psn) > 0) {
                --_reads_tail;
            }
            if (_reads_tail != _reads_head) {
                read_context& c = _reads[(_reads_tail - 1) % _reads.size()];
                if (psn_diff(psn, c.end_psn) < 0) {
                    c.psn = psn;
                    return;
                }
            }
            // Answered anew only as the READ it repeats was: a queue pair without the remote-read
            // right executed none, so a "duplicate" is forged or stale and is dropped (Linux rxe's
            // duplicate_request answers only a READ it holds a resource for). Without this, a READ
            // sent with a PSN just below the expected one read what the queue pair refuses to let read.
            if ((_remote_rights & access_remote_read) != 0 && packet.bth.dma_length <= max_dma_length &&
                (packet.bth.dma_length == 0 ||
                 _mem.check(packet.bth.rkey, _config.pd, packet.bth.va, packet.bth.dma_length, access_remote_read) ==
                     mem_status::ok)) {
                push_read(psn, packet.bth.va, packet.bth.rkey, packet.bth.dma_length);
            }
        } else {
            _ack_pending = true;
        }
        return;
    }
    if (d > 0) {
        // Ahead: packets were lost. One NAK, then silence until the expected PSN (rxe: check_psn).
        ++_counters.out_of_sequence;
        if (!_nak_silent) {
            nak(proto::nak_code::psn_sequence_error, _epsn);
            ++_counters.seq_naks_sent;
        }
        return;
    }
    _nak_silent = false;
    if (_nak_pending && _nak_syndrome == proto::syndrome(proto::ack_kind::nak, 0)) {
        _nak_pending = false;   // the PSN it asked for came before it left: stale, an ACK will do
        _ack_pending = true;
    }
    execute(packet);
}

void rc_qp::execute(const proto::decoded& packet) noexcept {
    const std::uint32_t psn = packet.bth.psn;
    const request_kind k = classify(packet.bth.op);
    const std::size_t size = packet.payload.size();
    // Opcode sequence (rxe: check_op_seq): a MIDDLE or LAST continues the message in progress, a FIRST
    // or ONLY starts one; anything else, or an operation the queue pair does not take (its
    // remote rights, or atomics), is an invalid request.
    const inbound continuing = k.what == request_kind::send ? inbound::send
                               : k.what == request_kind::write ? inbound::write : inbound::none;
    const bool refused = (k.what == request_kind::write && (_remote_rights & access_remote_write) == 0) ||
                         (k.what == request_kind::read && (_remote_rights & access_remote_read) == 0);
    if (k.what == request_kind::other || refused || (k.first ? _inbound != inbound::none : _inbound != continuing)) {
        responder_fails(proto::nak_code::invalid_request, psn, completion_status::success);
        return;
    }
    // Length (rxe: check_length): FIRST and MIDDLE carry exactly an MTU, LAST and ONLY at most one.
    if (size > _path.mtu || (!k.last && size != _path.mtu)) {
        responder_fails(proto::nak_code::invalid_request, psn, completion_status::success);
        return;
    }
    // DMA length (IBA C9-94; rxe_resp.c rxe_resp_check_length): a RETH asks for at most 2^31
    // bytes, checked before its R_Key. Found by test/fuzz/roce.
    if (k.first && k.what != request_kind::send && packet.bth.dma_length > max_dma_length) {
        responder_fails(proto::nak_code::invalid_request, psn, completion_status::success);
        return;
    }
    switch (k.what) {
    case request_kind::send: {
        if (k.first) {
            if (!receive_posted()) {
                rnr_nak(psn);
                return;
            }
            _inbound = inbound::send;
            _in_offset = 0;
        }
        receive_entry& r = rq(_rq_done);
        if (r.sge_count > _config.rq_max_sge) {
            responder_fails(proto::nak_code::remote_operational_error, psn, completion_status::local_qp_operation);
            return;
        }
        if (_in_offset + size > r.capacity) {
            // longer than the receive: local length error here, invalid request there (rxe: RESPST_ERR_LENGTH)
            responder_fails(proto::nak_code::invalid_request, psn, completion_status::local_length);
            return;
        }
        if (scatter(rq_sges(_rq_done), _in_offset, packet.payload) != mem_status::ok) {
            responder_fails(proto::nak_code::remote_operational_error, psn, completion_status::local_protection);
            return;
        }
        _in_offset += size;
        if (k.last) {
            complete_receive(r, completion_status::success, static_cast<std::uint32_t>(_in_offset), work_op::send,
                             k.immediate ? std::optional(packet.bth.immediate) : std::nullopt);
            ++_rq_done;
            _inbound = inbound::none;
            _msn = psn_add(_msn, 1);
        }
        break;
    }
    case request_kind::write: {
        // A WRITE with immediate consumes a receive at its last packet, looked for before its
        // R_Key and its bytes (rxe_resp.c: check_resource before check_rkey): none posted is an
        // RNR NAK of that packet, which the requester sends again after the timer.
        if (k.immediate && !receive_posted()) {
            rnr_nak(psn);
            return;
        }
        if (k.first) {
            // The whole RETH range is checked before the first byte moves (rxe: check_rkey). An
            // ONLY packet that carries that whole range is checked by its write below, which
            // moves nothing unless the same checks pass and fails with the same NAK. A zero-length
            // WRITE moves nothing and needs no valid R_Key or VA (IB spec C9-88; rxe check_rkey).
            const bool write_checks = k.last && size != 0 && size == packet.bth.dma_length;
            if (!write_checks && packet.bth.dma_length != 0 &&
                _mem.check(packet.bth.rkey, _config.pd, packet.bth.va, packet.bth.dma_length, access_remote_write) !=
                    mem_status::ok) {
                responder_fails(proto::nak_code::remote_access_error, psn, completion_status::success);
                return;
            }
            _inbound = inbound::write;
            _in_va = packet.bth.va;
            _in_rkey = packet.bth.rkey;
            _in_length = packet.bth.dma_length;
            _in_offset = 0;
        }
        if (_in_offset + size > _in_length || (k.last && _in_offset + size != _in_length)) {
            responder_fails(proto::nak_code::invalid_request, psn, completion_status::success);
            return;
        }
        if (size > 0 && !write_payload(packet.payload)) {
            responder_fails(proto::nak_code::remote_access_error, psn, completion_status::success);
            return;
        }
        _in_offset += size;
        if (k.last) {
            if (k.immediate) {
                complete_receive(rq(_rq_done), completion_status::success, static_cast<std::uint32_t>(_in_length),
                                 work_op::write, packet.bth.immediate);
                ++_rq_done;
            }
            _inbound = inbound::none;
            _msn = psn_add(_msn, 1);
        }
        break;
    }
    case request_kind::read: {
        // as a WRITE: a zero-length READ reads nothing, its R_Key and VA unchecked (C9-88)
        if (packet.bth.dma_length != 0 &&
            _mem.check(packet.bth.rkey, _config.pd, packet.bth.va, packet.bth.dma_length, access_remote_read) !=
            mem_status::ok) {
            responder_fails(proto::nak_code::remote_access_error, psn, completion_status::success);
            return;
        }
        if (!push_read(psn, packet.bth.va, packet.bth.rkey, packet.bth.dma_length)) {
            // more READs than max_dest_rd_atomic at once
            responder_fails(proto::nak_code::invalid_request, psn, completion_status::success);
            return;
        }
        _msn = psn_add(_msn, 1);
        _epsn = psn_add(psn, packets_of(packet.bth.dma_length, _path.mtu));
        return;   // the responses acknowledge it
    }
    case request_kind::other:
        return;
    }
    _epsn = psn_add(psn, 1);
    if (packet.bth.ack_req) {
        _ack_pending = true;
    }
}

bool rc_qp::push_read(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::uint32_t bytes) noexcept {
    if (_reads_tail - _reads_head >= _path.max_dest_rd_atomic) {
        return false;
    }
    _reads[_reads_tail % _reads.size()] = {psn, psn, psn_add(psn, packets_of(bytes, _path.mtu)), va, rkey, bytes};
    ++_reads_tail;
    return true;
}

// Receiver not ready (IB spec 9.7.5.2.8): the requester waits the timer and sends `psn` again.
void rc_qp::rnr_nak(std::uint32_t psn) noexcept {
    _nak_pending = true;
    _nak_syndrome = proto::syndrome(proto::ack_kind::rnr_nak, _path.min_rnr_timer);
    _nak_psn = psn;
    _nak_silent = true;
    ++_counters.rnr_naks_sent;
}

void rc_qp::nak(proto::nak_code code, std::uint32_t psn) noexcept {
    _nak_pending = true;
    _nak_syndrome = proto::syndrome(proto::ack_kind::nak, static_cast<std::uint8_t>(code));
    _nak_psn = psn;
    _nak_silent = true;
}

// The responder of an RC queue pair fails with the requester for these : the NAK goes
// out, the receive in progress (if the failure is its) completes with its error, the rest flush.
void rc_qp::responder_fails(proto::nak_code code, std::uint32_t psn, completion_status receive_status) noexcept {
    if (receive_status != completion_status::success && _inbound == inbound::send && _rq_done != _rq_post) {
        complete_receive(rq(_rq_done), receive_status, 0);
        ++_rq_done;
    }
    nak(code, psn);
    _responder_failure = code;
    enter_error();
}

// READ responses in order, then the one pending ACK or NAK: an ACK must not overtake the
// responses of a READ before it, or the requester would take it for their loss.
bool rc_qp::send_responses() noexcept {
    bool did = false;
    for (int n = 0; n < burst && _reads_head != _reads_tail; ++n) {
        read_context& c = _reads[_reads_head % _reads.size()];
        const auto seg = static_cast<std::uint32_t>(psn_diff(c.psn, c.first_psn));
        const std::uint32_t packets = static_cast<std::uint32_t>(psn_diff(c.end_psn, c.first_psn));
        const std::uint64_t offset = std::uint64_t{seg} * _path.mtu;
        const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(_path.mtu, c.bytes - offset));
        proto::transport t;
        t.op = packets == 1 ? opcode::read_response_only
               : seg == 0 ? opcode::read_response_first
               : seg + 1 == packets ? opcode::read_response_last
                                    : opcode::read_response_middle;
        t.dest_qp = _path.dest_qpn;
        t.psn = c.psn;
        t.syndrome = proto::syndrome(proto::ack_kind::ack, proto::credits_invalid);
        t.msn = _msn;
        // The payload stays in host memory, by reference, for the requester to copy (wire.hpp);
        // else it goes from host memory straight into the frame.
        const std::byte* ref = nullptr;
        mem_status st = len == 0 ? mem_status::ok
                                 : _mem.reference(c.rkey, _config.pd, c.va + offset, len, access_remote_read,
                                                  _port.guard(), ref);
        frame* f = nullptr;
        if (ref != nullptr) {
            f = start_frame(t, ref, len);
        } else {
            std::span<std::byte> payload;
            f = start_frame(t, len, payload);
            if (f != nullptr && st == mem_status::ok && len > 0) {
                st = _mem.read(c.rkey, _config.pd, c.va + offset, payload, access_remote_read);
            }
        }
        if (f == nullptr) {
            return did;
        }
        if (st != mem_status::ok) {
            // deregistered, or unmapped by the client, since the request was checked
            _port.release(f);
            nak(proto::nak_code::remote_access_error, c.psn);
            enter_error();
            break;
        }
        send_frame(f);
        did = true;
        c.psn = psn_add(c.psn, 1);
        if (c.psn == c.end_psn) {
            ++_reads_head;
        }
    }
    if (_reads_head != _reads_tail) {
        return did;
    }
    if (_nak_pending || _ack_pending) {
        proto::transport t;
        t.op = opcode::acknowledge;
        t.dest_qp = _path.dest_qpn;
        t.msn = _msn;
        if (_nak_pending) {
            t.psn = _nak_psn;
            t.syndrome = _nak_syndrome;
        } else {
            t.psn = psn_add(_epsn, proto::psn_mask);   // _epsn - 1: everything executed so far
            t.syndrome = proto::syndrome(proto::ack_kind::ack, proto::credits_invalid);
        }
        if (send_empty(t)) {
            _nak_pending = _ack_pending = false;   // a NAK acknowledges every PSN before it too
            did = true;
        }
    }
    return did;
}

}  // namespace rig::sim::roce
