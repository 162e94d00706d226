// The measured loops (loops.hpp). Nothing here allocates per entry: the timestamp arrays are
// sized before the first post, and no call logs.
#include "tools/rig-perf/loops.hpp"

#include <algorithm>
#include <atomic>
#include <span>
#include <stdexcept>
#include <thread>

#include "tools/rig-perf/options.hpp"
#include "tools/rig-perf/stats.hpp"

namespace rig::perf {

namespace {

using clock = std::chrono::steady_clock;

std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
}

// Progress watchdog: an error once `stall` passes without progress. Reads the clock every
// 256 calls so that spinning stays cheap, and yields the core there: on a dedicated core that
// returns at once, but where the peer, the model's threads and this side share few cores
// (rig-perf on the device model) a spinner that never yields delays the very reply it waits for.
class watchdog {
public:
    explicit watchdog(std::chrono::milliseconds stall) : _stall(stall), _last(clock::now()) {}
    void progress() noexcept {
        _count = 0;
        _last = clock::now();
    }
    bool stalled() noexcept {
        if (++_count % 256 != 0) {
            return false;
        }
        std::this_thread::yield();
        return clock::now() - _last > _stall;
    }

private:
    std::chrono::milliseconds _stall;
    clock::time_point _last;
    std::uint32_t _count = 0;
};

// The live rate's sampler: counts loop passes and reads the clock once every live_check_every;
// calls settings.live once live_period has passed since the last call. Off (a test of one
// flag per pass) when there is no callback.
class live_meter {
public:
    live_meter(const loop_settings& s, std::int64_t start) noexcept
        : _s(s), _start(start), _period(std::chrono::duration_cast<std::chrono::nanoseconds>(s.live_period).count()),
          _next(start + _period), _on(static_cast<bool>(s.live)) {}
    void pass(std::uint64_t done) {
        if (!_on || ++_count % live_check_every != 0) {
            return;
        }
        const std::int64_t t = now_ns();
        if (t < _next) {
            return;
        }
        _next = t + _period;
        _s.live(std::chrono::nanoseconds(t - _start), done);
    }

private:
    const loop_settings& _s;
    std::int64_t _start;
    std::int64_t _period;
    std::int64_t _next;
    bool _on;
    std::uint32_t _count = 0;
};

std::string stall_message(const char* waiting, std::chrono::milliseconds stall) {
    return std::string("no ") + waiting + " for " + std::to_string(stall.count()) + " ms (the peer or the NIC stopped)";
}

// The last byte of a message in the second half: written by the peer's NIC, read here while
// it may change (a device write to memory this thread spins on).
std::uint8_t last_byte(const lane& l, const loop_settings& s) {
    std::byte& b = l.buffer.data()[s.half + s.size - 1];
    return std::to_integer<std::uint8_t>(std::atomic_ref<std::byte>(b).load(std::memory_order_acquire));
}

// The value round trip i (from 1) carries in its last byte; the buffer starts at 0.
std::uint8_t mark(std::uint64_t i) noexcept { return static_cast<std::uint8_t>(i); }

// One post of kind k of the first-half bytes [0, size) (reads: into them).
void post(test_kind k, lane& l, const loop_settings& s, rig::signaled sig = rig::signaled::yes) {
    rig::queue_pair& q = *l.qp;
    const rig::remote& target = l.peer;  // what the peer advertised: its second half
    switch (k) {
    case test_kind::write_bw:
    case test_kind::write_lat:
        if (s.use_inline) {
            q.post_write_inline(std::span<const std::byte>(l.buffer.data(), s.size), target, 0, sig);
        } else {
            q.post_write(l.buffer, 0, s.size, target, 0, sig);
        }
        break;
    case test_kind::read_bw:
    case test_kind::read_lat: q.post_read(target, l.buffer, 0, s.size, 0, sig); break;
    case test_kind::send_bw:
    case test_kind::send_lat: q.post_send(l.buffer, 0, s.size, 0, sig); break;
    }
}

// The oldest send-side completion, spinning until it comes: Ok, or why not, named as `what`
// ("read" for a READ's, as the bandwidth loop names them).
std::expected<void, std::string> take_send(lane& l, const loop_settings& s, const char* what = "send") {
    watchdog w(s.stall);
    while (true) {
        if (auto c = l.qp->poll(rig::side::send)) {
            if (!*c) {
                return std::unexpected(std::string(what) + " completion: " + c->error().message);
            }
            return {};
        }
        if (w.stalled()) {
            return std::unexpected(stall_message((std::string(what) + " completion").c_str(), s.stall));
        }
    }
}

}  // namespace

namespace {

// The bandwidth client's count of one queue pair: entries posted and seen done, and which of
// them is signalled (perftest run_iter_bw: entry s when s % cq_mod == cq_mod - 1, and the last
// iteration's).
struct bw_lane_count {
    std::uint64_t sent = 0, done = 0;

    static bool signalled(std::uint64_t entry, const loop_settings& s) noexcept {
        return entry % s.cq_mod == s.cq_mod - 1 || (!s.duration && entry == s.iterations - 1);
    }
    // How many to post now: up to tx_depth in flight; -n: up to the iterations; -D once the
    // time is up (`posting` false): up to the end of the group under way, whose last entry is
    // signalled.
    std::uint64_t room(const loop_settings& s, bool posting) const noexcept {
        const std::uint64_t in_flight = sent - done;
        std::uint64_t n = in_flight < s.tx_depth ? s.tx_depth - in_flight : 0;
        if (!s.duration) {
            return std::min(n, s.iterations - sent);
        }
        return posting ? n : std::min(n, (s.cq_mod - sent % s.cq_mod) % s.cq_mod);
    }
    // A signalled success: the entries up to the next signalled one are done. Returns how many.
    std::uint64_t complete(const loop_settings& s) noexcept {
        const std::uint64_t to = std::min((done / s.cq_mod + 1) * s.cq_mod, sent);
        const std::uint64_t n = to - done;
        done = to;
        return n;
    }
};

}  // namespace

std::expected<bw_row, std::string> run_bw_client(test_kind k, std::vector<lane>& lanes, const loop_settings& s) {
    if (s.cq_mod == 0 || s.cq_mod > s.tx_depth) {
        throw std::invalid_argument("run_bw_client: CQ moderation " + std::to_string(s.cq_mod) + " is not 1 .. " +
                                    "tx_depth (" + std::to_string(s.tx_depth) + "): no completion would free the ring");
    }
    const std::uint64_t per_qp = s.duration ? 0 : s.iterations;
    const std::uint64_t total = per_qp * lanes.size();
    std::vector<std::int64_t> posted(total), completed(total);
    std::vector<bw_lane_count> count(lanes.size());
    std::uint64_t np = 0, nc = 0;
    watchdog w(s.stall);
    const std::int64_t start = now_ns();
    const std::int64_t stop = s.duration ? start + s.duration->count() : 0;
    live_meter live(s, start);
    bool posting = true;
    while (true) {
        live.pass(nc);
        if (s.duration && posting && now_ns() >= stop) {
            posting = false;
        }
        bool outstanding = false;
        for (std::size_t i = 0; i < lanes.size(); ++i) {
            lane& l = lanes[i];
            bw_lane_count& c = count[i];
            if (const std::uint64_t batch = c.room(s, posting); batch > 0) {
                const std::int64_t t = now_ns();
                for (std::uint64_t b = 0; b < batch; ++b, ++c.sent) {
                    post(k, l, s, bw_lane_count::signalled(c.sent, s) ? rig::signaled::yes : rig::signaled::no);
                    if (!s.duration) {
                        posted[np++] = t;
                    }
                }
                l.qp->ring(rig::side::send);  // one doorbell for the batch
            }
            while (auto r = l.qp->poll(rig::side::send)) {
                if (!*r) {
                    return std::unexpected(std::string(k == test_kind::read_bw ? "read" : "send") +
                                           " completion: " + r->error().message);
                }
                const std::uint64_t n = c.complete(s);
                if (!s.duration) {
                    std::fill_n(completed.begin() + static_cast<std::ptrdiff_t>(nc), n, now_ns());
                }
                nc += n;
                w.progress();
            }
            outstanding = outstanding || c.sent != c.done || c.room(s, posting) > 0;
        }
        if (!outstanding && (!s.duration || !posting)) {
            break;
        }
        if (w.stalled()) {
            return std::unexpected(stall_message("completion", s.stall));
        }
    }
    if (s.duration) {
        return bandwidth_for(s.size, nc, now_ns() - start);
    }
    return bandwidth(s.size, posted, completed, s.tx_depth, s.cq_mod);
}

std::expected<void, std::string> warm_up(test_kind k, std::vector<lane>& lanes, const loop_settings& s) {
    if (is_latency(k)) {
        throw std::invalid_argument("warm_up: " + std::string(test_name(k)) + ": the bandwidth tests only (a "
                                    "latency test has none)");
    }
    for (lane& l : lanes) {
        const std::uint32_t n = std::min(s.tx_depth, l.qp->room(rig::side::send));
        for (std::uint32_t i = 0; i < n; ++i) {
            if (k == test_kind::send_bw) {
                // A SEND would take a receive the peer counts. A zero-length WRITE takes none, and
                // the responder checks neither its R_Key nor its address (IB spec C9-88; the
                // kernel's rxe_resp.c check_rkey): only the peer's remote-write right, which
                // perftest's SEND queue pairs grant (perftest_resources.c ctx_modify_qp_to_init).
                l.qp->post_write(l.buffer, 0, 0, l.peer);
            } else {
                post(k, l, s);
            }
        }
        l.qp->ring(rig::side::send);
        for (std::uint32_t i = 0; i < n; ++i) {
            if (auto t = take_send(l, s, k == test_kind::read_bw ? "read" : "send"); !t) {
                return std::unexpected("warm-up: " + t.error());
            }
        }
    }
    return {};
}

void post_receives(lane& l, const loop_settings& s) {
    if (l.receives >= s.rx_depth) {
        return;
    }
    while (l.receives < s.rx_depth && l.qp->room(rig::side::receive) > 0) {
        l.qp->post_receive(l.buffer, s.half, s.half);
        ++l.receives;
    }
    l.qp->ring(rig::side::receive);  // one doorbell for the batch
}

std::expected<bw_row, std::string> run_bw_receiver(std::vector<lane>& lanes, const loop_settings& s) {
    const std::uint64_t per_qp = s.duration ? 0 : s.iterations;
    std::vector<std::uint64_t> got(lanes.size(), 0);
    std::uint64_t total = 0;
    watchdog w(s.stall);
    const std::int64_t start = now_ns();
    std::int64_t last = start;
    std::uint32_t polls = 0;
    live_meter live(s, start);
    while (true) {
        live.pass(total);
        bool more = false;
        for (std::size_t i = 0; i < lanes.size(); ++i) {
            lane& l = lanes[i];
            bool taken = false;
            while (auto c = l.qp->poll(rig::side::receive)) {
                if (!*c) {
                    return std::unexpected("receive completion: " + c->error().message);
                }
                if (**c != s.size) {
                    return std::unexpected("received a " + std::to_string(**c) + "-byte message, expected " +
                                           std::to_string(s.size) + " (the peer runs another size: same options on both sides)");
                }
                --l.receives;
                ++got[i];
                ++total;
                taken = true;
                last = now_ns();
                w.progress();
            }
            if (taken) {
                post_receives(l, s);  // keep rx_depth posted
            }
            more = more || (!s.duration && got[i] < per_qp);
        }
        if (!s.duration && !more) {
            break;
        }
        if (s.duration && ++polls % 1024 == 0 && s.peer_stopped && s.peer_stopped()) {
            break;
        }
        if (w.stalled()) {
            return std::unexpected(stall_message("message received", s.stall));
        }
    }
    // The receive side times from the barrier to the last message (it cannot see the posts).
    return bandwidth_for(s.size, total, last - start);
}

std::expected<lat_row, std::string> run_lat(test_kind k, bool client, lane& l, const loop_settings& s) {
    const int rtt_factor = k == test_kind::read_lat ? 1 : 2;
    if (k == test_kind::read_lat && !client) {
        return lat_row{};  // the passive side: it only answers at the barriers
    }
    std::vector<std::int64_t> posted(s.duration ? 0 : s.iterations);
    const std::int64_t start = now_ns();
    const std::int64_t stop = s.duration ? start + s.duration->count() : 0;
    std::uint64_t trips = 0;
    std::uint32_t polls = 0;
    live_meter live(s, start);

    // Waits for round trip i's incoming message: the last byte of a WRITE, or a receive.
    auto await = [&](std::uint64_t i) -> std::expected<bool, std::string> {
        watchdog w(s.stall);
        while (true) {
            if (k == test_kind::write_lat) {
                if (last_byte(l, s) == mark(i)) {
                    return true;
                }
            } else if (auto c = l.qp->poll(rig::side::receive)) {
                if (!*c) {
                    return std::unexpected("receive completion: " + c->error().message);
                }
                --l.receives;
                post_receives(l, s);
                return true;
            }
            // -D: each side stops on its own clock, as perftest's alarm does (its wait for the
            // next reply ends at END_STATE), so a reply that will not come ends no run in error;
            // the server also stops once the client has spoken or closed (protocol.hpp).
            if (s.duration && ++polls % 1024 == 0 &&
                (now_ns() >= stop || (!client && s.peer_stopped && s.peer_stopped()))) {
                return false;
            }
            if (w.stalled()) {
                return std::unexpected(stall_message("reply", s.stall));
            }
        }
    };
    auto send_one = [&](std::uint64_t i) {
        if (k == test_kind::write_lat) {
            l.buffer.data()[s.size - 1] = std::byte{mark(i)};  // before the post: the NIC reads it
        }
        post(k, l, s);
        l.qp->ring(rig::side::send);
    };

    // Who sends first: in write_lat the server (perftest_resources.c run_iter_lat_write, v4.5-0.17
    // and 6.x: "if (rcnt < iters && !(scnt < 1 && user_param->machine == SERVER))" waits for the
    // peer's write before each send except the server's first), in send_lat the client
    // (run_iter_lat_send: "... machine == CLIENT"), in read_lat the client alone. With the client
    // first in write_lat, a perftest client and a rig-perf server both waited for the other's
    // first write until rig-perf's stall deadline (found against Debian's perftest 4.5 on rxe).
    const bool first = k == test_kind::write_lat ? !client : client;
    for (std::uint64_t i = 1;; ++i) {
        live.pass(trips);
        if (s.duration ? (client && now_ns() >= stop) : i > s.iterations) {
            break;
        }
        if (first) {
            const std::int64_t t = now_ns();
            if (!s.duration) {
                posted[i - 1] = t;
            }
            send_one(i);
            if (k == test_kind::read_lat) {
                if (auto c = take_send(l, s); !c) {
                    return std::unexpected(c.error());
                }
            } else {
                auto r = await(i);
                if (!r) {
                    return std::unexpected(r.error());
                }
                if (!*r) {
                    break;  // -D ended while the reply was due: the trip does not count
                }
                if (auto c = take_send(l, s); !c) {
                    return std::unexpected(c.error());
                }
            }
        } else {
            auto r = await(i);
            if (!r) {
                return std::unexpected(r.error());
            }
            if (!*r) {
                break;
            }
            if (!s.duration) {
                posted[i - 1] = now_ns();
            }
            send_one(i);
            if (auto c = take_send(l, s); !c) {
                return std::unexpected(c.error());
            }
        }
        ++trips;
    }
    if (s.duration) {
        return latency_for(s.size, trips, now_ns() - start, rtt_factor);
    }
    return latency(s.size, posted, rtt_factor);
}

}  // namespace rig::perf
