// perftest's out-of-band exchange (tools/rig-perf/exchange.hpp): golden bytes of every message
// (perftest's src/perftest_communication.c), and a peer over real TCP that sends truncated,
// garbled or no messages: each is an error naming what was sent and expected, never a hang.
#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>
#include <utility>  // before Asio (boost/asio/awaitable.hpp uses std::exchange)

#include <boost/asio.hpp>
#include <catch2/catch.hpp>

#include "tools/rig-perf/exchange.hpp"
#include "tools/rig-perf/protocol.hpp"

namespace {

using namespace std::chrono_literals;
using namespace std::string_view_literals;
using namespace rig::perf;
namespace asio = boost::asio;
using asio::ip::tcp;

template <std::size_t N>
std::array<std::byte, N> bytes_of(std::string_view s) {
    REQUIRE(s.size() == N);
    std::array<std::byte, N> b{};
    std::memcpy(b.data(), s.data(), N);
    return b;
}

// The reference's example line, with its NUL: 108 bytes.
constexpr std::string_view example_line =
    "0000:0010:002da6:38f9aa:00201200:00007f67c0644240:00:00:00:00:00:00:00:00:00:00:ff:ff:0b:00:00:48:00000000:\0"sv;

qp_info example_info() {
    qp_info q;
    q.lid = 0;
    q.out_reads = 0x10;
    q.qpn = 0x2da6;
    q.psn = 0x38f9aa;
    q.rkey = 0x00201200;
    q.vaddr = 0x00007f67c0644240;
    q.gid = {std::byte{0}, std::byte{0}, std::byte{0},    std::byte{0},    std::byte{0},    std::byte{0},
             std::byte{0}, std::byte{0}, std::byte{0},    std::byte{0},    std::byte{0xff}, std::byte{0xff},
             std::byte{0x0b}, std::byte{0}, std::byte{0}, std::byte{0x48}};
    q.srqn = 0;
    return q;
}

// A peer on a free local port that accepts one connection and runs `script` on it.
template <class F>
struct fake_peer {
    asio::io_context io;
    tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
    std::thread t;
    explicit fake_peer(F script) {
        t = std::thread([this, script] {
            tcp::socket s(io);
            acceptor.accept(s);
            script(s);
        });
    }
    std::uint16_t port() const { return acceptor.local_endpoint().port(); }
    ~fake_peer() { t.join(); }
};

void send_raw(tcp::socket& s, std::string_view bytes) { asio::write(s, asio::buffer(bytes.data(), bytes.size())); }
template <std::size_t N>
void send_raw(tcp::socket& s, const std::array<std::byte, N>& b) {
    asio::write(s, asio::buffer(b.data(), b.size()));
}
void drain(tcp::socket& s, std::size_t n) {
    std::string b(n, '\0');
    asio::read(s, asio::buffer(b.data(), n));
}

}  // namespace

TEST_CASE("exchange: version, sys data, MTU golden bytes", "[unit][perf]") {
    const auto v = encode_version("6.06");
    CHECK(v == bytes_of<16>(std::string_view("6.06\0\0\0\0\0\0\0\0\0\0\0\0", 16)));
    CHECK(decode_version(v).value() == Approx(6.06));
    CHECK(decode_version(bytes_of<16>(std::string_view("6.29\0\0\0\0\0\0\0\0\0\0\0\0", 16))).value() == Approx(6.29));
    CHECK(decode_version(bytes_of<16>(std::string_view("5.70\0\0\0\0\0\0\0\0\0\0\0\0", 16))).has_value());
    CHECK(decode_version(bytes_of<16>(std::string_view("5.60\0\0\0\0\0\0\0\0\0\0\0\0", 16))).error() ==
          "peer sent version 5.60, expected 5.70 or later (perftest refuses older peers too)");
    CHECK(decode_version(bytes_of<16>(std::string_view("GET / HTTP/1.1\r\n", 16))).error() ==
          "peer sent version 'GET / HTTP/1.1\\x0d\\x0a', expected a perftest version such as 6.06");
    CHECK_THROWS_AS(encode_version("0123456789abcdef"), std::invalid_argument);

    CHECK(encode_u32(4096) == std::array<std::byte, 4>{std::byte{0}, std::byte{0}, std::byte{0x10}, std::byte{0}});
    CHECK(encode_u32(64) == std::array<std::byte, 4>{std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0x40}});
    CHECK(decode_u32(encode_u32(0x12345678)) == 0x12345678);

    CHECK(encode_mtu(3) == std::array<std::byte, 2>{std::byte{'3'}, std::byte{0}});
    CHECK(encode_mtu(5) == std::array<std::byte, 2>{std::byte{'5'}, std::byte{0}});
    CHECK(decode_mtu(encode_mtu(4)).value() == 4);
    CHECK(decode_mtu(bytes_of<2>("6\0"sv)).error() == "peer sent MTU '6\\0', expected an ibv_mtu value 1..5 and a NUL");
    CHECK(decode_mtu(bytes_of<2>("33")).error() == "peer sent MTU '33', expected an ibv_mtu value 1..5 and a NUL");
    CHECK_THROWS_AS(encode_mtu(0), std::invalid_argument);
    CHECK(ibv_mtu_of(1024) == 3);
    CHECK(mtu_bytes_of(5) == 4096);
    CHECK(mtu_bytes_of(3) == 1024);
}

TEST_CASE("exchange: the BW report's fields are big-endian (hton_64, hton_double)", "[unit][perf]") {
    CHECK(encode_u64(0x0102030405060708ull) == std::array<std::byte, 8>{std::byte{1}, std::byte{2}, std::byte{3},
                                                                        std::byte{4}, std::byte{5}, std::byte{6},
                                                                        std::byte{7}, std::byte{8}});
    // 1.0 is 0x3ff0000000000000
    CHECK(encode_double(1.0) == std::array<std::byte, 8>{std::byte{0x3f}, std::byte{0xf0}, std::byte{0}, std::byte{0},
                                                         std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}});
    CHECK(decode_double(encode_double(1234.5678)) == 1234.5678);
}

TEST_CASE("exchange: the 108-byte QP line of the reference's example", "[unit][perf]") {
    REQUIRE(example_line.size() == qp_line_bytes);
    const auto line = encode_qp(example_info());
    CHECK(line == bytes_of<108>(example_line));
    const auto back = decode_qp(line);
    REQUIRE(back.has_value());
    CHECK(*back == example_info());

    qp_info big;
    big.lid = 0xffff;
    big.out_reads = 0xffff;
    big.qpn = 0xffffff;
    big.psn = 0xffffff;
    big.rkey = 0xffffffff;
    big.vaddr = ~0ull;
    big.gid.fill(std::byte{0xff});
    big.srqn = 0xffffffff;
    CHECK(decode_qp(encode_qp(big)).value() == big);
    big.qpn = 0x1000000;
    CHECK_THROWS_AS(encode_qp(big), std::invalid_argument);
}

TEST_CASE("exchange: a garbled QP line is an error naming the field", "[unit][perf]") {
    std::string bad(example_line);
    bad[12] = 'g';  // in the qpn
    auto r = decode_qp(bytes_of<108>(bad));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("field 3 is not 6 hex digits and ':'") != std::string::npos);
    CHECK(r.error().starts_with("peer sent QP info '0000:0010:00gda6"));

    std::string no_colon(example_line);
    no_colon[4] = '-';
    CHECK(decode_qp(bytes_of<108>(no_colon)).error().find("field 1 is not 4 hex digits") != std::string::npos);

    std::string no_nul(example_line);
    no_nul[107] = 'x';
    CHECK(decode_qp(bytes_of<108>(no_nul)).error().find("no NUL at byte 108") != std::string::npos);

    // perftest's line without a GID (59 bytes) padded out: not what a RoCE peer sends
    std::string short_form = "0000:0010:002da6:38f9aa:00201200:00007f67c0644240:00000000";
    short_form.resize(108, '\0');
    CHECK_FALSE(decode_qp(bytes_of<108>(short_form)).has_value());
}

TEST_CASE("exchange: the peer's MAC from its link-local GID", "[unit][perf]") {
    // function 0 of the model: MAC 02:00:00:00:00:01 -> GID fe80::0000:00ff:fe00:0001
    std::array<std::byte, 16> gid{std::byte{0xfe}, std::byte{0x80}, std::byte{0}, std::byte{0}, std::byte{0},
                                  std::byte{0},    std::byte{0},    std::byte{0}, std::byte{0}, std::byte{0},
                                  std::byte{0},    std::byte{0xff}, std::byte{0xfe}, std::byte{0}, std::byte{0},
                                  std::byte{1}};
    CHECK(mac_from_gid(gid).value() ==
          std::array<std::byte, 6>{std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1}});
    // an IPv4-mapped GID carries no MAC
    const auto mapped = example_info().gid;
    CHECK(mac_from_gid(mapped).error().starts_with("peer GID 0000:0000:0000:0000:0000:ffff:0b00:0048 carries no MAC"));
}

TEST_CASE("exchange: a full setup between a server and a client channel", "[unit][perf]") {
    asio::io_context probe;
    tcp::acceptor a(probe, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    const std::uint16_t port = a.local_endpoint().port();
    a.close();  // a free port for channel::accept

    std::expected<setup_result, std::string> server_setup;
    std::expected<qp_info, std::string> server_saw;
    std::expected<bw_report_wire, std::string> server_report;
    std::string server_accept_error;   // checked after the join: Catch2 asserts on one thread only
    std::thread server([&] {
        auto c = channel::accept(port, 5s);
        if (!c) {
            server_accept_error = c.error();
            return;
        }
        server_setup = exchange_setup(*c, 5, 2s);
        qp_info mine = example_info();
        mine.qpn = 0x99;
        server_saw = exchange_qp(*c, mine, 2s);
        server_report = exchange_bw_report(*c, bw_report_wire{}, 2s);  // the passive side sends zeros
    });
    auto c = channel::connect("127.0.0.1", port, 5s);  // retries until the server listens
    REQUIRE(c.has_value());
    auto s = exchange_setup(*c, 3, 2s);
    auto peer = exchange_qp(*c, example_info(), 2s);
    auto zeros = exchange_bw_report(*c, bw_report_wire{65536, 5000, 11234.5, 11000.25, 0.176}, 2s);
    server.join();
    REQUIRE(server_accept_error.empty());
    REQUIRE(server_report.has_value());
    CHECK(server_report->size == 65536);
    CHECK(server_report->iters == 5000);
    CHECK(server_report->bw_peak == 11234.5);
    CHECK(server_report->bw_avg == 11000.25);
    CHECK(server_report->msg_rate == 0.176);
    REQUIRE(zeros.has_value());
    CHECK(zeros->size == 0);
    REQUIRE(s.has_value());
    REQUIRE(server_setup.has_value());
    CHECK(s->mtu == 3);  // the min of 3 and 5
    CHECK(server_setup->mtu == 3);
    CHECK(s->page_size == 4096);
    CHECK(s->cache_line == 64);
    CHECK(s->peer_version == Approx(6.06));
    REQUIRE(peer.has_value());
    CHECK(peer->qpn == 0x99);
    REQUIRE(server_saw.has_value());
    CHECK(*server_saw == example_info());
}

TEST_CASE("exchange: a truncated, garbled, old or silent peer is an error, not a hang", "[unit][perf]") {
    SECTION("truncated version") {
        fake_peer p([](tcp::socket& s) {
            drain(s, 16);
            send_raw(s, std::string_view("6.0", 3));
        });
        auto c = channel::connect("127.0.0.1", p.port(), 2s);
        REQUIRE(c.has_value());
        auto r = exchange_setup(*c, 3, 2s);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().starts_with("peer sent 3 of the 16 bytes of the version and closed the connection"));
    }
    SECTION("old version") {
        fake_peer p([](tcp::socket& s) {
            drain(s, 16);
            send_raw(s, encode_version("5.50"));
        });
        auto c = channel::connect("127.0.0.1", p.port(), 2s);
        REQUIRE(c.has_value());
        CHECK(exchange_setup(*c, 3, 2s).error() ==
              "peer sent version 5.50, expected 5.70 or later (perftest refuses older peers too)");
    }
    SECTION("garbled MTU") {
        fake_peer p([](tcp::socket& s) {
            drain(s, 16);
            send_raw(s, encode_version("6.29"));
            drain(s, 4);
            send_raw(s, encode_u32(4096));
            drain(s, 4);
            send_raw(s, encode_u32(128));
            drain(s, 2);
            send_raw(s, "x\0"sv);
        });
        auto c = channel::connect("127.0.0.1", p.port(), 2s);
        REQUIRE(c.has_value());
        CHECK(exchange_setup(*c, 3, 2s).error() == "peer sent MTU 'x\\0', expected an ibv_mtu value 1..5 and a NUL");
    }
    SECTION("short QP line") {
        fake_peer p([](tcp::socket& s) {
            drain(s, 108);
            send_raw(s, example_line.substr(0, 59));
        });
        auto c = channel::connect("127.0.0.1", p.port(), 2s);
        REQUIRE(c.has_value());
        auto r = exchange_qp(*c, example_info(), 2s);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().starts_with("peer sent 59 of the 108 bytes of QP info and closed the connection"));
    }
    SECTION("silent peer") {
        fake_peer p([](tcp::socket& s) {
            drain(s, 16);
            std::this_thread::sleep_for(600ms);  // answers nothing, then closes
        });
        auto c = channel::connect("127.0.0.1", p.port(), 2s);
        REQUIRE(c.has_value());
        const auto t0 = std::chrono::steady_clock::now();
        auto r = exchange_setup(*c, 3, 200ms);
        CHECK(std::chrono::steady_clock::now() - t0 < 500ms);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error() == "timeout after 200 ms waiting for the version from the peer");
    }
}

TEST_CASE("exchange: a version or a figure that is no finite number is refused", "[unit][perf]") {
    for (const char* v : {"nan", "inf", "-inf", "infinity", "NAN"}) {
        INFO(v);
        const auto r = decode_version(encode_version(v));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error() == std::string("peer sent version '") + v + "', expected a perftest version such as 6.06");
    }
    CHECK(decode_version(encode_version("6.06")).value() == Approx(6.06));
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    for (const auto& [peak, avg, rate, what] : {std::tuple{nan, 1.0, 1.0, "peak"}, {1.0, inf, 1.0, "average"},
                                                {1.0, 1.0, -1.0, "message rate"}}) {
        INFO(what);
        fake_peer p([peak = peak, avg = avg, rate = rate](tcp::socket& s) {
            for (const auto& field : {encode_u64(65536), encode_u64(5000), encode_double(peak), encode_double(avg),
                                      encode_double(rate)}) {
                drain(s, 8);
                send_raw(s, field);
            }
        });
        auto c = channel::connect("127.0.0.1", p.port(), 2s);
        REQUIRE(c.has_value());
        const auto r = exchange_bw_report(*c, bw_report_wire{}, 2s);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().starts_with("peer sent "));
        CHECK(r.error().ends_with(std::string(" as the BW report's ") + what + ", expected a finite figure of 0 or more"));
    }
}

TEST_CASE("exchange: no server, and no client, within the deadline", "[unit][perf]") {
    asio::io_context probe;
    tcp::acceptor a(probe, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    const std::uint16_t port = a.local_endpoint().port();
    a.close();
    auto c = channel::connect("127.0.0.1", port, 300ms);
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error() == "connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused (for 300 ms)");
    auto s = channel::accept(port, 200ms);
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error() == "no client connected to port " + std::to_string(port) + " within 200 ms");
}

TEST_CASE("exchange: ctx_close_connection of 6.06 is the handshake, \"done\\0\", then the end", "[unit][perf]") {
    std::string after;  // what the peer read after its handshake, until our FIN
    {
        fake_peer p([&](tcp::socket& s) {  // a 6.06 server: the line, its line, "done", close
            drain(s, 108);
            send_raw(s, example_line);
            send_raw(s, "done\0"sv);
            s.shutdown(tcp::socket::shutdown_send);
            boost::system::error_code e;
            std::array<char, 64> b{};
            while (!e) {
                const std::size_t n = s.read_some(asio::buffer(b), e);
                after.append(b.data(), e ? 0 : n);
            }
        });
        auto c = channel::connect("127.0.0.1", p.port(), 2s);
        REQUIRE(c.has_value());
        const auto t0 = std::chrono::steady_clock::now();
        REQUIRE(close_connection(*c, example_info(), 2s).has_value());
        CHECK(std::chrono::steady_clock::now() - t0 < 1s);  // the peer's FIN ends the wait
    }
    CHECK(after == "done\0"sv);
}

TEST_CASE("exchange: peer_stopped sees the peer's next message, and its close", "[unit][perf]") {
    SECTION("a message") {
        fake_peer p([](tcp::socket& s) {
            std::this_thread::sleep_for(100ms);
            send_raw(s, "x"sv);
            drain(s, 1);
        });
        auto c = channel::connect("127.0.0.1", p.port(), 2s);
        REQUIRE(c.has_value());
        CHECK_FALSE(c->peer_stopped());
        std::this_thread::sleep_for(200ms);
        CHECK(c->peer_stopped());
        CHECK(c->send(std::array<std::byte, 1>{}, "a byte", 1s).has_value());
    }
    SECTION("the end") {
        fake_peer p([](tcp::socket&) {});  // accepts and closes
        auto c = channel::connect("127.0.0.1", p.port(), 2s);
        REQUIRE(c.has_value());
        std::this_thread::sleep_for(100ms);
        CHECK(c->peer_stopped());
    }
}

TEST_CASE("protocol: perftest 6.06's plan per test, and the passive side's bound", "[unit][perf]") {
    using rig::perf::test_kind;
    CHECK(plan_of(test_kind::write_bw).report);
    CHECK(plan_of(test_kind::write_bw).server_passive);
    CHECK_FALSE(plan_of(test_kind::write_bw).sync_before_size);
    CHECK(plan_of(test_kind::read_bw).report);
    CHECK(plan_of(test_kind::send_bw).h0_between_rounds);
    CHECK(plan_of(test_kind::send_bw).sync_after_size_all);
    CHECK_FALSE(plan_of(test_kind::send_lat).sync_after_size_all);
    CHECK(plan_of(test_kind::send_lat).sync_before_size);
    CHECK(plan_of(test_kind::write_lat).h0_before_lines);
    CHECK_FALSE(plan_of(test_kind::write_lat).close);
    CHECK(plan_of(test_kind::read_lat).h0_before_lines);
    CHECK(plan_of(test_kind::read_lat).server_passive);
    CHECK_FALSE(plan_of(test_kind::read_lat).report);

    rig::perf::options o;
    o.iterations = 1000;
    o.queue_pairs = 2;
    // 2 x 1000 x (1 ms + 1 MiB at 1 MiB/s = 1 s) = 2002 s, plus the margin (issue 16: a perftest
    // client on Soft-RoCE in a TCG guest ran read_bw -a -n 5 past the 10.8 s a 100 MiB/s bound gave)
    CHECK(passive_wait(o, {1u << 20}, 10000ms) == 2012000ms);
    o.queue_pairs = 1;
    o.iterations = 5;
    std::vector<std::uint64_t> all;
    for (std::uint64_t s = 2; s <= (1u << 23); s *= 2) {
        all.push_back(s);
    }
    // -a -n 5: 5 x (23 ms + 16 MiB - 2 B at 1 MiB/s) = 80.1 s, plus the margin
    CHECK(passive_wait(o, all, 10000ms) > 90000ms);
    o.duration = std::chrono::seconds(5);
    CHECK(passive_wait(o, {65536}, 10000ms) == 15000ms);
}

TEST_CASE("exchange: --bind: the server listens on that address only, on that port", "[unit][perf]") {
    asio::io_context probe;
    tcp::acceptor a(probe, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    const std::uint16_t port = a.local_endpoint().port();
    a.close();
    std::expected<channel, std::string> server_side = std::unexpected("not run");
    std::thread server([&] { server_side = channel::accept(port, 5s, std::string("127.0.0.1")); });
    auto c = channel::connect("127.0.0.1", port, 5s);  // retries until the server listens
    server.join();
    REQUIRE(c.has_value());
    REQUIRE(server_side.has_value());
    // a bad address is the caller's error, said before any socket
    auto bad = channel::accept(port, 100ms, std::string("no-address"));
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().starts_with("listen on no-address: "));
}
