// A follower (replication.hpp): its log written by the leader's RDMA WRITEs; each
// WRITE-with-immediate consumes one of its receives and says, in 64-byte blocks, how far the log
// is valid; it checks the records up to there and acknowledges by a SEND of its valid end.
// A restarted follower first READs the leader's log up to the commit point.
#include <algorithm>
#include <cstring>

#include "replication.hpp"

namespace replog {

namespace {

// Receives kept posted: a WRITE-with-immediate finding none waits for one (a receiver-not-ready
// NAK and retry, IB spec 9.7.5.2.8), so as many as the leader can have in flight (its batches,
// leader.cpp) and some.
constexpr std::size_t receive_slots = 128;
// Acknowledgements in flight at most; later ones are folded into the next (each carries the
// valid end, so the latest says all).
constexpr std::size_t ack_slots = 64, max_acks_in_flight = 32;
constexpr std::size_t ack_base = receive_slots * block;
constexpr std::size_t scratch_bytes = ack_base + ack_slots * block;
// The catch-up's READs: a MiB each, four in flight.
constexpr std::size_t read_chunk = 1 << 20, reads_at_once = 4;

}  // namespace

outcome<std::unique_ptr<follower>> follower::open(std::string name, std::string_view where,
                                                  boost::asio::io_context& io, std::size_t log_bytes,
                                                  const rig::nic_options& options,
                                                  const rig::asio::options& async_options) {
    std::unique_ptr<follower> f(new follower(std::move(name)));
    const auto failed = [&](const char* what, const rig::error& e) {
        return std::unexpected(f->_name + ": " + what + ": " + e.message);
    };
    if (auto s = f->_seat.open(where, io, 4096, options, async_options); !s) {
        return std::unexpected(f->_name + ": " + s.error());
    }
    auto q = f->_seat.async.make_qp(*f->_seat.nic);
    if (!q) {
        return failed("make_qp", q.error());
    }
    f->_qp = std::move(*q);
    auto log = f->_seat.nic->allocate(log_bytes, rig::access::remote_write);
    if (!log) {
        return failed("allocate the log", log.error());
    }
    f->_log = *log;
    auto scratch = f->_seat.nic->allocate(scratch_bytes, rig::access::local);
    if (!scratch) {
        return failed("allocate the scratch region", scratch.error());
    }
    f->_scratch = *scratch;
    return f;
}

follower::~follower() { close(); }

void follower::close() { _seat.close(); }

outcome<void> follower::connect(const rig::endpoint& leader) {
    if (auto c = _qp.connect(leader); !c) {
        return std::unexpected(_name + ": connect: " + c.error().message);
    }
    for (std::size_t slot = 0; slot < receive_slots; ++slot) {
        post_receive(slot);
    }
    return {};
}

void follower::post_receive(std::size_t slot) {
    _seat.async.async_receive(_qp, _scratch, slot * block, block,
                         [this, slot](const boost::system::error_code& ec, rig::completion c) { on_receive(slot, ec, c); });
}

void follower::on_receive(std::size_t slot, const boost::system::error_code& ec, const rig::completion& c) {
    if (_seat.closed || _failure) {
        return;
    }
    if (ec) {
        fail("receive: " + why_failed(ec, c));
        return;
    }
    if (c.op == rig::operation::write_imm && c.immediate) {
        _announced_end = std::max(_announced_end, std::size_t{*c.immediate} * block);
    }
    post_receive(slot);
    if (!_catching_up) {
        check_and_acknowledge();
    }
}

// RC's order (IB spec 9.5: a responder executes the requests of a queue pair in the order they
// were sent) means every byte before the WRITE-with-immediate's has landed when its receive
// completes: the records up to the announced end are whole.
void follower::check_and_acknowledge() {
    if (_announced_end <= _checked_end) {
        return;
    }
    if (auto ok = check_records(_log.bytes(), _checked_end, _announced_end, _next_sequence); !ok) {
        fail(ok.error());
        return;
    }
    _checked_end = _announced_end;
    send_acknowledgement();
}

void follower::send_acknowledgement() {
    if (_acks_in_flight >= max_acks_in_flight || _qp.room(rig::side::send) == 0) {
        _ack_wanted = true;   // sent when one in flight completes
        return;
    }
    _ack_wanted = false;
    const std::size_t at = ack_base + (_next_ack_slot++ % ack_slots) * block;
    const std::uint64_t valid_end = _checked_end;
    std::memcpy(_scratch.data() + at, &valid_end, sizeof valid_end);
    ++_acks_in_flight;
    _seat.async.async_send(_qp, _scratch, at, sizeof valid_end,
                      [this](const boost::system::error_code& ec, rig::completion c) {
                          if (_seat.closed) {
                              return;
                          }
                          --_acks_in_flight;
                          if (ec) {
                              fail("acknowledgement: " + why_failed(ec, c));
                          } else if (_ack_wanted && !_failure) {
                              send_acknowledgement();
                          }
                      });
}

void follower::catch_up(const rig::remote& leader_log, std::size_t upto, std::function<void()> done) {
    _catching_up = true;
    _catch_up_start = clock::now();
    _caught_up = std::move(done);
    _read_next = 0;
    _read_end = upto;
    _announced_end = std::max(_announced_end, upto);
    for (std::size_t i = 0; i < reads_at_once; ++i) {
        read_next(leader_log);
    }
}

void follower::read_next(const rig::remote& leader_log) {
    if (_failure) {
        return;
    }
    if (_read_next >= _read_end) {
        if (_reads_in_flight == 0 && _catching_up) {
            // every byte up to the commit point is in: check them all, then acknowledge
            _catching_up = false;
            _catch_up_time = clock::now() - _catch_up_start;
            check_and_acknowledge();
            if (_caught_up) {
                _caught_up();
            }
        }
        return;
    }
    const std::size_t at = _read_next, n = std::min(read_chunk, _read_end - _read_next);
    _read_next += n;
    ++_reads_in_flight;
    const rig::remote from{leader_log.address + at, leader_log.key};
    _seat.async.async_read(_qp, from, _log, at, n, [this, leader_log](const boost::system::error_code& ec, rig::completion c) {
        if (_seat.closed) {
            return;
        }
        --_reads_in_flight;
        if (ec) {
            fail("catch-up READ: " + why_failed(ec, c));
            return;
        }
        read_next(leader_log);
    });
}

void follower::fail(std::string why) {
    if (!_failure) {
        _failure = _name + ": " + std::move(why);
    }
}

}  // namespace replog
