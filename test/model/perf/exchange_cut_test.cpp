// rig-perf against a peer whose connection closes at every step (issue 20, "a perftest peer
// that lies ... a closed connection at every step"): a rig-perf client and a rig-perf server on
// two model functions talk through a TCP relay that, once it has passed `budget` bytes one way,
// closes both connections. A whole run through the relay, uncut, records where each message
// ended (the exchange is lock-step: each message arrives as one read); then for each of those
// boundaries, and one byte into each message, a run is cut there. Every cut run must end on both
// sides within its deadline, and one that lost a message the peer needed must end in an error
// naming what it waited for: never a hang, never a crash, never a report made up.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "test/model/perf/loopback.hpp"
#include "test/model/qp_api/served_nics.hpp"
#include "tools/rig-perf/runner.hpp"

namespace {

using namespace std::chrono_literals;
namespace perf = rig::perf;

// The relay: accepts rig-perf's client on `port`, connects to rig-perf's server, passes bytes
// both ways. Direction 0 is client to server. With a budget, once that many bytes of `cut_way`
// have passed, it closes both connections (the rest of that read is not passed).
struct relay {
    std::uint16_t port = 0;
    std::vector<std::size_t> ends[2];   // cumulative byte count after each read, per direction
    std::thread t;

    relay(std::uint16_t server_port, int cut_way, std::optional<std::size_t> budget) {
        const int l = rig::test::listen_loopback(port);
        t = std::thread([this, l, server_port, cut_way, budget] { run(l, server_port, cut_way, budget); });
    }
    ~relay() {
        if (t.joinable()) {
            t.join();
        }
    }

    void run(int l, std::uint16_t server_port, int cut_way, std::optional<std::size_t> budget) {
        pollfd p{l, POLLIN, 0};
        const int c = ::poll(&p, 1, 20000) == 1 ? ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC) : -1;
        ::close(l);
        const int s = c >= 0 ? rig::test::connect_loopback(server_port, 20s) : -1;
        const int fd[2] = {c, s};   // read from fd[way], write to fd[1 - way]
        std::size_t passed[2] = {0, 0};
        const auto by = std::chrono::steady_clock::now() + 60s;
        while (c >= 0 && s >= 0 && std::chrono::steady_clock::now() < by) {
            pollfd q[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
            if (::poll(q, 2, 1000) <= 0) {
                continue;
            }
            bool done = false;
            for (int way = 0; way < 2 && !done; ++way) {
                if (q[way].revents == 0) {
                    continue;
                }
                char b[65536];
                ssize_t n = ::recv(fd[way], b, sizeof b, 0);
                if (n <= 0) {
                    done = true;
                    break;
                }
                if (budget && way == cut_way && passed[way] + static_cast<std::size_t>(n) >= *budget) {
                    n = static_cast<ssize_t>(*budget - passed[way]);
                    done = true;
                }
                if (n > 0 && ::send(fd[1 - way], b, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) {
                    done = true;
                }
                passed[way] += static_cast<std::size_t>(n);
                ends[way].push_back(passed[way]);
            }
            if (done) {
                break;
            }
        }
        for (int f : fd) {
            if (f >= 0) {
                ::shutdown(f, SHUT_RDWR);
                ::close(f);
            }
        }
    }
};

struct outcome {
    std::expected<perf::run_report, std::string> client = std::unexpected("not run");
    std::expected<perf::run_report, std::string> server = std::unexpected("not run");
    std::chrono::milliseconds took{};
    std::vector<std::size_t> ends[2];
};

// One run of `kind` through a relay cut after `budget` bytes of `cut_way` (none: uncut).
outcome run_through_relay(rig::test::served_function& f0, rig::test::served_function& f1, perf::test_kind kind,
                          int cut_way, std::optional<std::size_t> budget) {
    perf::options o;
    o.kind = kind;
    o.iterations = 20;
    o.size = 64;
    o.tx_depth = perf::is_latency(kind) ? 1 : 16;
    o.exchange_timeout = 2000ms;
    o.run_timeout = 3000ms;
    std::uint16_t server_port = 0;
    ::close(rig::test::listen_loopback(server_port));   // a free port for rig-perf's server
    outcome out;
    std::FILE* sink = std::fopen("/dev/null", "w");
    const auto t0 = std::chrono::steady_clock::now();
    {
        relay r(server_port, cut_way, budget);
        perf::options so = o, co = o;
        so.device = f1.where();
        so.port = server_port;
        co.device = f0.where();
        co.server = "127.0.0.1";
        co.port = r.port;
        std::thread server([&] { out.server = perf::run(so, sink); });
        out.client = perf::run(co, sink);
        server.join();
        out.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
        r.t.join();
        out.ends[0] = r.ends[0];
        out.ends[1] = r.ends[1];
    }
    std::fclose(sink);
    return out;
}

}  // namespace

TEST_CASE("rig-perf: the exchange cut at every message, either way, ends both sides in time with a named error",
          "[model][perf]") {
    rig::sim::roce::wire w;
    rig::test::served_function f0{0, &w};
    rig::test::served_function f1{1, &w};
    for (const auto kind : {perf::test_kind::write_bw, perf::test_kind::read_lat, perf::test_kind::send_bw}) {
        const outcome whole = run_through_relay(f0, f1, kind, 0, std::nullopt);
        INFO("test " << static_cast<int>(kind));
        REQUIRE(whole.client.has_value());
        REQUIRE(whole.server.has_value());
        for (int way = 0; way < 2; ++way) {
            std::vector<std::size_t> cuts{0};   // closed before the first byte
            for (std::size_t end : whole.ends[way]) {
                cuts.push_back(end - 1);   // one byte short of a message
                cuts.push_back(end);       // between messages
            }
            const std::size_t total = whole.ends[way].empty() ? 0 : whole.ends[way].back();
            // the last message of either way ("done\0", or the last handshake) is read by no one
            const std::size_t needed = whole.ends[way].size() >= 2 ? whole.ends[way][whole.ends[way].size() - 2] : 0;
            for (std::size_t budget : cuts) {
                if (budget >= total) {
                    continue;
                }
                const outcome cut = run_through_relay(f0, f1, kind, way, budget);
                INFO((way == 0 ? "client to server" : "server to client") << " cut after " << budget << " of " << total
                                                                           << " bytes, in " << cut.took.count() << " ms");
                INFO("client: " << (cut.client ? std::string("ok") : cut.client.error()));
                INFO("server: " << (cut.server ? std::string("ok") : cut.server.error()));
                CHECK(cut.took < 15s);   // the deadlines are 2 s per message, 3 s per run
                if (budget < needed) {
                    CHECK((!cut.client.has_value() || !cut.server.has_value()));
                }
                for (const auto* r : {&cut.client, &cut.server}) {
                    if (!r->has_value()) {
                        CHECK_FALSE(r->error().empty());
                    }
                }
            }
        }
    }
}
