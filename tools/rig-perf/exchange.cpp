// perftest's out-of-band exchange (exchange.hpp): the message codecs, and one TCP connection
// with Boost.Asio whose every operation runs under a deadline (the io_context runs for at most
// the time left; an operation still pending then is cancelled and reported as a timeout).
#include "tools/rig-perf/exchange.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>  // before Asio: boost/asio/awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <fmt/format.h>

#include <sys/socket.h>


namespace rig::perf {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Lower-case hex of v in exactly `digits` digits (printf "%0Nx").
void put_hex(std::string& out, std::uint64_t v, int digits) {
    for (int i = digits - 1; i >= 0; --i) {
        out += "0123456789abcdef"[(v >> (4 * i)) & 0xf];
    }
}

// What the peer sent, for an error message: printable ASCII as is, the rest escaped.
std::string printable(std::span<const std::byte> b) {
    std::string s;
    for (std::byte x : b) {
        const auto c = std::to_integer<unsigned char>(x);
        if (c == 0) {
            s += "\\0";
        } else if (c >= 0x20 && c < 0x7f) {
            s += static_cast<char>(c);
        } else {
            s += "\\x";
            put_hex(s, c, 2);
        }
    }
    return s;
}

}  // namespace

std::array<std::byte, version_bytes> encode_version(std::string_view version) {
    if (version.size() >= version_bytes) {
        throw std::invalid_argument("encode_version: '" + std::string(version) + "' is over 15 characters");
    }
    std::array<std::byte, version_bytes> b{};
    std::memcpy(b.data(), version.data(), version.size());
    return b;
}

std::expected<double, std::string> decode_version(std::span<const std::byte, version_bytes> b) {
    // perftest reads it with atof(): digits and one dot before the first NUL.
    const auto* p = reinterpret_cast<const char*>(b.data());
    const std::size_t n = std::find(p, p + version_bytes, '\0') - p;
    double v = 0;
    auto [end, ec] = std::from_chars(p, p + n, v);
    if (n == 0 || n == version_bytes || ec != std::errc{} || end != p + n) {
        return std::unexpected("peer sent version '" + printable(b) + "', expected a perftest version such as 6.06");
    }
    // from_chars takes "nan" and "inf" as numbers (and NaN passes every comparison); a version is
    // neither
    if (!std::isfinite(v)) {
        return std::unexpected("peer sent version '" + std::string(p, n) + "', expected a perftest version such as 6.06");
    }
    if (v < oldest_peer_version) {
        return std::unexpected("peer sent version " + std::string(p, n) +
                               ", expected 5.70 or later (perftest refuses older peers too)");
    }
    return v;
}

std::array<std::byte, 4> encode_u32(std::uint32_t v) {
    return {std::byte(v >> 24), std::byte(v >> 16), std::byte(v >> 8), std::byte(v)};
}
std::uint32_t decode_u32(std::span<const std::byte, 4> b) noexcept {
    std::uint32_t v = 0;
    for (std::byte x : b) {
        v = v << 8 | std::to_integer<std::uint32_t>(x);
    }
    return v;
}
std::array<std::byte, 8> encode_u64(std::uint64_t v) {
    std::array<std::byte, 8> b{};
    for (int i = 0; i < 8; ++i) {
        b[static_cast<std::size_t>(i)] = std::byte(v >> (56 - 8 * i));
    }
    return b;
}
std::uint64_t decode_u64(std::span<const std::byte, 8> b) noexcept {
    std::uint64_t v = 0;
    for (std::byte x : b) {
        v = v << 8 | std::to_integer<std::uint64_t>(x);
    }
    return v;
}
std::array<std::byte, 8> encode_double(double v) { return encode_u64(std::bit_cast<std::uint64_t>(v)); }
double decode_double(std::span<const std::byte, 8> b) noexcept { return std::bit_cast<double>(decode_u64(b)); }

std::array<std::byte, mtu_bytes> encode_mtu(int ibv_mtu) {
    if (ibv_mtu < 1 || ibv_mtu > 5) {
        throw std::invalid_argument("encode_mtu: " + std::to_string(ibv_mtu) + " is no ibv_mtu value (1..5)");
    }
    return {std::byte('0' + ibv_mtu), std::byte{0}};
}

std::expected<int, std::string> decode_mtu(std::span<const std::byte, mtu_bytes> b) {
    const auto c = std::to_integer<char>(b[0]);
    if (c < '1' || c > '5' || b[1] != std::byte{0}) {
        return std::unexpected("peer sent MTU '" + printable(b) + "', expected an ibv_mtu value 1..5 and a NUL");
    }
    return c - '0';
}

std::array<std::byte, qp_line_bytes> encode_qp(const qp_info& q) {
    if (q.lid > 0xffff || q.out_reads > 0xffff || q.qpn > 0xffffff || q.psn > 0xffffff) {
        throw std::invalid_argument("encode_qp: lid or out_reads over 16 bits, or qpn or psn over 24 bits");
    }
    std::string s;
    put_hex(s, q.lid, 4);
    s += ':';
    put_hex(s, q.out_reads, 4);
    s += ':';
    put_hex(s, q.qpn, 6);
    s += ':';
    put_hex(s, q.psn, 6);
    s += ':';
    put_hex(s, q.rkey, 8);
    s += ':';
    put_hex(s, q.vaddr, 16);
    s += ':';
    for (std::byte g : q.gid) {
        put_hex(s, std::to_integer<std::uint8_t>(g), 2);
        s += ':';
    }
    put_hex(s, q.srqn, 8);
    s += ':';
    std::array<std::byte, qp_line_bytes> b{};  // the last byte stays the NUL
    std::memcpy(b.data(), s.data(), s.size());
    return b;
}

std::expected<qp_info, std::string> decode_qp(std::span<const std::byte, qp_line_bytes> b) {
    const auto* p = reinterpret_cast<const char*>(b.data());
    auto bad = [&](const std::string& why) {
        return std::unexpected("peer sent QP info '" + printable(b) + "': " + why +
                               ", expected lid:out_reads:qpn:psn:rkey:vaddr:gid[16]:srqn: (108 bytes)");
    };
    // Field widths of KEY_PRINT_FMT_GID, each followed by ':'; the 108th byte is the NUL.
    constexpr std::array<int, 23> widths{4, 4, 6, 6, 8, 16, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 8};
    std::array<std::uint64_t, 23> v{};
    std::size_t at = 0;
    for (std::size_t f = 0; f < widths.size(); ++f) {
        const auto w = static_cast<std::size_t>(widths[f]);
        auto [end, ec] = std::from_chars(p + at, p + at + w, v[f], 16);
        if (ec != std::errc{} || end != p + at + w || p[at + w] != ':' || p[at] == '-' || p[at] == '+') {
            return bad("field " + std::to_string(f + 1) + " is not " + std::to_string(w) + " hex digits and ':'");
        }
        at += w + 1;
    }
    if (at != qp_line_bytes - 1 || p[at] != '\0') {
        return bad("no NUL at byte 108");
    }
    qp_info q;
    q.lid = static_cast<std::uint32_t>(v[0]);
    q.out_reads = static_cast<std::uint32_t>(v[1]);
    q.qpn = static_cast<std::uint32_t>(v[2]);
    q.psn = static_cast<std::uint32_t>(v[3]);
    q.rkey = static_cast<std::uint32_t>(v[4]);
    q.vaddr = v[5];
    for (std::size_t i = 0; i < 16; ++i) {
        q.gid[i] = std::byte(static_cast<std::uint8_t>(v[6 + i]));
    }
    q.srqn = static_cast<std::uint32_t>(v[22]);
    return q;
}

std::expected<std::array<std::byte, 6>, std::string> mac_from_gid(const std::array<std::byte, 16>& gid) {
    auto at = [&](std::size_t i) { return std::to_integer<std::uint8_t>(gid[i]); };
    const bool link_local = at(0) == 0xfe && at(1) == 0x80 && at(2) == 0 && at(3) == 0 && at(4) == 0 && at(5) == 0 &&
                            at(6) == 0 && at(7) == 0;
    if (!link_local || at(11) != 0xff || at(12) != 0xfe) {
        std::string g;
        for (std::size_t i = 0; i < 16; ++i) {
            put_hex(g, at(i), 2);
            if (i % 2 == 1 && i != 15) {
                g += ':';
            }
        }
        return std::unexpected("peer GID " + g +
                               " carries no MAC (expected a link-local fe80::/64 GID built from the port's MAC; "
                               "an IPv4-mapped GID would need ARP, which rig-perf does not do)");
    }
    // Modified EUI-64: the universal/local bit of the first MAC byte is inverted.
    return std::array<std::byte, 6>{std::byte(at(8) ^ 0x02), gid[9], gid[10], gid[13], gid[14], gid[15]};
}

int ibv_mtu_of(std::uint32_t bytes) noexcept {
    switch (bytes) {
    case 256: return 1;
    case 512: return 2;
    case 1024: return 3;
    case 2048: return 4;
    case 4096: return 5;
    default: return 0;
    }
}
std::uint32_t mtu_bytes_of(int ibv_mtu) noexcept { return ibv_mtu >= 1 && ibv_mtu <= 5 ? 128u << ibv_mtu : 0; }

// ---------------------------------------------------------------------------------------------

struct channel::state {
    asio::io_context io;
    tcp::socket socket{io};

    // Runs the io_context until `done` or the deadline. At the deadline the pending operation
    // is cancelled through `cancel` (the socket or the acceptor that runs it) and its handler
    // runs with operation_aborted before this returns false: nothing is left pending.
    template <class Cancel>
    bool run_until(const bool& done, std::chrono::milliseconds wait, Cancel cancel) {
        io.restart();
        const auto by = std::chrono::steady_clock::now() + wait;
        while (!done && std::chrono::steady_clock::now() < by) {
            io.run_one_until(by);
        }
        if (!done) {
            cancel();
            io.restart();
            io.run();  // the cancelled handler
            return false;
        }
        return true;
    }
    bool run_until(const bool& done, std::chrono::milliseconds wait) {
        return run_until(done, wait, [this] {
            boost::system::error_code ignored;
            socket.cancel(ignored);
        });
    }
};

channel::channel(std::unique_ptr<state> s, bool client) : _s(std::move(s)), _client(client) {}
channel::channel(channel&&) noexcept = default;
channel& channel::operator=(channel&&) noexcept = default;
channel::~channel() { close(); }

bool channel::peer_stopped() const {
    if (!_s) {
        throw std::invalid_argument("channel::peer_stopped: closed channel");
    }
    char c = 0;
    const auto n = ::recv(_s->socket.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);  // data, EOF or reset
}

void channel::close() noexcept {
    if (_s) {
        boost::system::error_code ignored;
        _s->socket.shutdown(tcp::socket::shutdown_both, ignored);
        _s->socket.close(ignored);
    }
}

std::expected<channel, std::string> channel::accept(std::uint16_t port, std::chrono::milliseconds wait,
                                                   const std::optional<std::string>& address) {
    auto s = std::make_unique<state>();
    boost::system::error_code ec;
    tcp::acceptor acceptor(s->io);
    tcp::endpoint at(tcp::v6(), port);
    if (address) {
        const auto a = asio::ip::make_address(*address, ec);
        if (ec) {
            return std::unexpected("listen on " + *address + ": " + ec.message());
        }
        at = tcp::endpoint(a, port);
    }
    acceptor.open(at.protocol(), ec);
    if (!ec && !address) {
        acceptor.set_option(asio::ip::v6_only(false), ec);  // IPv4 clients too
    }
    if (!ec) {
        acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
        acceptor.bind(at, ec);
    }
    if (!ec) {
        acceptor.listen(1, ec);
    }
    if (ec) {
        return std::unexpected("listen on port " + std::to_string(port) + ": " + ec.message());
    }
    bool done = false;
    boost::system::error_code result;
    acceptor.async_accept(s->socket, [&](const boost::system::error_code& e) {
        result = e;
        done = true;
    });
    if (!s->run_until(done, wait, [&] {
            boost::system::error_code ignored;
            acceptor.cancel(ignored);
        })) {
        return std::unexpected("no client connected to port " + std::to_string(port) + " within " +
                               std::to_string(wait.count()) + " ms");
    }
    if (result) {
        return std::unexpected("accept on port " + std::to_string(port) + ": " + result.message());
    }
    s->socket.set_option(tcp::no_delay(true), ec);
    return channel(std::move(s), false);
}

std::expected<channel, std::string> channel::connect(const std::string& host, std::uint16_t port,
                                                     std::chrono::milliseconds wait) {
    auto s = std::make_unique<state>();
    const auto by = std::chrono::steady_clock::now() + wait;
    boost::system::error_code ec;
    tcp::resolver resolver(s->io);
    auto addresses = resolver.resolve(host, std::to_string(port), ec);
    if (ec) {
        return std::unexpected("resolve " + host + ": " + ec.message());
    }
    std::string last = "no address";
    while (std::chrono::steady_clock::now() < by) {
        bool done = false;
        boost::system::error_code result;
        asio::async_connect(s->socket, addresses, [&](const boost::system::error_code& e, const tcp::endpoint&) {
            result = e;
            done = true;
        });
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(by - std::chrono::steady_clock::now());
        if (!s->run_until(done, std::max(left, std::chrono::milliseconds(1)))) {
            last = "timeout";
            break;
        }
        if (!result) {
            s->socket.set_option(tcp::no_delay(true), ec);
            return channel(std::move(s), true);
        }
        last = result.message();
        boost::system::error_code ignored;
        s->socket.close(ignored);
        if (result != asio::error::connection_refused) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the server may be starting
    }
    return std::unexpected("connect to " + host + ":" + std::to_string(port) + ": " + last + " (for " +
                           std::to_string(wait.count()) + " ms)");
}

namespace {

std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point by) {
    return std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      by - std::chrono::steady_clock::now()));
}

}  // namespace

std::expected<void, std::string> channel::send(std::span<const std::byte> mine, std::string_view what,
                                               std::chrono::milliseconds wait) {
    if (!_s) {
        throw std::invalid_argument("channel::send: closed channel");
    }
    bool done = false;
    boost::system::error_code e;
    asio::async_write(_s->socket, asio::buffer(mine.data(), mine.size()),
                      [&](const boost::system::error_code& r, std::size_t) {
                          e = r;
                          done = true;
                      });
    if (!_s->run_until(done, wait)) {
        return std::unexpected("timeout sending " + std::string(what) + " to the peer");
    }
    if (e) {
        return std::unexpected("sending " + std::string(what) + " to the peer: " + e.message());
    }
    return {};
}

std::expected<void, std::string> channel::receive(std::span<std::byte> theirs, std::string_view what,
                                                  std::chrono::milliseconds wait) {
    return receive_by(theirs, what, std::chrono::steady_clock::now() + wait, wait);
}

std::expected<void, std::string> channel::receive_by(std::span<std::byte> theirs, std::string_view what,
                                                     std::chrono::steady_clock::time_point by,
                                                     std::chrono::milliseconds wait) {
    if (!_s) {
        throw std::invalid_argument("channel::receive: closed channel");
    }
    bool done = false;
    boost::system::error_code e;
    std::size_t got = 0;
    asio::async_read(_s->socket, asio::buffer(theirs.data(), theirs.size()),
                     [&](const boost::system::error_code& r, std::size_t n) {
                         e = r;
                         got = n;
                         done = true;
                     });
    if (!_s->run_until(done, left_until(by))) {
        return std::unexpected("timeout after " + std::to_string(wait.count()) + " ms waiting for " +
                               std::string(what) + " from the peer");
    }
    if (e == asio::error::eof || (e && got < theirs.size())) {
        return std::unexpected("peer sent " + std::to_string(got) + " of the " + std::to_string(theirs.size()) +
                               " bytes of " + std::string(what) + " and closed the connection (" + e.message() + ")");
    }
    if (e) {
        return std::unexpected("reading " + std::string(what) + " from the peer: " + e.message());
    }
    return {};
}

std::expected<void, std::string> channel::exchange(std::span<const std::byte> mine, std::span<std::byte> theirs,
                                                   std::string_view what, std::chrono::milliseconds wait) {
    const auto by = std::chrono::steady_clock::now() + wait;
    if (_client) {
        if (auto w = send(mine, what, wait); !w) {
            return w;
        }
        return receive_by(theirs, what, by, wait);
    }
    if (auto r = receive_by(theirs, what, by, wait); !r) {
        return r;
    }
    return send(mine, what, left_until(by));
}

std::size_t channel::drain(std::chrono::milliseconds wait) {
    if (!_s) {
        throw std::invalid_argument("channel::drain: closed channel");
    }
    const auto by = std::chrono::steady_clock::now() + wait;
    boost::system::error_code ignored;
    _s->socket.shutdown(tcp::socket::shutdown_send, ignored);  // our FIN: a peer that drains too ends
    std::array<std::byte, 64> sink{};
    std::size_t dropped = 0;
    while (true) {
        bool done = false;
        boost::system::error_code e;
        std::size_t got = 0;
        _s->socket.async_read_some(asio::buffer(sink.data(), sink.size()),
                                   [&](const boost::system::error_code& r, std::size_t n) {
                                       e = r;
                                       got = n;
                                       done = true;
                                   });
        if (!_s->run_until(done, left_until(by))) {
            return dropped;
        }
        dropped += got;
        if (e) {
            return dropped;  // closed (or reset): done
        }
    }
}

std::expected<setup_result, std::string> exchange_setup(channel& c, int my_mtu, std::chrono::milliseconds wait) {
    setup_result out;
    const auto mine = encode_version(our_version);
    std::array<std::byte, version_bytes> theirs{};
    if (auto e = c.exchange(mine, theirs, "the version", wait); !e) {
        return std::unexpected(e.error());
    }
    auto v = decode_version(theirs);
    if (!v) {
        return std::unexpected(v.error());
    }
    out.peer_version = *v;
    // sys data (peer >= 5.32, always true past the 5.70 check)
    std::array<std::byte, 4> rem{};
    if (auto e = c.exchange(encode_u32(page_size), rem, "the page size", wait); !e) {
        return std::unexpected(e.error());
    }
    out.page_size = std::max(page_size, decode_u32(rem));
    if (auto e = c.exchange(encode_u32(cache_line), rem, "the cache line size", wait); !e) {
        return std::unexpected(e.error());
    }
    out.cache_line = std::max(cache_line, decode_u32(rem));
    std::array<std::byte, mtu_bytes> m{};
    if (auto e = c.exchange(encode_mtu(my_mtu), m, "the MTU", wait); !e) {
        return std::unexpected(e.error());
    }
    auto peer_mtu = decode_mtu(m);
    if (!peer_mtu) {
        return std::unexpected(peer_mtu.error());
    }
    out.mtu = std::min(my_mtu, *peer_mtu);
    return out;
}

std::expected<qp_info, std::string> exchange_qp(channel& c, const qp_info& mine, std::chrono::milliseconds wait) {
    std::array<std::byte, qp_line_bytes> theirs{};
    if (auto e = c.exchange(encode_qp(mine), theirs, "QP info", wait); !e) {
        return std::unexpected(e.error());
    }
    return decode_qp(theirs);
}

std::expected<bw_report_wire, std::string> exchange_bw_report(channel& c, const bw_report_wire& mine,
                                                              std::chrono::milliseconds wait) {
    bw_report_wire out;
    std::array<std::byte, 8> b{};
    auto field = [&](const std::array<std::byte, 8>& m, const char* what) {
        return c.exchange(m, b, std::string("the BW report's ") + what, wait);
    };
    if (auto e = field(encode_u64(mine.size), "size"); !e) {
        return std::unexpected(e.error());
    }
    out.size = decode_u64(b);
    if (auto e = field(encode_u64(mine.iters), "iterations"); !e) {
        return std::unexpected(e.error());
    }
    out.iters = decode_u64(b);
    if (auto e = field(encode_double(mine.bw_peak), "peak"); !e) {
        return std::unexpected(e.error());
    }
    out.bw_peak = decode_double(b);
    if (auto e = field(encode_double(mine.bw_avg), "average"); !e) {
        return std::unexpected(e.error());
    }
    out.bw_avg = decode_double(b);
    if (auto e = field(encode_double(mine.msg_rate), "message rate"); !e) {
        return std::unexpected(e.error());
    }
    out.msg_rate = decode_double(b);
    // a figure is a finite number of zero or more: a NaN or an infinity from a peer would reach
    // the tables and the JSON report (where it is no number at all)
    for (const auto& [v, what] : {std::pair{out.bw_peak, "peak"}, {out.bw_avg, "average"}, {out.msg_rate, "message rate"}}) {
        if (!std::isfinite(v) || v < 0) {
            return std::unexpected(fmt::format("peer sent {} as the BW report's {}, expected a finite figure of 0 or more", v, what));
        }
    }
    return out;
}

std::expected<void, std::string> close_connection(channel& c, const qp_info& mine, std::chrono::milliseconds wait) {
    const auto by = std::chrono::steady_clock::now() + wait;
    if (auto h = exchange_qp(c, mine, wait); !h) {
        return std::unexpected(h.error());
    }
    const auto* d = reinterpret_cast<const std::byte*>(done_message.data());
    if (auto w = c.send(std::span<const std::byte>(d, done_message.size()), "\"done\"", left_until(by)); !w) {
        return w;
    }
    c.drain(left_until(by));
    c.close();
    return {};
}

}  // namespace rig::perf
