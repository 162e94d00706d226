// One side of a rig-perf test (runner.hpp).
#include "tools/rig-perf/runner.hpp"

#include <algorithm>
#include <bit>
#include <fstream>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "rig/nic.hpp"
#include "tools/rig-perf/exchange.hpp"
#include "tools/rig-perf/live.hpp"
#include "tools/rig-perf/log.hpp"
#include "tools/rig-perf/loops.hpp"
#include "tools/rig-perf/protocol.hpp"
#include "tools/rig-perf/report.hpp"

namespace rig::perf {

namespace {

// What a READ queue pair advertises as out_reads (its responder resources, log 4): perftest's
// READ tests send the device's max_qp_rd_atom (16 on ConnectX) unless -o asks for fewer.
constexpr std::uint32_t rig_out_reads = 16;
// What every other test advertises: perftest sets user_param->out_reads = 1 for any verb but
// READ and ATOMIC (perftest_parameters.c check_link_and_mtu and check_link, at v4.5-0.17 and
// at HEAD), and set_up_connection copies it into each pingpong_dest, so a WRITE or SEND QP
// line carries "0001" there. The header block shows it only for READ ("Outstand reads";
// the others print "Max inline data" instead).
constexpr std::uint32_t other_out_reads = 1;
// Receives each SEND-test queue pair keeps posted (perftest's DEF_RX_SEND), no more than a
// counted run's iterations (perftest_parameters.c force_dependecies, as -t: options.cpp).
constexpr std::uint32_t default_rx_depth = 512;
std::uint32_t rx_depth_of(const options& o) {
    return o.duration ? default_rx_depth
                      : static_cast<std::uint32_t>(std::min<std::uint64_t>(default_rx_depth, o.iterations));
}

std::uint64_t page_round(std::uint64_t n) { return (n + page_size - 1) / page_size * page_size; }

template <class T>
std::expected<T, std::string> api(rig::result<T> r, const std::string& what) {
    if (!r) {
        return std::unexpected(what + ": " + r.error().message);
    }
    return std::move(*r);
}

void print(std::FILE* out, const std::string& s) {
    std::fputs(s.c_str(), out);
    std::fflush(out);
}

std::string gid_text(const std::array<std::byte, 16>& g) {
    std::string s;
    for (std::size_t i = 0; i < g.size(); i += 2) {
        s += fmt::format("{}{:02x}{:02x}", i == 0 ? "" : ":", std::to_integer<unsigned>(g[i]),
                         std::to_integer<unsigned>(g[i + 1]));
    }
    return s;
}

// How a later line for one of the peer's queue pairs differs from its first line: the first field
// that does, with both values and what it suggests; empty if the lines are the same. perftest
// sends one queue pair the same struct pingpong_dest every time (write_bw.c, send_bw.c: both
// rounds are ctx_hand_shake(&my_dest[i]), every barrier and the close ctx_hand_shake(&my_dest[0])),
// so a difference is a peer that lies, or one run with another -q, whose next line belongs to
// another queue pair. (perftest itself just overwrites rem_dest[i], and its run then uses the
// second round's rkey and vaddr; rig-perf connected and sized its lanes by the first.)
std::string line_difference(const qp_info& first, const qp_info& later) {
    if (later.qpn != first.qpn) {
        return fmt::format("names QP {:#x}, its first named QP {:#x}: do both sides run the same -q?", later.qpn,
                           first.qpn);
    }
    constexpr std::string_view same = ": perftest sends a queue pair's line unchanged every time";
    if (later.gid != first.gid) {
        return "names GID " + gid_text(later.gid) + ", its first named " + gid_text(first.gid) + std::string(same);
    }
    const std::pair<const char*, std::pair<std::uint64_t, std::uint64_t>> fields[] = {
        {"PSN", {later.psn, first.psn}},   {"rkey", {later.rkey, first.rkey}}, {"vaddr", {later.vaddr, first.vaddr}},
        {"out_reads", {later.out_reads, first.out_reads}}, {"LID", {later.lid, first.lid}},
        {"SRQ number", {later.srqn, first.srqn}}};
    for (const auto& [name, v] : fields) {
        if (v.first != v.second) {
            return fmt::format("has {} {:#x}, its first had {:#x}{}", name, v.first, v.second, same);
        }
    }
    return {};
}

// Why the NIC failed, as the firmware layer reported it (from its event thread): the data
// path only sees "the NIC failed", so a run that fails names this too.
struct nic_failure {
    std::mutex lock;
    std::string why;
    void set(const std::string& w) {
        std::lock_guard g(lock);
        why = w;
    }
    std::string get() {
        std::lock_guard g(lock);
        return why;
    }
};

struct session {
    const options& o;
    std::FILE* out;
    bool client;
    std::unique_ptr<rig::nic> nic;
    std::vector<rig::queue_pair> qps;
    std::vector<rig::region> regions;
    std::vector<qp_info> mine, theirs;
    std::vector<lane> lanes;
    std::optional<channel> ch;
    test_info info;
    exchange_plan plan = plan_of(o.kind);
    std::vector<std::uint64_t> sizes = sizes_of(o);
    std::uint64_t half = 0;
    std::shared_ptr<nic_failure> failure = std::make_shared<nic_failure>();
    bool warmed = false;   // a warm-up ran (warm_up_if_due)
    const std::uint32_t rx_depth = rx_depth_of(o);

    // H0 of protocol.hpp: queue pair 0's line again (ctx_hand_shake), a barrier. Once the lines
    // are known the peer's must be its first line again: a peer run with a larger -q sends its
    // next queue pair's line here (send_bw.c: H0 right after the first round).
    std::expected<void, std::string> barrier(std::chrono::milliseconds wait) {
        auto r = exchange_qp(*ch, mine[0], wait);
        if (!r) {
            return std::unexpected(r.error());
        }
        if (!theirs.empty()) {
            if (const std::string d = line_difference(theirs[0], *r); !d.empty()) {
                return std::unexpected("the peer's handshake (its queue pair 1's line again) " + d);
            }
        }
        return {};
    }
    std::string peer_line(const char* round, std::uint32_t i) const {
        return fmt::format("the peer's {}line for queue pair {} of {}", round, i + 1, o.queue_pairs);
    }

    // Hq, the first round: the peer's line for each queue pair, and our queue pair connected to
    // it. No two of ours may connect to one peer QP: a peer run with a smaller -q goes on to its
    // next message (the second round, or a barrier: its QP 0 line again) where we wait for a
    // further line (perftest checks nothing here: ctx_hand_shake fills rem_dest[i]).
    std::expected<void, std::string> connect_round() {
        for (std::uint32_t i = 0; i < o.queue_pairs; ++i) {
            auto peer = exchange_qp(*ch, mine[i], o.exchange_timeout);
            if (!peer) {
                return std::unexpected(peer_line("", i) + ": " + peer.error());
            }
            for (std::size_t j = 0; j < theirs.size(); ++j) {
                if (theirs[j].qpn == peer->qpn && theirs[j].gid == peer->gid) {
                    return std::unexpected(fmt::format("the peer named QP {:#x} for queue pair {} and for queue pair "
                                                       "{}: do both sides run the same -q?",
                                                       peer->qpn, i + 1, j + 1));
                }
            }
            auto mac = mac_from_gid(peer->gid);
            if (!mac) {
                return std::unexpected(mac.error());
            }
            theirs.push_back(*peer);
            const rig::endpoint e{peer->qpn, peer->psn, peer->gid, *mac};
            log().debug("QP {:#x} connects to {}", mine[i].qpn, e.to_string());
            // at the MTU both offered the smaller of (check_mtu), which a perftest peer's QP uses too
            if (auto c = qps[i].connect(e, info.mtu_bytes); !c) {
                return std::unexpected("connect to the peer's QP " + std::to_string(peer->qpn) + ": " +
                                       c.error().message);
            }
        }
        return {};
    }

    // Hq again, the round whose lines perftest prints (ctx_print_pingpong_data): the peer's line
    // for each queue pair must be the one of the first round (line_difference).
    std::expected<void, std::string> address_round() {
        for (std::uint32_t i = 0; i < o.queue_pairs; ++i) {
            print(out, address_lines(info, true, mine[i]));
        }
        for (std::uint32_t i = 0; i < o.queue_pairs; ++i) {
            auto peer = exchange_qp(*ch, mine[i], o.exchange_timeout);
            if (!peer) {
                return std::unexpected(peer_line("second ", i) + ": " + peer.error());
            }
            if (const std::string d = line_difference(theirs[i], *peer); !d.empty()) {
                return std::unexpected(fmt::format("the peer's second line for queue pair {} {}", i + 1, d));
            }
            print(out, address_lines(info, false, *peer));
        }
        return {};
    }
    bool passive() const { return !client && plan.server_passive; }

    // A region (2 x half: what we send from, then where the peer writes and reads) and a queue
    // pair per -q, each with the line we will send for it.
    std::expected<void, std::string> make_queue_pairs() {
        half = page_round(std::max<std::uint64_t>(*std::max_element(sizes.begin(), sizes.end()), 64));
        for (std::uint32_t i = 0; i < o.queue_pairs; ++i) {
            auto r = api(nic->allocate(2 * half, rig::access::remote), "allocate " + std::to_string(2 * half) + " bytes");
            if (!r) {
                return std::unexpected(r.error());
            }
            regions.push_back(*r);
            auto q = api(nic->make_qp(), "make_qp (queue pair " + std::to_string(i + 1) + " of " +
                                             std::to_string(o.queue_pairs) + ")");
            if (!q) {
                return std::unexpected(q.error());
            }
            qps.push_back(std::move(*q));
            if (auto fits = fits_queue_pair(qps.back()); !fits) {
                return fits;
            }
            const rig::endpoint e = qps.back().local();
            qp_info m;
            m.out_reads = is_read(o.kind) ? rig_out_reads : other_out_reads;
            m.qpn = e.qp;
            m.psn = e.psn;
            m.rkey = regions.back().key();
            m.vaddr = regions.back().address() + half;  // where the peer writes and reads (perftest's vaddr)
            m.gid = e.gid;
            mine.push_back(m);
        }
        return {};
    }

    std::expected<void, std::string> set_up() {
        rig::nic_options no;
        no.fatal = [f = failure](const rig::error& e) { f->set(e.message); };
        // Rings as deep as the test keeps them (perftest sizes its queues by -t, and by rx_depth
        // for SEND tests): 2^n above the depth (a bnxt ring keeps one slot free), 2^12 at most
        // (max_depth), so that many queue pairs (-q) cost the NIC and the model what they use.
        const std::uint32_t depth = std::max(o.tx_depth, is_send(o.kind) ? rx_depth : 1u);
        no.log_ring_entries = static_cast<std::uint8_t>(std::clamp(std::bit_width(depth), 6u, 12u));
        auto n = rig::nic::open(o.device, no);
        if (!n) {
            return std::unexpected("open " + o.device + ": " + n.error().message);
        }
        nic = std::move(*n);
        if (o.mtu && *o.mtu > nic->path_mtu()) {  // perftest: "Requested mtu is higher than active mtu"
            return std::unexpected("-m " + std::to_string(*o.mtu) + ": above the path MTU of " + o.device + " (" +
                                   std::to_string(nic->path_mtu()) + ", what its port's Ethernet MTU carries)");
        }
        if (client) {
            auto c = channel::connect(*o.server, o.port, o.exchange_timeout);
            if (!c) {
                return std::unexpected(c.error());
            }
            ch.emplace(std::move(*c));
        } else {
            print(out, "\n************************************\n* Waiting for client to connect... *\n"
                       "************************************\n");
            auto c = channel::accept(o.port, o.run_timeout, o.bind_address);
            if (!c) {
                return std::unexpected(c.error());
            }
            ch.emplace(std::move(*c));
        }
        // the MTU offered: -m, else the largest rig's connect may use (nic::path_mtu, from the port),
        // as ibv_mtu (1024 -> 3, 4096 -> 5); the queue pairs connect at the smaller of both offers
        auto setup = exchange_setup(*ch, ibv_mtu_of(o.mtu.value_or(nic->path_mtu())), o.exchange_timeout);
        if (!setup) {
            return std::unexpected(setup.error());
        }
        log().debug("peer perftest version {}, page {}, cache line {}, MTU {}", setup->peer_version,
                    setup->page_size, setup->cache_line, mtu_bytes_of(setup->mtu));
        info.kind = o.kind;
        info.client = client;
        info.device = o.device;
        info.queue_pairs = o.queue_pairs;
        info.tx_depth = o.tx_depth;
        info.cq_mod = o.cq_mod;
        info.rx_depth = rx_depth;
        info.mtu_bytes = mtu_bytes_of(setup->mtu);
        info.inline_size = o.inline_size;
        info.out_reads = rig_out_reads;
        info.duration = o.duration.has_value();

        if (auto m = make_queue_pairs(); !m) {
            return m;
        }
        print(out, header_block(info));
        if (plan.h0_before_lines) {  // write_lat.c, read_lat.c: a handshake before the QP lines
            if (auto b = barrier(o.exchange_timeout); !b) {
                return b;
            }
        }
        if (auto r = connect_round(); !r) {
            return r;
        }
        if (plan.h0_between_rounds) {  // send_bw.c, send_lat.c: a handshake right after connect
            if (auto b = barrier(o.exchange_timeout); !b) {
                return b;
            }
        }
        if (auto r = address_round(); !r) {
            return r;
        }
        for (std::uint32_t i = 0; i < o.queue_pairs; ++i) {
            lanes.push_back(lane{&qps[i], regions[i], rig::remote{theirs[i].vaddr, theirs[i].rkey}, 0});
        }
        if (!plan.h0_between_rounds) {  // the others: "an additional handshake ... after RTR"
            if (auto b = barrier(o.exchange_timeout); !b) {
                return b;
            }
        }
        if (o.kind == test_kind::read_lat && !client) {
            return {};  // read_lat.c: the server prints no table, it closes at once
        }
        print(out, result_line);
        print(out, is_latency(o.kind) ? lat_table_header(o.duration.has_value()) : bw_table_header(o.report_gbits));
        return {};
    }

    // The server of write_bw, read_bw and read_lat: it runs nothing, and sits in one read until
    // the client has run every size (bounded by the run's length, protocol.hpp passive_wait).
    // write_bw and read_bw then print the client's report as their one row, and write it to
    // the JSON (write_bw.c, read_bw.c: xchg_bw_reports, then print_full_bw_report(rem_bw_rep),
    // which also writes --out_json). What the server sends in that exchange is its own
    // my_bw_rep, which perftest never fills on the passive side (stack memory the client
    // does not read when not duplex): rig-perf sends zeros.
    std::expected<void, std::string> serve_passively(run_report& report) {
        const auto wait = passive_wait(o, sizes, o.exchange_timeout);
        if (plan.report) {
            if (auto b = barrier(wait); !b) {
                return b;
            }
            auto peer = exchange_bw_report(*ch, bw_report_wire{}, o.exchange_timeout);
            if (!peer) {
                return std::unexpected(peer.error());
            }
            if (peer->size != sizes.back()) {  // perftest prints it regardless; so do we, and say so
                log().warn("the client reported its last size as {} bytes, this side ran up to {} (same options on "
                           "both sides?)",
                           peer->size, sizes.back());
            }
            const bw_row row = row_of(*peer, o.report_gbits);  // in the client's unit, as ours
            report.bw.push_back(row);
            print(out, bw_row_line(row, o.report_gbits));
            return close_connection(*ch, mine[0], o.exchange_timeout);
        }
        return close_connection(*ch, mine[0], wait);
    }

    // After the last size: the client's report of its last row (write_bw, read_bw), then the
    // close (all but write_lat, which just closes the socket).
    std::expected<void, std::string> finish(const run_report& report) {
        if (plan.report) {
            if (auto b = barrier(o.exchange_timeout); !b) {
                return b;
            }
            // our last row, in the unit our table prints (report.hpp wire_of); the server's
            // answer is perftest's never-filled report, not read
            const bw_row row = report.bw.empty() ? bw_row{} : report.bw.back();
            if (auto r = exchange_bw_report(*ch, wire_of(row, o.report_gbits), o.exchange_timeout); !r) {
                return std::unexpected(r.error());
            }
        }
        if (plan.close) {
            return close_connection(*ch, mine[0], o.exchange_timeout);
        }
        // write_lat: perftest just exits (its FIN). Ours goes first, and the queue pair stays
        // until the peer's comes: the peer's last WRITE may still wait for our ACK.
        ch->drain(o.exchange_timeout);
        ch->close();
        return {};
    }

    // What the options ask of one queue pair, against what this NIC's takes: -t entries in flight
    // (a bnxt ring holds 4095 of its 4096) and -I inline bytes (mlx5 28, bnxt 96).
    std::expected<void, std::string> fits_queue_pair(const rig::queue_pair& q) const {
        if (o.tx_depth > q.room(rig::side::send)) {
            return std::unexpected("-t " + std::to_string(o.tx_depth) + ": a queue pair of " + o.device + " holds " +
                                   std::to_string(q.room(rig::side::send)) + " entries in flight");
        }
        if (o.inline_size > q.max_inline()) {
            return std::unexpected("-I " + std::to_string(o.inline_size) + ": a queue pair of " + o.device +
                                   " carries at most " + std::to_string(q.max_inline()) + " inline bytes");
        }
        return {};
    }

    // The client of a bandwidth test warms up (loops.hpp warm_up) before its first size, so
    // that the first row measures the rate as the others do, not first touches after a connect
    // (150-600 us on the model, 10-30 % of a 5000-entry size: docs/architecture.md, "First
    // touches, and rig-perf's warm-up"); with --perform_warm_up before every size, as perftest's
    // write_bw.c and read_bw.c do with that flag. send_bw warms up with zero-length WRITEs,
    // which take none of the receives the peer counts (perftest warms up no SEND test).
    std::expected<void, std::string> warm_up_if_due(const loop_settings& s) {
        const bool bandwidth = !is_latency(o.kind);
        if (!client || !bandwidth || (warmed && !o.perform_warm_up)) {
            return {};
        }
        warmed = true;
        return warm_up(o.kind, lanes, s);
    }

    std::expected<void, std::string> one_size(std::uint64_t size, run_report& report) {
        loop_settings s;
        s.size = size;
        s.half = half;
        s.iterations = o.iterations;
        if (o.duration) {
            s.duration = std::chrono::nanoseconds(*o.duration);
        }
        s.tx_depth = o.tx_depth;
        s.cq_mod = o.cq_mod;
        s.rx_depth = rx_depth;
        s.use_inline = o.inline_size > 0 && size <= o.inline_size;
        s.stall = o.exchange_timeout;
        s.peer_stopped = [c = &*ch] { return c->peer_stopped(); };
        // -D on a terminal: a live status line (live.hpp), erased before the row; the loop
        // samples it only every few hundred microseconds at most (loops.hpp live_check_every).
        std::optional<live_line> live;
        if (o.duration && is_terminal(out)) {
            live.emplace(out, o.kind, size, o.report_gbits);
            s.live = [l = &*live](std::chrono::nanoseconds elapsed, std::uint64_t done) { l->sample(elapsed, done); };
        }

        if (is_send(o.kind)) {
            for (lane& l : lanes) {
                post_receives(l, s);
            }
        }
        // Before the barrier: a send_bw receiver times from it, and counts none of the warm-up.
        if (auto w = warm_up_if_due(s); !w) {
            return w;
        }
        if (plan.sync_before_size) {  // send_*: the peer's receives are posted
            if (auto b = barrier(o.exchange_timeout); !b) {
                return b;
            }
        }
        if (is_latency(o.kind)) {
            auto row = run_lat(o.kind, client, lanes[0], s);
            if (live) {
                live->erase();
            }
            if (!row) {
                return std::unexpected(row.error());
            }
            report.lat.push_back(*row);
            print(out, lat_row_line(*row, o.duration.has_value()));
            return {};
        }
        auto row = client ? run_bw_client(o.kind, lanes, s) : run_bw_receiver(lanes, s);
        if (live) {
            live->erase();
        }
        if (!row) {
            return std::unexpected(row.error());
        }
        if (plan.sync_after_size_all && o.all_sizes) {  // send_bw.c RUN_ALL
            if (auto b = barrier(o.exchange_timeout); !b) {
                return b;
            }
        }
        report.bw.push_back(*row);
        print(out, bw_row_line(*row, o.report_gbits));
        return {};
    }

    std::expected<void, std::string> tear_down() {
        for (auto& q : qps) {
            if (!q.destroyed()) {
                if (auto d = q.destroy(); !d) {
                    return std::unexpected("destroy: " + d.error().message);
                }
            }
        }
        if (nic) {
            if (auto c = nic->close(); !c) {
                return std::unexpected("close: " + c.error().message);
            }
        }
        return {};
    }
};

}  // namespace

std::vector<std::uint64_t> sizes_of(const options& o) {
    if (!o.all_sizes) {
        return {o.size};
    }
    std::vector<std::uint64_t> v;
    for (std::uint64_t s = 2; s <= o.max_size && s <= (1ull << 23); s *= 2) {
        v.push_back(s);
    }
    return v;
}

std::expected<run_report, std::string> run(const options& o, std::FILE* out) {
    session s{o, out, o.server.has_value(), {}, {}, {}, {}, {}, {}, {}, {}, plan_of(o.kind), sizes_of(o), 0};
    run_report report;
    report.kind = o.kind;
    auto fail = [&](const std::string& why) -> std::expected<run_report, std::string> {
        const std::string nic = s.failure->get();
        (void)s.tear_down();  // the failure is the reason given; what is left goes with the NIC
        return std::unexpected(why + (nic.empty() ? "" : " [NIC: " + nic + "]"));
    };
    if (auto u = s.set_up(); !u) {
        return fail(u.error());
    }
    if (s.passive()) {
        if (auto p = s.serve_passively(report); !p) {
            return fail(p.error());
        }
    } else {
        for (std::uint64_t size : s.sizes) {
            if (auto r = s.one_size(size, report); !r) {
                return fail(r.error());
            }
        }
        if (auto f = s.finish(report); !f) {
            return fail(f.error());
        }
    }
    print(out, result_line);
    if (auto t = s.tear_down(); !t) {
        return std::unexpected(t.error());
    }
    if (o.json_path) {
        std::ofstream f(*o.json_path, std::ios::trunc);
        f << json_report(s.info, report, o.report_gbits);
        if (!f.flush()) {
            return std::unexpected("cannot write " + *o.json_path);
        }
    }
    return report;
}

}  // namespace rig::perf
