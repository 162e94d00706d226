// The leader (replication.hpp): appends records to its log, replicates the log to each member by
// RDMA WRITE, takes their acknowledgements (SENDs) and commits a record once a majority holds it.
//
// A member is sent the leader's log from where the last batch to it ended up to the log's end:
// one WRITE of all but the last 64-byte block, unsignalled, posted without a doorbell
// (queue_pair::post_write), then a WRITE-with-immediate of the last block through the Asio
// adapter, whose doorbell tells the NIC about both entries at once (rig/qp.hpp: ring covers every
// entry posted since the last one). The immediate is the new end in blocks. While a member has
// `max_batches` in flight, appends pile up and go in its next batch: the slower a follower, the
// larger its batches.
#include <algorithm>
#include <cstring>

#include "replication.hpp"

namespace replog {

namespace {

constexpr std::size_t max_batches = 16;
// Acknowledgement receives per member: more than its acknowledgements in flight (follower.cpp).
constexpr std::size_t ack_receives = 64;
// The tag of the unsignalled WRITEs: names no slot of the adapter's table (rig/asio.hpp: a tag is
// a slot index and its generation), so their completion, if they fail, is no one's; the batch's
// WRITE-with-immediate after them completes flushed with the failure's error.
constexpr std::uint64_t no_tag = ~std::uint64_t{0};

rig::remote at(const rig::remote& base, std::size_t offset) { return {base.address + offset, base.key}; }

}  // namespace

outcome<std::unique_ptr<leader>> leader::open(std::string_view where, boost::asio::io_context& io,
                                              std::size_t log_bytes, const rig::nic_options& options,
                                              const rig::asio::options& async_options) {
    std::unique_ptr<leader> l(new leader(io));
    const auto failed = [](const char* what, const rig::error& e) {
        return std::unexpected(std::string("leader: ") + what + ": " + e.message);
    };
    if (auto s = l->_seat.open(where, io, 8192, options, async_options); !s) {
        return std::unexpected("leader: " + s.error());
    }
    // remote read: a restarted follower READs it to catch up
    auto log = l->_seat.nic->allocate(log_bytes, rig::access::remote_read);
    if (!log) {
        return failed("allocate the log", log.error());
    }
    l->_log = *log;
    auto acks = l->_seat.nic->allocate(max_members * ack_receives * block, rig::access::local);
    if (!acks) {
        return failed("allocate the acknowledgement buffers", acks.error());
    }
    l->_acks = *acks;
    return l;
}

leader::~leader() { close(); }

void leader::close() { _seat.close(); }

outcome<std::pair<member*, rig::endpoint>> leader::make_member(std::string name, const rig::remote& log) {
    if (_members.size() == max_members) {
        return std::unexpected("leader: no seat left for " + name);
    }
    auto q = _seat.async.make_qp(*_seat.nic);
    if (!q) {
        return std::unexpected("leader: make_qp for " + name + ": " + q.error().message);
    }
    auto m = std::make_unique<member>();
    m->name = std::move(name);
    m->qp = std::move(*q);
    m->log = log;
    m->ack_base = _members.size() * ack_receives * block;
    const rig::endpoint local = m->qp.local();
    _members.push_back(std::move(m));
    return std::pair{_members.back().get(), local};
}

outcome<void> leader::join(member& m, const rig::endpoint& follower, std::size_t from) {
    if (auto c = m.qp.connect(follower); !c) {
        return std::unexpected("leader: connect to " + m.name + ": " + c.error().message);
    }
    for (std::size_t slot = 0; slot < ack_receives; ++slot) {
        post_ack_receive(m, slot);
    }
    m.sent_end = from;
    m.joined = true;
    replicate(m);
    return {};
}

void leader::post_ack_receive(member& m, std::size_t slot) {
    _seat.async.async_receive(m.qp, _acks, m.ack_base + slot * block, block,
                         [this, &m, slot](const boost::system::error_code& ec, rig::completion c) {
                             on_ack(m, slot, ec, c);
                         });
}

void leader::replicate(member& m) {
    if (!m.joined || m.dropped || m.sent_end >= _end || m.batches_in_flight >= max_batches ||
        m.qp.room(rig::side::send) < 2) {
        return;
    }
    const std::size_t from = m.sent_end, to = _end;
    if (to - from > block) {
        m.qp.post_write(_log, from, to - from - block, at(m.log, from), no_tag, rig::signaled::no);
    }
    const auto valid_blocks = static_cast<std::uint32_t>(to / block);
    _seat.async.async_write_imm(m.qp, _log, to - block, block, at(m.log, to - block), valid_blocks,
                           [this, &m](const boost::system::error_code& ec, rig::completion c) { on_batch(m, ec, c); });
    m.sent_end = to;
    ++m.batches_in_flight;
}

void leader::on_batch(member& m, const boost::system::error_code& ec, const rig::completion& c) {
    if (_seat.closed) {
        return;
    }
    --m.batches_in_flight;
    if (m.dropped) {
        return;
    }
    if (ec) {
        drop(m, why_failed(ec, c));
        return;
    }
    replicate(m);
}

void leader::on_ack(member& m, std::size_t slot, const boost::system::error_code& ec, const rig::completion& c) {
    if (_seat.closed || m.dropped) {
        return;
    }
    if (ec) {
        drop(m, "acknowledgement receive: " + why_failed(ec, c));
        return;
    }
    std::uint64_t valid_end = 0;
    std::memcpy(&valid_end, _acks.data() + m.ack_base + slot * block, sizeof valid_end);
    post_ack_receive(m, slot);
    if (valid_end > m.acked_end && valid_end <= m.sent_end) {
        m.acked_end = valid_end;
        advance_commit();
    }
}

// A member whose entry failed (retry exceeded: its NIC answers no more) is out: its queue pair
// destroyed (its pending handlers complete aborted), the log goes on with the others.
void leader::drop(member& m, const std::string& why) {
    m.dropped = true;
    m.dropped_at = clock::now();
    m.failure = why;
    (void)_seat.async.destroy(m.qp);
    advance_commit();
}

// The commit point: the largest end a majority of the cluster holds (the leader holds its whole
// log); never moves back, as a record once committed stays so (a dropped member's
// acknowledgements no longer count, what they helped commit stays committed).
void leader::advance_commit() {
    std::vector<std::size_t> held{_end};
    for (const auto& m : _members) {
        if (m->joined && !m->dropped) {
            held.push_back(m->acked_end);
        }
    }
    if (held.size() >= majority) {
        std::ranges::sort(held, std::greater<>());
        _commit = std::max(_commit, held[majority - 1]);
    }
    const clock::time_point now = clock::now();
    while (!_uncommitted.empty() && _uncommitted.front().end <= _commit) {
        if (_figures) {
            _figures->latency_us.push_back(
                std::chrono::duration<double, std::micro>(now - _uncommitted.front().appended).count());
        }
        _uncommitted.pop_front();
    }
    fill_window();
}

void leader::append(std::uint32_t length) {
    const std::size_t span = record_span(length);
    if (_end + span > _log.size()) {
        _fault = "leader: the log is full (" + std::to_string(_log.size()) + " bytes)";
        return;
    }
    const clock::time_point appended = clock::now();
    write_record(_log.bytes(), _end, _sequence++, length);
    _end += span;
    _uncommitted.push_back({_end, appended});
}

// Appends while the window has room and the run wants more, then sends each member what it lacks.
void leader::fill_window() {
    if (_figures == nullptr || _fault) {
        return;
    }
    bool appended = false;
    while (_uncommitted.size() < _window && (_to_append > 0 || (*_more)())) {
        append(_figures->length);
        if (_fault) {
            return;
        }
        _to_append -= _to_append > 0 ? 1 : 0;
        appended = true;
    }
    if (appended) {
        for (const auto& m : _members) {
            replicate(*m);
        }
    }
}

outcome<run_figures> leader::run(std::uint32_t length, std::size_t count, std::size_t window,
                                 const std::function<bool()>& more, clock::duration deadline) {
    run_figures figures;
    figures.length = length;
    figures.latency_us.reserve(count);
    _figures = &figures;
    _to_append = count;
    _window = std::max<std::size_t>(window, 1);
    _more = &more;
    _fault.reset();
    const clock::time_point start = clock::now();
    fill_window();
    const bool done = run_until([&] { return _fault || (_to_append == 0 && !more() && _uncommitted.empty()); },
                                deadline);
    figures.elapsed = clock::now() - start;
    figures.records = figures.latency_us.size();
    _figures = nullptr;
    _more = nullptr;
    if (_fault) {
        return std::unexpected(*_fault);
    }
    if (!done) {
        std::string who;
        for (const auto& m : _members) {
            who += " " + m->name + (m->dropped ? " (dropped: " + m->failure + ")" : " acked " + std::to_string(m->acked_end));
        }
        return std::unexpected("leader: " + std::to_string(_uncommitted.size()) + " records not committed within " +
                               std::to_string(std::chrono::duration_cast<std::chrono::seconds>(deadline).count()) +
                               " s; log end " + std::to_string(_end) + ";" + who);
    }
    return figures;
}

bool leader::run_until(const std::function<bool()>& done, clock::duration deadline) {
    const clock::time_point end = clock::now() + deadline;
    while (!done()) {
        if (clock::now() >= end) {
            return false;
        }
        _io.restart();
        _io.run_for(std::chrono::milliseconds(2));
    }
    return true;
}

}  // namespace replog
