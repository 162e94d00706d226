#pragma once
// examples/replication-log (README.md beside this file): a leader replicating an append-only log
// into two followers' logs by RDMA WRITE, each follower on its own NIC, a record committed once a
// majority (the leader and one follower) holds it. Built on the installed library's public
// headers only: rig/nic.hpp, rig/asio.hpp (completion groups through Boost.Asio).
//
// The log: records one after another from offset 0, each a 32-byte header (record_header) and
// its payload, padded to whole 64-byte blocks. A WRITE-with-immediate's immediate is the log's
// valid end in blocks (offset / 64), so 32 bits cover 256 GiB of log.
#include <utility>   // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "rig/asio.hpp"
#include "rig/nic.hpp"

namespace replog {

using clock = std::chrono::steady_clock;
template <class T>
using outcome = std::expected<T, std::string>;

// ---- the log's format (log_format.cpp) ------------------------------------------------------

constexpr std::size_t block = 64;
constexpr std::uint32_t record_magic = 0x474f4c52;  // "RLOG" little-endian

struct record_header {
    std::uint32_t magic = record_magic;
    std::uint32_t length = 0;     // payload bytes
    std::uint64_t sequence = 0;   // 0, 1, 2, ... over the whole log
    std::uint64_t checksum = 0;   // of the payload, seeded by the sequence
    std::uint64_t reserved = 0;
};
static_assert(sizeof(record_header) == 32);

// Bytes a record of `payload` bytes takes in the log: header and payload in whole blocks.
constexpr std::size_t record_span(std::size_t payload) {
    return (sizeof(record_header) + payload + block - 1) / block * block;
}

// Writes record `sequence` (header, `length` bytes of the sequence's pattern, zero padding) at
// `at` of `log`; its span.
std::size_t write_record(std::span<std::byte> log, std::size_t at, std::uint64_t sequence, std::uint32_t length);

// Checks the records in [from, to) of `log`, the first expected to be `next_sequence` (advanced
// past each good one): magic, sequence, length within the range, checksum. Why not, naming the
// offset.
outcome<void> check_records(std::span<const std::byte> log, std::size_t from, std::size_t to,
                            std::uint64_t& next_sequence);

// The first offset below `n` where `a` and `b` differ, if any.
std::optional<std::size_t> first_difference(std::span<const std::byte> a, std::span<const std::byte> b,
                                            std::size_t n);

// ---- a NIC with its group and adapter (seat.cpp) -----------------------------------------------

// What the leader and each follower hold: its own NIC, one completion group that all its queue
// pairs complete to, and the group's Asio adapter on the run's io_context.
struct seat {
    std::unique_ptr<rig::nic> nic;
    rig::completion_group group;
    rig::asio::group async;
    bool closed = false;   // handlers completed by close() (aborted) do nothing

    // Opens `where` and makes a group of `entries` CQEs (rings of 2^8) and its adapter. Why not,
    // naming the step.
    outcome<void> open(std::string_view where, boost::asio::io_context& io, std::uint32_t entries,
                       const rig::nic_options& options, const rig::asio::options& async_options);
    // The adapter first (it completes what is pending with aborted), then the NIC (a dead
    // function's NIC closes locally, its memory kept: rig::nic::stranded).
    void close();
};

// Why an entry failed: its completion's failure, else the adapter's error (aborted, flushed).
std::string why_failed(const boost::system::error_code& ec, const rig::completion& c);

// ---- a follower (follower.cpp) ---------------------------------------------------------------

// Its own NIC, a completion group and its Asio adapter, one queue pair to the leader, its log
// (remote write) and a scratch region (receive buffers, acknowledgement slots). It acknowledges
// each WRITE-with-immediate, once the records up to the immediate check out, by a SEND of its
// valid end.
class follower {
public:
    static outcome<std::unique_ptr<follower>> open(std::string name, std::string_view where,
                                                   boost::asio::io_context& io, std::size_t log_bytes,
                                                   const rig::nic_options& options,
                                                   const rig::asio::options& async_options);
    ~follower();
    follower(const follower&) = delete;
    follower& operator=(const follower&) = delete;

    const std::string& name() const noexcept { return _name; }
    rig::endpoint local() const { return _qp.local(); }
    rig::remote log_remote() const { return _log.remote(0); }
    std::span<const std::byte> log() const { return _log.bytes(); }
    // Connected to the leader's queue pair `leader`, its receives posted: acknowledging from now.
    outcome<void> connect(const rig::endpoint& leader);
    // The restarted follower: READs the leader's log [0, upto) through its queue pair in chunks,
    // acknowledging nothing before every byte is in and checked; `done` then (on the io thread).
    void catch_up(const rig::remote& leader_log, std::size_t upto, std::function<void()> done);

    std::size_t checked_end() const noexcept { return _checked_end; }
    bool catching_up() const noexcept { return _catching_up; }
    const std::optional<std::string>& failure() const noexcept { return _failure; }
    std::chrono::nanoseconds catch_up_time() const noexcept { return _catch_up_time; }
    // Lets go of the adapter and the NIC (a dead function's NIC closes locally).
    void close();

private:
    follower(std::string name) : _name(std::move(name)) {}
    void post_receive(std::size_t slot);
    void on_receive(std::size_t slot, const boost::system::error_code& ec, const rig::completion& c);
    void check_and_acknowledge();
    void send_acknowledgement();
    void read_next(const rig::remote& leader_log);
    void fail(std::string why);

    std::string _name;
    seat _seat;
    rig::queue_pair _qp;
    rig::region _log, _scratch;
    std::size_t _announced_end = 0;   // the largest valid end a WRITE-with-immediate announced
    std::size_t _checked_end = 0;     // records up to here checked (and acknowledged)
    std::uint64_t _next_sequence = 0;
    std::size_t _acks_in_flight = 0, _next_ack_slot = 0;
    bool _ack_wanted = false;
    bool _catching_up = false;
    std::size_t _read_next = 0, _read_end = 0, _reads_in_flight = 0;
    clock::time_point _catch_up_start{};
    std::chrono::nanoseconds _catch_up_time{0};
    std::function<void()> _caught_up;
    std::optional<std::string> _failure;
};

// ---- the leader (leader.cpp) -----------------------------------------------------------------

// One run of appends of one record size: how many, and each one's commit latency.
struct run_figures {
    std::uint32_t length = 0;
    std::size_t records = 0;
    std::chrono::nanoseconds elapsed{0};
    std::vector<double> latency_us;   // append to commit, per record
};

// A follower as the leader sees it: its queue pair, its log's key, how far the leader has sent
// and how far it acknowledged.
struct member {
    std::string name;
    rig::queue_pair qp;
    rig::remote log;
    std::size_t ack_base = 0;          // its receive buffers in the leader's ack region
    std::size_t sent_end = 0;          // log bytes posted to it
    std::size_t acked_end = 0;         // log bytes it acknowledged holding
    std::size_t batches_in_flight = 0;
    bool joined = false;               // replicated to (connected, receives posted)
    bool dropped = false;
    std::optional<clock::time_point> dropped_at;
    std::string failure;               // the completion that dropped it
};

class leader {
public:
    static constexpr std::size_t cluster = 3;              // the leader and two follower seats
    static constexpr std::size_t majority = cluster / 2 + 1;
    static constexpr std::size_t max_members = 4;          // seats ever taken (a restart takes one)

    static outcome<std::unique_ptr<leader>> open(std::string_view where, boost::asio::io_context& io,
                                                 std::size_t log_bytes, const rig::nic_options& options,
                                                 const rig::asio::options& async_options);
    ~leader();
    leader(const leader&) = delete;
    leader& operator=(const leader&) = delete;

    // A queue pair for a follower whose log is `log`: its local endpoint, for the follower.
    outcome<std::pair<member*, rig::endpoint>> make_member(std::string name, const rig::remote& log);
    // Connected to the follower's queue pair, acknowledgement receives posted, replicated to
    // from log offset `from` on (0, or the commit point for a follower that READs the rest).
    outcome<void> join(member& m, const rig::endpoint& follower, std::size_t from);

    // Appends `count` records of `length` bytes, at most `window` not yet committed, and goes on
    // appending while `more()` holds; returns once every append is committed, or fails at
    // `deadline` (no majority) or when the log is full.
    outcome<run_figures> run(std::uint32_t length, std::size_t count, std::size_t window,
                             const std::function<bool()>& more, clock::duration deadline);
    // Runs the io_context until `done()` or the deadline; whether it held.
    bool run_until(const std::function<bool()>& done, clock::duration deadline);

    std::span<const std::byte> log() const { return _log.bytes(); }
    rig::remote log_remote() const { return _log.remote(0); }
    std::size_t end() const noexcept { return _end; }
    std::size_t commit_point() const noexcept { return _commit; }
    std::uint64_t records() const noexcept { return _sequence; }
    const std::vector<std::unique_ptr<member>>& members() const noexcept { return _members; }
    void close();

private:
    explicit leader(boost::asio::io_context& io) : _io(io) {}
    void append(std::uint32_t length);
    void replicate(member& m);
    void post_ack_receive(member& m, std::size_t slot);
    void on_batch(member& m, const boost::system::error_code& ec, const rig::completion& c);
    void on_ack(member& m, std::size_t slot, const boost::system::error_code& ec, const rig::completion& c);
    void drop(member& m, const std::string& why);
    void advance_commit();
    void fill_window();

    boost::asio::io_context& _io;
    seat _seat;
    rig::region _log, _acks;
    std::vector<std::unique_ptr<member>> _members;
    std::size_t _end = 0, _commit = 0;
    std::uint64_t _sequence = 0;
    // The run in progress: the records appended and not yet committed (their end, their append
    // time), what is left to append.
    struct in_flight {
        std::size_t end;
        clock::time_point appended;
    };
    std::deque<in_flight> _uncommitted;
    run_figures* _figures = nullptr;
    std::size_t _to_append = 0, _window = 1;
    const std::function<bool()>* _more = nullptr;
    std::optional<std::string> _fault;   // what stops the run (the log full)
};

}  // namespace replog
