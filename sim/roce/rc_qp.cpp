// rc_qp: construction, state transitions, posting, completions, and the pieces both the
// requester (rc_requester.cpp) and the responder (rc_responder.cpp) use.
#include "sim/roce/rc_qp.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "sim/roce/engine.hpp"

namespace rig::sim::roce {

namespace proto = rig::roce;

std::string_view to_string(work_op op) noexcept {
    switch (op) {
    case work_op::send: return "SEND";
    case work_op::write: return "RDMA WRITE";
    case work_op::read: return "RDMA READ";
    }
    return "?";
}

std::string_view to_string(completion_status s) noexcept {
    switch (s) {
    case completion_status::success: return "success";
    case completion_status::local_length: return "local length error";
    case completion_status::local_qp_operation: return "local QP operation error";
    case completion_status::local_protection: return "local protection error";
    case completion_status::remote_access: return "remote access error";
    case completion_status::remote_invalid_request: return "remote invalid request error";
    case completion_status::remote_operation: return "remote operation error";
    case completion_status::retry_exceeded: return "transport retry counter exceeded";
    case completion_status::rnr_retry_exceeded: return "RNR retry counter exceeded";
    case completion_status::flushed: return "work request flushed";
    }
    return "?";
}

std::string_view to_string(qp_state s) noexcept {
    switch (s) {
    case qp_state::reset: return "RESET";
    case qp_state::init: return "INIT";
    case qp_state::rtr: return "RTR";
    case qp_state::rts: return "RTS";
    case qp_state::error: return "ERROR";
    }
    return "?";
}

std::uint64_t send_request::length() const noexcept {
    if (is_inline) {
        return inline_bytes;
    }
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < std::min<std::size_t>(sge_count, max_sge); ++i) {
        n += sg[i].length;
    }
    return n;
}

std::uint64_t receive_request::capacity() const noexcept {
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < std::min<std::size_t>(sge_count, max_sge); ++i) {
        n += sg[i].length;
    }
    return n;
}

std::chrono::nanoseconds ack_timeout(std::uint8_t code) noexcept {
    if (code == 0 || code > 31) {
        return std::chrono::nanoseconds{0};
    }
    return std::chrono::nanoseconds{std::int64_t{4096} << code};
}

std::chrono::nanoseconds rnr_timer(std::uint8_t code) noexcept {
    // IB RNR timer encoding, in units of 10 us (the values of Linux rxe's rnrnak_usec table)
    static constexpr std::uint32_t tens_of_us[32] = {
        65536, 1,   2,   3,   4,   6,    8,    12,   16,   24,   32,   48,   64,   96,    128,   192,
        256,   384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
    return std::chrono::microseconds{std::int64_t{10} * tens_of_us[code & 31]};
}

void rc_qp::schedule() noexcept {
    if (_engine != nullptr) {
        _engine->schedule(*this);
    }
}

bool rc_qp::receive_posted() noexcept {
    if (_rq_done == _rq_post && _host != nullptr) {
        _host->receive_wanted();
    }
    return _rq_done != _rq_post;
}

void rc_qp::completion_ring::push(const completion& c) noexcept {
    packed_completion& p = slots[tail & (slots.size() - 1)];
    p.counts = c.index | std::uint64_t{c.byte_len} << 32;
    p.rest = c.immediate | std::uint64_t{static_cast<std::uint8_t>(c.side)} << 32 |
             std::uint64_t{static_cast<std::uint8_t>(c.status)} << 40 |
             std::uint64_t{static_cast<std::uint8_t>(c.op)} << 48 | std::uint64_t{c.with_immediate} << 56;
    ++tail;
}

// Field by field into `out`: a completion built whole and copied would be the same narrow
// stores read back by a wide load (see packed_completion).
void rc_qp::completion_ring::pop(completion& out) noexcept {
    const packed_completion& p = slots[head & (slots.size() - 1)];
    const std::uint64_t counts = p.counts, rest = p.rest;
    ++head;
    out.index = static_cast<std::uint32_t>(counts);
    out.byte_len = static_cast<std::uint32_t>(counts >> 32);
    out.immediate = static_cast<std::uint32_t>(rest);
    out.side = static_cast<completion_side>(static_cast<std::uint8_t>(rest >> 32));
    out.status = static_cast<completion_status>(static_cast<std::uint8_t>(rest >> 40));
    out.op = static_cast<work_op>(static_cast<std::uint8_t>(rest >> 48));
    out.with_immediate = static_cast<std::uint8_t>(rest >> 56) != 0;
}

rc_qp::rc_qp(memory& mem, port& wire_port, const qp_config& config)
    : _mem(mem), _port(wire_port), _config(config) {
    auto pow2 = [](std::uint32_t n) { return n != 0 && (n & (n - 1)) == 0 && n <= (1u << 15); };
    if (!pow2(config.sq_size) || !pow2(config.rq_size)) {
        throw std::invalid_argument("roce::rc_qp: ring sizes must be powers of two up to 2^15 (sq " +
                                    std::to_string(config.sq_size) + ", rq " + std::to_string(config.rq_size) + ")");
    }
    if (config.rq_max_sge == 0 || config.rq_max_sge > max_sge) {
        throw std::invalid_argument("roce::rc_qp: " + std::to_string(config.rq_max_sge) +
                                    " scatter entries a receive (1 to " + std::to_string(max_sge) + ")");
    }
    if (config.qpn > proto::psn_mask) {
        throw std::invalid_argument("roce::rc_qp: qpn " + std::to_string(config.qpn) + " is wider than 24 bits");
    }
    _sq.resize(config.sq_size);
    _sq_payload.resize(payload_units(config));
    _rq.resize(config.rq_size);
    _rq_sg.resize(std::size_t{config.rq_size} * config.rq_max_sge);
    _send_done.slots.resize(config.sq_size);
    _receive_done.slots.resize(config.rq_size);
}

// ---- state transitions --------------------------------------------------------------------------

void rc_qp::to_init(std::uint8_t remote_rights) {
    if (_state != qp_state::reset) {
        throw std::invalid_argument("roce::rc_qp::to_init: queue pair is in " + std::string(to_string(_state)));
    }
    _remote_rights = remote_rights;
    _state = qp_state::init;
}

void rc_qp::to_rtr(const path& p) {
    auto refuse = [](const std::string& why) { throw std::invalid_argument("roce::rc_qp::to_rtr: " + why); };
    if (_state != qp_state::init) {
        refuse("queue pair is in " + std::string(to_string(_state)));
    }
    if (p.mtu < 256 || p.mtu > 4096 || (p.mtu & (p.mtu - 1)) != 0) {
        refuse("mtu " + std::to_string(p.mtu) + " is not 256, 512, 1024, 2048 or 4096");
    }
    if (p.rq_psn > proto::psn_mask || p.dest_qpn > proto::psn_mask) {
        refuse("rq_psn or dest_qpn wider than 24 bits");
    }
    if (p.min_rnr_timer > 31 || p.max_dest_rd_atomic == 0 || p.max_dest_rd_atomic > _reads.size()) {
        refuse("min_rnr_timer over 31 or max_dest_rd_atomic outside 1..32");
    }
    proto::route r;
    r.src_mac = _config.mac;
    r.dst_mac = p.dest_mac;
    r.src_gid = _config.gid;
    r.dst_gid = p.dest_gid;
    r.udp_src_port = _config.udp_sport;
    proto::route_headers headers(r);
    if (!headers.refusal().empty()) {   // a frame is IPv4 or IPv6: the two GIDs must agree
        refuse(std::string(headers.refusal()));
    }
    _headers = headers;
    _path = p;
    _epsn = p.rq_psn;
    _state = qp_state::rtr;
}

void rc_qp::to_rts(const send_params& s) {
    auto refuse = [](const std::string& why) { throw std::invalid_argument("roce::rc_qp::to_rts: " + why); };
    if (_state != qp_state::rtr) {
        refuse("queue pair is in " + std::string(to_string(_state)));
    }
    if (s.sq_psn > proto::psn_mask || s.timeout > 31 || s.retry_count > 7 || s.rnr_retry > 7) {
        refuse("sq_psn over 24 bits, timeout over 31, or a retry count over 7");
    }
    if (s.max_rd_atomic == 0 || s.max_rd_atomic > 32 || s.max_inflight == 0 || s.max_inflight >= (1u << 22)) {
        refuse("max_rd_atomic outside 1..32 or max_inflight outside 1..2^22-1");
    }
    _send = s;
    _ack_timeout = ack_timeout(s.timeout);
    _next_psn = _tx_psn = _sent_end = _una = s.sq_psn;
    _retry_left = s.retry_count;
    _rnr_left = s.rnr_retry;
    _state = qp_state::rts;
    schedule();   // entries posted before RTS
}

void rc_qp::to_error() noexcept {
    if (_state != qp_state::error) {
        enter_error();
    }
}

void rc_qp::reset() noexcept {
    _state = qp_state::reset;
    _counters = {};
    _sq_post = _sq_done = _sq_started = _tx_entry = _una_entry = 0;
    _payload_next = _payload_at = 0;
    _tx_psn = _next_psn = _sent_end = _una = 0;
    _reads_outstanding = 0;
    _timer_armed = _rnr_waiting = _gap_rewound = false;
    _send_done.head = _send_done.tail = 0;
    _rq_post = _rq_done = 0;
    _epsn = _msn = 0;
    _nak_silent = false;
    _inbound = inbound::none;
    _responder_failure.reset();
    _in_offset = _in_va = _in_length = 0;
    _reads_head = _reads_tail = 0;
    _ack_pending = _nak_pending = false;
    _receive_done.head = _receive_done.tail = 0;
}

// Every entry without completion, of both rings, completes flushed; the queue pair stops.
void rc_qp::enter_error() noexcept {
    for (; _sq_done != _sq_post; ++_sq_done) {
        complete_send(sq(_sq_done), completion_status::flushed);
    }
    for (; _rq_done != _rq_post; ++_rq_done) {
        complete_receive(rq(_rq_done), completion_status::flushed, 0);
    }
    _sq_started = _tx_entry = _una_entry = _sq_post;
    _timer_armed = _rnr_waiting = false;
    _reads_head = _reads_tail;
    _ack_pending = false;
    _inbound = inbound::none;
    _state = qp_state::error;   // a NAK already pending still goes out (transmit)
    schedule();
    if (_host != nullptr) {
        _host->needs_attention();
    }
}

// ---- posting and completions ----------------------------------------------------------------------

std::uint32_t rc_qp::send_room() const noexcept {
    return _config.sq_size - (_sq_post - _sq_done) - _send_done.size();
}

std::uint32_t rc_qp::receive_room() const noexcept {
    return _config.rq_size - (_rq_post - _rq_done) - _receive_done.size();
}

// The entry's payload, `units` of 16 bytes, at the store's next place, or at its start when it
// would cross the end (an entry's scatter list is one span). What the entries not yet completed
// hold runs from the oldest one's stored_from to _payload_next; a store that is empty starts
// again at 0.
bool rc_qp::store_payload(send_entry& e, const send_request& r, std::uint32_t units) noexcept {
    const auto capacity = static_cast<std::uint32_t>(_sq_payload.size());
    if (_sq_done == _sq_post) {
        _payload_at = 0;
    }
    const bool wraps = _payload_at + units > capacity;   // also when the last entry ended at the end
    const std::uint32_t skip = wraps ? capacity - _payload_at : 0;
    const std::uint32_t held = _sq_done == _sq_post ? 0 : _payload_next - sq(_sq_done).stored_from;
    if (held + skip + units > capacity) {
        return false;
    }
    e.stored_from = _payload_next;
    e.payload = wraps ? 0 : _payload_at;
    if (units != 0 && r.is_inline) {
        std::memcpy(_sq_payload.data() + e.payload, r.inline_data.data(), r.inline_bytes);
    } else {
        std::copy_n(r.sg.begin(), units, _sq_payload.begin() + e.payload);
    }
    _payload_next += skip + units;
    _payload_at = e.payload + units;
    return true;
}

bool rc_qp::post_send(const send_request& r) noexcept {
    if (_state == qp_state::reset || send_room() == 0) {
        return false;
    }
    // a request the NIC cannot run completes with a local QP operation error, and keeps no payload
    completion_status error = completion_status::success;
    std::uint64_t bytes = 0;
    if (r.sge_count > max_sge || (r.is_inline && (r.inline_bytes > max_inline || r.op == work_op::read)) ||
        (r.with_immediate && r.op == work_op::read)) {
        error = completion_status::local_qp_operation;
    } else if (bytes = r.length(); bytes > max_message) {
        error = completion_status::local_length;
        bytes = 0;
    }
    const bool keep = error == completion_status::success;
    const auto units = static_cast<std::uint32_t>(
        !keep ? 0 : r.is_inline ? (r.inline_bytes + sizeof(sge) - 1) / sizeof(sge) : r.sge_count);
    send_entry& e = sq(_sq_post);
    if (!store_payload(e, r, units)) {
        return false;   // the store is full: nothing posted, nothing changed
    }
    e.local_error = error;
    e.bytes = bytes;
    e.is_inline = keep && r.is_inline;
    e.sge_count = keep && !r.is_inline ? r.sge_count : 0;
    e.index = r.index;
    e.op = r.op;
    e.signaled = r.signaled;
    e.remote_va = r.remote_va;
    e.rkey = r.rkey;
    e.with_immediate = r.with_immediate;
    e.immediate = r.immediate;
    e.first_psn = e.packets = 0;
    ++_sq_post;
    if (_state == qp_state::error) {
        complete_send(e, completion_status::flushed);
        ++_sq_done;
        _sq_started = _tx_entry = _una_entry = _sq_post;
    } else if (!_scheduled) {
        schedule();
    }
    return true;
}

bool rc_qp::post_receive(const receive_request& r) noexcept {
    if (_state == qp_state::reset || receive_room() == 0) {
        return false;
    }
    receive_entry& e = rq(_rq_post);
    e.index = r.index;
    e.sge_count = r.sge_count;   // more than rq_max_sge: the responder fails it at its use
    e.capacity = r.capacity();
    std::copy_n(r.sg.begin(), std::min<std::size_t>(r.sge_count, _config.rq_max_sge), rq_sg(_rq_post).begin());
    ++_rq_post;
    if (_state == qp_state::error) {
        complete_receive(rq(_rq_done), completion_status::flushed, 0);
        ++_rq_done;
    }
    return true;
}

bool rc_qp::take(completion_side side, completion& out) noexcept {
    completion_ring& ring = side == completion_side::send ? _send_done : _receive_done;
    if (ring.size() == 0) {
        return false;
    }
    ring.pop(out);
    return true;
}

void rc_qp::complete_send(const send_entry& e, completion_status status) noexcept {
    if (status == completion_status::success && !e.signaled) {
        return;
    }
    _send_done.push({completion_side::send, e.index, status,
                     status == completion_status::success ? static_cast<std::uint32_t>(e.bytes) : 0u, e.op});
    if (_host != nullptr) {
        _host->needs_attention();
    }
}

void rc_qp::complete_receive(const receive_entry& e, completion_status status, std::uint32_t bytes, work_op by,
                             std::optional<std::uint32_t> imm) noexcept {
    _receive_done.push({completion_side::receive, e.index, status, bytes, by, imm.has_value(), imm.value_or(0)});
    if (_host != nullptr) {
        _host->needs_attention();
    }
}

// ---- local memory ----------------------------------------------------------------------------------

mem_status rc_qp::gather(const send_entry& e, std::uint64_t offset, std::span<std::byte> out) const noexcept {
    if (e.is_inline) {
        std::memcpy(out.data(), inline_bytes(e).data() + offset, out.size());
        return mem_status::ok;
    }
    std::size_t done = 0;
    for (const sge& s : sges(e)) {
        if (done == out.size()) {
            break;
        }
        if (offset >= s.length) {
            offset -= s.length;
            continue;
        }
        const std::size_t n = std::min<std::size_t>(s.length - offset, out.size() - done);
        const mem_status st = _mem.read(s.key, _config.pd, s.va + offset, out.subspan(done, n), access_local_read);
        if (st != mem_status::ok) {
            return st;
        }
        done += n;
        offset = 0;
    }
    return done == out.size() ? mem_status::ok : mem_status::out_of_bounds;
}

mem_status rc_qp::scatter(std::span<const sge> sg, std::uint64_t offset, std::span<const std::byte> in) noexcept {
    finish_copies();   // in order with the writes before it
    std::size_t done = 0;
    for (std::size_t i = 0; i < sg.size() && done < in.size(); ++i) {
        const sge& s = sg[i];
        if (offset >= s.length) {
            offset -= s.length;
            continue;
        }
        const std::size_t n = std::min<std::size_t>(s.length - offset, in.size() - done);
        const mem_status st = _mem.write(s.key, _config.pd, s.va + offset, in.subspan(done, n), access_local_write);
        if (st != mem_status::ok) {
            return st;
        }
        done += n;
        offset = 0;
    }
    return done == in.size() ? mem_status::ok : mem_status::out_of_bounds;
}

void rc_qp::copy_now() noexcept {
    // the place was checked and found in a window with fd (memory::place) under this pass's pin;
    // memmove: a queue pair looped to itself may write over the range it reads
    std::memmove(_copy.to, _copy.from, _copy.n);
    _copy.n = 0;
}

bool rc_qp::write_payload(std::span<const std::byte> payload) noexcept {
    const std::uint64_t va = _in_va + _in_offset;
    std::byte* to = nullptr;
    if (_payload_stays &&
        _mem.place(_in_rkey, _config.pd, va, payload.size(), access_remote_write, to) == mem_status::ok && to != nullptr) {
        // A message's packets come in PSN order, MTU after MTU of the sender's buffer into MTU
        // after MTU of ours: one copy for the run (a 64 KiB memcpy runs faster than 16 of 4 KiB).
        if (_copy.n != 0 && to == _copy.to + _copy.n && payload.data() == _copy.from + _copy.n) {
            _copy.n += payload.size();
            return true;
        }
        finish_copies();
        _copy = {to, payload.data(), payload.size()};
        return true;
    }
    finish_copies();
    return _mem.write(_in_rkey, _config.pd, va, payload, access_remote_write) == mem_status::ok;
}

// ---- the wire ------------------------------------------------------------------------------------------

frame* rc_qp::start_frame(const proto::transport& t, std::size_t payload_bytes, std::span<std::byte>& payload) noexcept {
    frame* f = _port.allocate_to_send();
    if (f == nullptr) {
        return nullptr;   // the switch is out of buffers: try again next poll
    }
    f->size = static_cast<std::uint32_t>(_headers.encode_headers(t, payload_bytes, f->bytes));
    payload = std::span<std::byte>(f->bytes).subspan(_headers.payload_offset(t.op), payload_bytes);
    return f;
}

frame* rc_qp::start_frame(const proto::transport& t, const std::byte* payload, std::size_t payload_bytes) noexcept {
    frame* f = _port.allocate_to_send();
    if (f == nullptr) {
        return nullptr;
    }
    f->size = static_cast<std::uint32_t>(_headers.encode_headers(t, payload_bytes, f->bytes));
    f->payload_ref = payload;
    f->payload_at = static_cast<std::uint32_t>(_headers.payload_offset(t.op));
    f->payload_bytes = static_cast<std::uint32_t>(payload_bytes);
    return f;
}

const std::byte* rc_qp::reference(const send_entry& e, std::uint64_t offset, std::size_t n) const noexcept {
    if (e.is_inline || n == 0) {
        return nullptr;
    }
    for (const sge& s : sges(e)) {
        if (offset >= s.length) {
            offset -= s.length;
            continue;
        }
        const std::byte* p = nullptr;
        if (n <= s.length - offset &&
            _mem.reference(s.key, _config.pd, s.va + offset, n, access_local_read, _port.guard(), p) == mem_status::ok) {
            return p;
        }
        return nullptr;
    }
    return nullptr;
}

// Unsealed (wire.hpp frame::sealed): the wire computes the ICRC only if the frame is captured.
// Sent at the end of transmit() (port::flush), with the rest of its burst.
void rc_qp::send_frame(frame* f) noexcept {
    f->sealed = false;
    _port.send(f);
    ++_counters.packets_sent;
}

bool rc_qp::send_empty(const proto::transport& t) noexcept {
    std::span<std::byte> none;
    frame* f = start_frame(t, 0, none);
    if (f == nullptr) {
        return false;
    }
    send_frame(f);
    return true;
}

void rc_qp::on_frame(const proto::decoded& packet, clock::time_point now, bool payload_by_reference) noexcept {
    ++_counters.packets_received;
    _payload_stays = payload_by_reference;
    if (_state != qp_state::rtr && _state != qp_state::rts) {
        return;   // RESET and INIT drop what arrives; ERROR too
    }
    switch (packet.bth.op) {
    case proto::opcode::read_response_first:
    case proto::opcode::read_response_middle:
    case proto::opcode::read_response_last:
    case proto::opcode::read_response_only:
    case proto::opcode::acknowledge:
    case proto::opcode::atomic_acknowledge:
        on_response(packet, now);
        break;
    default:
        on_request(packet);
        break;
    }
}

bool rc_qp::transmit(clock::time_point now) noexcept {
    finish_copies();
    bool did = false;
    if (_state == qp_state::rtr || _state == qp_state::rts || (_state == qp_state::error && _nak_pending)) {
        did = send_responses();
    }
    if (_state == qp_state::rts) {
        did = requester_timers(now) || did;
        if (_state == qp_state::rts) {
            did = send_requests(now) || did;
        }
    }
    _port.flush(now);
    return did;
}

}  // namespace rig::sim::roce
