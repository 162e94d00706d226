// replication-log: a leader and two followers, each on its own NIC, replicating an append-only
// log by RDMA WRITE (README.md beside this file). Prints appends per second and commit latency
// per record size; with a spare NIC and a way to kill follower 1's NIC, a failure run: the
// follower killed mid-run, dropped on retry-exceeded, the log going on with the majority, a
// fresh follower on the spare catching up by RDMA READ; then every surviving log is compared
// with the leader's up to the commit point, byte by byte.
//
//   replication-log [--short] [--window N] [--spin-us N] [--kill-command CMD] LEADER FOLLOWER1 FOLLOWER2 [SPARE]
//
// Each NIC is "vfio-user:/path/to/socket" (rig-nicsim's functions) or a PCI address. The run
// script beside this file starts rig-nicsim and passes its sockets.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "replication.hpp"

namespace replog {
namespace {

using namespace std::chrono_literals;

struct settings {
    bool short_run = false;
    std::size_t window = 16;           // records appended and not yet committed, at most
    std::string kill_command;          // kills follower 1's NIC (the run script: rig-nicsim's signal)
    // The adapters poll this long after a completion before they sleep on the group's eventfd:
    // on the model, a commit's two hops (the follower's receive, the leader's acknowledgement)
    // each cost an eventfd wake-up otherwise (64 B at window 1: p50 about 17 us spinning 100 us,
    // 700 us without).
    rig::asio::options async{.spin = std::chrono::microseconds(100)};
    std::string leader;
    std::vector<std::string> followers;
    std::string spare;
};

struct size_plan {
    std::uint32_t length;
    std::size_t records;
};

// The record sizes of the issue (64 B ... 64 KiB), and how many of each.
std::vector<size_plan> plan(bool short_run) {
    if (short_run) {
        return {{64, 1000}, {512, 1000}, {4096, 1000}, {65536, 200}};
    }
    return {{64, 20000}, {512, 20000}, {4096, 10000}, {65536, 2000}};
}

// The failure run: records of this size; so many before the kill, after the drop, and while the
// restarted follower catches up and after.
constexpr std::uint32_t failure_length = 4096;
struct failure_plan {
    std::size_t before, during, after;
};
failure_plan failure_counts(bool short_run) { return short_run ? failure_plan{500, 500, 500} : failure_plan{3000, 3000, 3000}; }

// Records the leader appends at most while it waits for the killed follower's drop. The drop
// comes with the retry-exceeded, (7 + 1) x 67 ms after the kill by the queue pair's defaults,
// and a fast host appends more 4 KiB records meanwhile than a log could hold (250 000 a second
// here): past this many the run stops appending and waits for the drop.
constexpr std::size_t drop_reserve_records = 20000;

// Log bytes for every record the run appends, and a MiB to spare.
std::size_t log_bytes(const settings& s) {
    std::size_t bytes = 1 << 20;
    for (const size_plan& p : plan(s.short_run)) {
        bytes += p.records * record_span(p.length);
    }
    const failure_plan f = failure_counts(s.short_run);
    bytes += (f.before + f.during + f.after + drop_reserve_records) * record_span(failure_length);
    return bytes;
}

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "replication-log: %s\n"
                 "usage: replication-log [--short] [--window N] [--spin-us N] [--kill-command CMD] LEADER FOLLOWER1 FOLLOWER2 "
                 "[SPARE]\n"
                 "  each NIC vfio-user:/path/to/socket or a PCI address (0000:3b:00.0)\n"
                 "  --short             a few thousand records (./check's run)\n"
                 "  --window N          records appended and not yet committed, at most (default 16)\n"
                 "  --spin-us N         the adapters poll N us after a completion before sleeping (default 100)\n"
                 "  --kill-command CMD  run by /bin/sh mid-run to kill FOLLOWER1's NIC; with SPARE, the failure run\n",
                 why);
    std::exit(2);
}

settings parse(int argc, char** argv) {
    settings s;
    std::vector<std::string> nics;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                usage((a + " needs a value").c_str());
            }
            return argv[++i];
        };
        if (a == "--short") {
            s.short_run = true;
        } else if (a == "--window") {
            const std::string v = value();
            s.window = static_cast<std::size_t>(std::strtoul(v.c_str(), nullptr, 10));
            if (s.window == 0 || s.window > 4096) {
                usage("--window takes 1..4096");
            }
        } else if (a == "--spin-us") {
            const std::string v = value();
            s.async.spin = std::chrono::microseconds(std::strtoul(v.c_str(), nullptr, 10));
        } else if (a == "--kill-command") {
            s.kill_command = value();
        } else if (a == "-h" || a == "--help") {
            usage("help");
        } else if (a.starts_with("-")) {
            usage(("unknown option " + a).c_str());
        } else {
            nics.push_back(a);
        }
    }
    if (nics.size() < 3 || nics.size() > 4) {
        usage("give LEADER FOLLOWER1 FOLLOWER2 and optionally SPARE");
    }
    s.leader = nics[0];
    s.followers = {nics[1], nics[2]};
    s.spare = nics.size() == 4 ? nics[3] : "";
    return s;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) {
        return 0;
    }
    std::ranges::sort(v);
    const auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::clamp<std::size_t>(k, 1, v.size()) - 1];
}

void print_figures(const run_figures& f) {
    const double seconds = std::chrono::duration<double>(f.elapsed).count();
    std::printf("%9u %9zu %12.0f %13.1f %9.1f %10.1f\n", f.length, f.records,
                seconds > 0 ? static_cast<double>(f.records) / seconds : 0.0, percentile(f.latency_us, 0.5),
                percentile(f.latency_us, 0.99), percentile(f.latency_us, 0.999));
    std::fflush(stdout);
}

double ms_between(clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// The NICs of one run, all on one io_context run by this thread (rig/asio.hpp: an adapter's
// handlers on one thread at a time). Declared so that the io_context outlives every adapter.
struct cluster {
    boost::asio::io_context io;
    std::unique_ptr<leader> lead;
    std::vector<std::unique_ptr<follower>> followers;   // follower k + 1; a restart adds one
    std::vector<member*> seats;                         // the leader's view of each

    ~cluster() {
        for (auto& f : followers) {
            f->close();
        }
        if (lead) {
            lead->close();
        }
        io.restart();
        io.poll();   // the handlers close() completed with aborted, before their owners go
    }
};

// Connects follower `f` to the leader and seats it, replicated to from log offset `from`. The
// endpoints cross as their text form, as they would cross a TCP connection between hosts.
outcome<member*> seat(cluster& c, follower& f, std::size_t from) {
    auto m = c.lead->make_member(f.name(), f.log_remote());
    if (!m) {
        return std::unexpected(m.error());
    }
    auto leader_side = rig::endpoint::parse(m->second.to_string());
    auto follower_side = rig::endpoint::parse(f.local().to_string());
    if (!leader_side || !follower_side) {
        return std::unexpected("endpoint text: " + (leader_side ? follower_side.error() : leader_side.error()));
    }
    if (auto ok = f.connect(*leader_side); !ok) {
        return std::unexpected(ok.error());
    }
    if (auto ok = c.lead->join(*m->first, *follower_side, from); !ok) {
        return std::unexpected(ok.error());
    }
    c.seats.push_back(m->first);
    return m->first;
}

outcome<void> open_cluster(cluster& c, const settings& s, const rig::nic_options& options) {
    const std::size_t bytes = log_bytes(s);
    auto l = leader::open(s.leader, c.io, bytes, options, s.async);
    if (!l) {
        return std::unexpected(l.error());
    }
    c.lead = std::move(*l);
    for (std::size_t k = 0; k < s.followers.size(); ++k) {
        auto f = follower::open("follower " + std::to_string(k + 1), s.followers[k], c.io, bytes, options, s.async);
        if (!f) {
            return std::unexpected(f.error());
        }
        c.followers.push_back(std::move(*f));
        if (auto m = seat(c, *c.followers.back(), 0); !m) {
            return std::unexpected(m.error());
        }
    }
    std::printf("replication-log: leader %s, followers %s %s; log %zu MiB per NIC, window %zu records\n",
                s.leader.c_str(), s.followers[0].c_str(), s.followers[1].c_str(), bytes >> 20, s.window);
    return {};
}

// Every live member has acknowledged the whole log (so the commit point is the log's end).
bool all_acknowledged(const cluster& c) {
    for (const member* m : c.seats) {
        if (!m->dropped && m->acked_end != c.lead->end()) {
            return false;
        }
    }
    return true;
}

outcome<void> measure(cluster& c, const settings& s) {
    std::printf("%9s %9s %12s %13s %9s %10s\n", "record B", "records", "appends/s", "commit p50 us", "p99 us",
                "p99.9 us");
    for (const size_plan& p : plan(s.short_run)) {
        auto f = c.lead->run(p.length, p.records, s.window, [] { return false; }, 120s);
        if (!f) {
            return std::unexpected(f.error());
        }
        print_figures(*f);
    }
    return {};
}

// The failure run (README.md, "Failure and catch-up").
outcome<void> fail_and_recover(cluster& c, const settings& s, const rig::nic_options& options) {
    const failure_plan counts = failure_counts(s.short_run);
    const auto never = [] { return false; };
    if (auto f = c.lead->run(failure_length, counts.before, s.window, never, 60s); !f) {
        return std::unexpected(f.error());
    }
    member& victim = *c.seats[0];
    const std::uint64_t killed_after = c.lead->records();
    const clock::time_point killed = clock::now();
    if (const int rc = std::system(s.kill_command.c_str()); rc != 0) {
        return std::unexpected("the kill command '" + s.kill_command + "' failed (status " + std::to_string(rc) + ")");
    }
    // appends go on with the majority until the leader has dropped the victim, or until the
    // log's reserve for the wait is spent: then the leader waits for the drop without appending
    const std::uint64_t reserve_end = c.lead->records() + counts.during + drop_reserve_records;
    const auto appending = [&] { return !victim.dropped && c.lead->records() < reserve_end; };
    if (auto f = c.lead->run(failure_length, counts.during, s.window, appending, 60s); !f) {
        return std::unexpected(f.error());
    }
    if (!c.lead->run_until([&] { return victim.dropped; }, 60s)) {
        return std::unexpected("follower 1 was not dropped within 60 s of its kill");
    }
    const std::uint64_t committed_without = c.lead->records() - killed_after;

    auto spare = follower::open("follower 3", s.spare, c.io, log_bytes(s), options, s.async);
    if (!spare) {
        return std::unexpected(spare.error());
    }
    c.followers.push_back(std::move(*spare));
    follower& fresh = *c.followers.back();
    const std::size_t catch_up_bytes = c.lead->commit_point();
    if (auto m = seat(c, fresh, catch_up_bytes); !m) {
        return std::unexpected(m.error());
    }
    fresh.catch_up(c.lead->log_remote(), catch_up_bytes, [] {});
    // appends go on while it READs
    if (auto f = c.lead->run(failure_length, counts.after, s.window, [&] { return fresh.catching_up() && !fresh.failure(); }, 60s);
        !f) {
        return std::unexpected(f.error());
    }
    if (!c.lead->run_until([&] { return all_acknowledged(c) || fresh.failure(); }, 30s)) {
        return std::unexpected("the members did not acknowledge the whole log within 30 s");
    }
    if (fresh.failure()) {
        return std::unexpected(*fresh.failure());
    }
    const double detect_ms = ms_between(killed, *victim.dropped_at);
    // the family's name for it: mlx5 "transport retry counter exceeded", bnxt TRANSPORT_RETRY_CNT_ERR
    std::string failure = victim.failure;
    std::ranges::transform(failure, failure.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const bool retry_exceeded = failure.find("retry") != std::string::npos;
    std::printf("failure: follower 1 killed after record %llu; dropped %.0f ms later on %s (\"%s\"); %llu records "
                "committed by the majority (leader, follower 2) from the kill to the restart; follower 3 caught up "
                "%.1f MiB by RDMA READ in %.1f ms, appends going on, and joined the majority\n",
                static_cast<unsigned long long>(killed_after), detect_ms,
                retry_exceeded ? "retry-exceeded" : "another failure", victim.failure.c_str(),
                static_cast<unsigned long long>(committed_without), static_cast<double>(catch_up_bytes) / (1 << 20),
                std::chrono::duration<double, std::milli>(fresh.catch_up_time()).count());
    if (!retry_exceeded) {
        return std::unexpected("follower 1 was dropped on another failure than retry-exceeded: " + victim.failure);
    }
    return {};
}

// Every surviving follower's log against the leader's, byte by byte up to the commit point.
outcome<void> compare_logs(cluster& c) {
    const std::size_t upto = c.lead->commit_point();
    std::string differences;
    for (std::size_t k = 0; k < c.followers.size(); ++k) {
        if (c.seats[k]->dropped) {
            continue;
        }
        follower& f = *c.followers[k];
        if (f.failure()) {
            differences += "; " + *f.failure();
            continue;
        }
        if (const auto at = first_difference(c.lead->log(), f.log(), upto)) {
            differences += "; " + f.name() + "'s log differs from the leader's at byte " + std::to_string(*at);
            continue;
        }
        std::printf("check: %s's log is byte-identical to the leader's up to the commit point (%zu bytes, %llu "
                    "records)\n",
                    f.name().c_str(), upto, static_cast<unsigned long long>(c.lead->records()));
    }
    if (upto != c.lead->end()) {
        differences += "; the commit point " + std::to_string(upto) + " is short of the log's end " +
                       std::to_string(c.lead->end());
    }
    if (!differences.empty()) {
        return std::unexpected(differences.substr(2));
    }
    return {};
}

outcome<void> run(const settings& s) {
    rig::nic_options options;
    // a dead function's NIC answers nothing: its close gives up on each command soon
    options.command_timeout = 2s;
    cluster c;
    if (auto ok = open_cluster(c, s, options); !ok) {
        return ok;
    }
    if (auto ok = measure(c, s); !ok) {
        return ok;
    }
    if (s.spare.empty() || s.kill_command.empty()) {
        std::printf("failure: not run (it needs a SPARE NIC and --kill-command)\n");
    } else if (auto ok = fail_and_recover(c, s, options); !ok) {
        return ok;
    }
    if (!c.lead->run_until([&] { return all_acknowledged(c); }, 30s)) {
        return std::unexpected("the members did not acknowledge the whole log within 30 s");
    }
    return compare_logs(c);
}

}  // namespace
}  // namespace replog

int main(int argc, char** argv) {
    const replog::settings s = replog::parse(argc, argv);
    try {
        if (auto ok = replog::run(s); !ok) {
            std::fprintf(stderr, "replication-log: %s\n", ok.error().c_str());
            return 1;
        }
    } catch (const std::exception& e) {   // misuse (std::invalid_argument): a bug of this program
        std::fprintf(stderr, "replication-log: %s\n", e.what());
        return 1;
    }
    return 0;
}
