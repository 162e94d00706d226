// abi/roce against two independent readers: Wireshark's dissector (tshark reads every field of
// frames we encode) and an ICRC oracle written after Linux rxe_icrc.c (icrc_oracle.py, zlib's
// CRC-32). Plus round trips, every decode error, and encode refusals that leave the buffer as it was.
#include <arpa/inet.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/roce/packet.hpp"

namespace {

namespace roce = rig::roce;
using roce::opcode;

struct sample {
    roce::route net;
    roce::transport bth;
    std::vector<std::byte> payload;
    std::vector<std::byte> frame;
};

roce::gid ipv4_gid(std::uint32_t a) {
    roce::gid g{};
    g[10] = g[11] = std::byte{0xff};
    for (int i = 0; i < 4; ++i) {
        g[static_cast<std::size_t>(12 + i)] = static_cast<std::byte>(a >> (24 - 8 * i));
    }
    return g;
}

std::vector<sample> make_samples(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    auto u = [&](std::uint64_t max) { return std::uniform_int_distribution<std::uint64_t>(0, max)(rng); };
    std::vector<sample> out;
    for (std::size_t i = 0; i < n; ++i) {
        sample s;
        std::uint8_t op;
        do {
            op = static_cast<std::uint8_t>(u(0x17));
        } while (!roce::known(op));
        s.bth.op = static_cast<opcode>(op);
        s.bth.solicited = u(1) != 0;
        s.bth.ack_req = u(1) != 0;
        s.bth.pkey = static_cast<std::uint16_t>(i % 3 == 0 ? roce::default_pkey : u(0xffff));
        s.bth.dest_qp = static_cast<std::uint32_t>(i % 7 == 0 ? roce::psn_mask : u(roce::psn_mask));
        s.bth.psn = static_cast<std::uint32_t>(i % 11 == 0 ? roce::psn_mask : u(roce::psn_mask));
        s.bth.becn = u(1) != 0;
        s.bth.va = i % 5 == 0 ? ~0ull : u(~0ull);
        s.bth.rkey = static_cast<std::uint32_t>(u(0xffffffff));
        s.bth.dma_length = static_cast<std::uint32_t>(i % 13 == 0 ? 0x80000000u : u(0xffffffff));
        s.bth.syndrome = static_cast<std::uint8_t>(u(0x7f));
        s.bth.msn = static_cast<std::uint32_t>(u(roce::psn_mask));
        s.bth.immediate = static_cast<std::uint32_t>(u(0xffffffff));
        s.bth.invalidate_rkey = static_cast<std::uint32_t>(u(0xffffffff));
        for (auto& b : s.net.src_mac) b = static_cast<std::byte>(u(255) & 0xfe);  // unicast
        for (auto& b : s.net.dst_mac) b = static_cast<std::byte>(u(255) & 0xfe);
        if (i % 2 == 0) {
            s.net.src_gid = ipv4_gid(0x0a000000u | static_cast<std::uint32_t>(u(0xffffff)));
            s.net.dst_gid = ipv4_gid(0xc0a80000u | static_cast<std::uint32_t>(u(0xffff)));
        } else {
            s.net.src_gid[0] = std::byte{0xfe};
            s.net.src_gid[1] = std::byte{0x80};
            for (std::size_t k = 8; k < 16; ++k) s.net.src_gid[k] = static_cast<std::byte>(u(255));
            s.net.dst_gid[0] = std::byte{0x20};
            s.net.dst_gid[1] = std::byte{0x01};
            for (std::size_t k = 2; k < 16; ++k) s.net.dst_gid[k] = static_cast<std::byte>(u(255));
            s.net.flow_label = static_cast<std::uint32_t>(u(0xfffff));
        }
        s.net.udp_src_port = static_cast<std::uint16_t>(0xc000 | u(0x3fff));
        s.net.traffic_class = static_cast<std::uint8_t>(u(255));
        s.net.hop_limit = static_cast<std::uint8_t>(1 + u(254));
        if (roce::carries_payload(s.bth.op)) {
            const std::size_t len = i % 17 == 0 ? 0 : (i % 19 == 0 ? 4096 : u(300));
            s.payload.resize(len);
            for (auto& b : s.payload) b = static_cast<std::byte>(u(255));
        }
        s.frame.resize(roce::frame_bytes(s.net, s.bth.op, s.payload.size()));
        REQUIRE(roce::encode(s.net, s.bth, s.payload, s.frame) == s.frame.size());
        out.push_back(std::move(s));
    }
    return out;
}

std::string write_pcap(const std::vector<sample>& samples) {
    char path[] = "/tmp/rig-roce-XXXXXX.pcap";
    const int fd = ::mkstemps(path, 5);
    REQUIRE(fd >= 0);
    ::close(fd);
    std::ofstream f(path, std::ios::binary);
    auto put32 = [&](std::uint32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
    auto put16 = [&](std::uint16_t v) { f.write(reinterpret_cast<const char*>(&v), 2); };
    put32(0xa1b2c3d4);  // little-endian host: the pcap is written in host order, as libpcap does
    put16(2);
    put16(4);
    put32(0);
    put32(0);
    put32(65535);
    put32(1);  // LINKTYPE_ETHERNET
    for (std::size_t i = 0; i < samples.size(); ++i) {
        const auto& s = samples[i];
        put32(static_cast<std::uint32_t>(i));
        put32(0);
        put32(static_cast<std::uint32_t>(s.frame.size()));
        put32(static_cast<std::uint32_t>(s.frame.size()));
        f.write(reinterpret_cast<const char*>(s.frame.data()), static_cast<std::streamsize>(s.frame.size()));
    }
    return path;
}

std::vector<std::string> run_lines(const std::string& command) {
    std::vector<std::string> lines;
    FILE* p = ::popen(command.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 65536> buf;
    std::string cur;
    std::size_t got;
    while ((got = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
        cur.append(buf.data(), got);
    }
    const int status = ::pclose(p);
    INFO(command);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    std::istringstream in(cur);
    std::string line;
    while (std::getline(in, line)) {
        lines.push_back(line);
    }
    return lines;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == sep) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

std::string mac_text(const roce::mac_address& m) {
    char b[18];
    std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", unsigned(m[0]), unsigned(m[1]), unsigned(m[2]),
                  unsigned(m[3]), unsigned(m[4]), unsigned(m[5]));
    return b;
}
std::string ip_text(const roce::gid& g) {
    char b[INET6_ADDRSTRLEN];
    if (roce::is_ipv4_mapped(g)) {
        REQUIRE(::inet_ntop(AF_INET, g.data() + 12, b, sizeof b) != nullptr);
    } else {
        REQUIRE(::inet_ntop(AF_INET6, g.data(), b, sizeof b) != nullptr);
    }
    return b;
}
std::string hex_bytes(std::span<const std::byte> p) {
    std::string s;
    char b[3];
    for (auto x : p) {
        std::snprintf(b, sizeof b, "%02x", unsigned(x));
        s += b;
    }
    return s;
}
std::uint64_t num(const std::string& s) { return std::stoull(s, nullptr, 0); }
std::uint64_t hex_num(const std::string& s) { return std::stoull(s, nullptr, 16); }
bool is_send(opcode op) {
    const auto v = static_cast<unsigned>(op);
    return v <= 0x05 || op == opcode::send_last_inv || op == opcode::send_only_inv;
}

}  // namespace

TEST_CASE("tshark reads every header field of 600 encoded frames as encoded") {
    const auto samples = make_samples(600, 4791);
    const std::string pcap = write_pcap(samples);
    const char* fields[] = {"eth.dst", "eth.src", "eth.type", "ip.src", "ip.dst", "ip.dsfield", "ip.ttl",
                            "ip.checksum.status", "ipv6.src", "ipv6.dst", "ipv6.tclass", "ipv6.flow",
                            "ipv6.hlim", "udp.srcport", "udp.dstport", "udp.length",
                            "infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.padcnt",
                            "infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.a",
                            "infiniband.bth.psn", "infiniband.reth.va", "infiniband.reth.r_key",
                            "infiniband.reth.dmalen", "infiniband.aeth.syndrome", "infiniband.aeth.msn",
                            "infiniband.immdt", "infiniband.ieth", "infiniband.invariant.crc",
                            "data.data", "infiniband.payload"};
    std::string cmd = "tshark -r " + pcap + " -o ip.check_checksum:TRUE -T fields -E separator='|' -E occurrence=f";
    for (const char* f : fields) {
        cmd += std::string(" -e ") + f;
    }
    const auto lines = run_lines(cmd + " 2>/dev/null");
    std::remove(pcap.c_str());
    REQUIRE(lines.size() == samples.size());
    std::size_t icrc_shown = 0;
    for (std::size_t i = 0; i < samples.size(); ++i) {
        const auto& s = samples[i];
        const auto v = split(lines[i], '|');
        REQUIRE(v.size() == std::size(fields));
        INFO("frame " << i << " " << roce::to_string(s.bth.op) << ": " << lines[i]);
        const bool v4 = roce::is_ipv4_mapped(s.net.dst_gid);
        CHECK(v[0] == mac_text(s.net.dst_mac));
        CHECK(v[1] == mac_text(s.net.src_mac));
        CHECK(num(v[2]) == (v4 ? 0x0800u : 0x86ddu));
        if (v4) {
            CHECK(v[3] == ip_text(s.net.src_gid));
            CHECK(v[4] == ip_text(s.net.dst_gid));
            CHECK(num(v[5]) == s.net.traffic_class);
            CHECK(num(v[6]) == s.net.hop_limit);
            CHECK(v[7] == "1");  // Wireshark verified the header checksum: good
        } else {
            CHECK(v[8] == ip_text(s.net.src_gid));
            CHECK(v[9] == ip_text(s.net.dst_gid));
            CHECK(num(v[10]) == s.net.traffic_class);
            CHECK(num(v[11]) == s.net.flow_label);
            CHECK(num(v[12]) == s.net.hop_limit);
        }
        CHECK(num(v[13]) == s.net.udp_src_port);
        CHECK(num(v[14]) == 4791);
        CHECK(num(v[15]) == s.frame.size() - 14 - (v4 ? 20 : 40));
        CHECK(num(v[16]) == static_cast<unsigned>(s.bth.op));
        CHECK(num(v[17]) == (s.bth.solicited ? 1u : 0u));
        CHECK(num(v[18]) == (4 - s.payload.size() % 4) % 4);
        CHECK(num(v[19]) == s.bth.pkey);
        CHECK(num(v[20]) == s.bth.dest_qp);
        CHECK(num(v[21]) == (s.bth.ack_req ? 1u : 0u));
        CHECK(num(v[22]) == s.bth.psn);
        const auto x = roce::extensions_of(s.bth.op);
        const bool atomic = x.atomic_bytes == 28;
        // Wireshark shows the AtomicETH's VA and R_Key with the RETH's field names; Rig leaves
        // the AtomicETH zero (it posts no atomics), so those read 0.
        CHECK(v[23].empty() == !(x.reth || atomic));
        if (atomic) {
            CHECK(num(v[23]) == 0);
            CHECK(num(v[24]) == 0);
        }
        if (x.reth) {
            CHECK(num(v[23]) == s.bth.va);
            CHECK(num(v[24]) == s.bth.rkey);
            CHECK(num(v[25]) == s.bth.dma_length);
        }
        CHECK(v[26].empty() == !x.aeth);
        if (x.aeth) {
            CHECK(num(v[26]) == s.bth.syndrome);
            CHECK(num(v[27]) == s.bth.msn);
        }
        CHECK(v[28].empty() == !x.immdt);
        if (x.immdt) {
            CHECK(hex_num(v[28]) == s.bth.immediate);
        }
        CHECK(v[29].empty() == !x.ieth);
        if (x.ieth) {
            CHECK(hex_num(v[29]) == s.bth.invalidate_rkey);
        }
        // Wireshark 4.0 leaves out the ICRC and the payload of some SENDs (without payload, and
        // some with Invalidate); the rxe oracle below checks every ICRC. Where Wireshark shows
        // them they must be ours, and for WRITE and READ responses it always shows them.
        if (!v[30].empty()) {
            ++icrc_shown;
            // shown as a big-endian number of the four bytes; we store the CRC little-endian
            const auto stored = rig::abi::load_be<std::uint32_t>(s.frame.data() + s.frame.size() - 4);
            CHECK(num(v[30]) == stored);
        } else {
            CHECK(is_send(s.bth.op));
        }
        const std::string shown = v[31] + v[32];
        if (!s.payload.empty() && (!shown.empty() || !is_send(s.bth.op))) {
            CHECK(shown.substr(0, s.payload.size() * 2) == hex_bytes(s.payload));
        }
    }
    CHECK(icrc_shown * 10 >= samples.size() * 9);
}

TEST_CASE("the ICRC equals Linux rxe's, computed independently, and a flipped byte breaks it") {
    auto samples = make_samples(300, 17);
    // corrupt every tenth frame after its ICRC was computed: the oracle must call those bad
    for (std::size_t i = 0; i < samples.size(); i += 10) {
        auto& f = samples[i].frame;
        f[f.size() - 5] ^= std::byte{0x01};
    }
    const std::string pcap = write_pcap(samples);
    const auto lines = run_lines(std::string("python3 ") + RIG_ICRC_ORACLE + " " + pcap);
    std::remove(pcap.c_str());
    REQUIRE(lines.size() == samples.size());
    for (std::size_t i = 0; i < samples.size(); ++i) {
        INFO("frame " << i << ": " << lines[i]);
        if (i % 10 == 0) {
            CHECK(lines[i].rfind("bad", 0) == 0);
            const auto d = roce::decode(samples[i].frame);
            REQUIRE_FALSE(d.has_value());
            CHECK(d.error() == roce::decode_error::bad_icrc);
        } else {
            CHECK(lines[i] == "ok");
        }
    }
}

TEST_CASE("decode gives back what encode was given") {
    for (const auto& s : make_samples(400, 99)) {
        const auto d = roce::decode(s.frame);
        REQUIRE(d.has_value());
        CHECK(d->net.src_mac == s.net.src_mac);
        CHECK(d->net.dst_mac == s.net.dst_mac);
        CHECK(d->net.src_gid == s.net.src_gid);
        CHECK(d->net.dst_gid == s.net.dst_gid);
        CHECK(d->net.udp_src_port == s.net.udp_src_port);
        CHECK(d->net.traffic_class == s.net.traffic_class);
        CHECK(d->net.hop_limit == s.net.hop_limit);
        CHECK(d->bth.op == s.bth.op);
        CHECK(d->bth.psn == s.bth.psn);
        CHECK(d->bth.dest_qp == s.bth.dest_qp);
        CHECK(d->bth.pkey == s.bth.pkey);
        CHECK(d->bth.ack_req == s.bth.ack_req);
        CHECK(d->bth.becn == s.bth.becn);
        const auto x = roce::extensions_of(s.bth.op);
        if (x.reth) {
            CHECK(d->bth.va == s.bth.va);
            CHECK(d->bth.rkey == s.bth.rkey);
            CHECK(d->bth.dma_length == s.bth.dma_length);
        }
        if (x.aeth) {
            CHECK(d->bth.syndrome == s.bth.syndrome);
            CHECK(d->bth.msn == s.bth.msn);
        }
        REQUIRE(d->payload.size() == s.payload.size());
        CHECK(std::equal(d->payload.begin(), d->payload.end(), s.payload.begin()));
    }
}

TEST_CASE("decode names what is wrong with a frame") {
    roce::route net;
    net.src_gid = ipv4_gid(0x0a000001);
    net.dst_gid = ipv4_gid(0x0a000002);
    roce::transport t;
    t.op = opcode::send_only;
    t.dest_qp = 0x12;
    const std::vector<std::byte> payload(10, std::byte{0x5a});
    std::vector<std::byte> good(roce::frame_bytes(net, t.op, payload.size()));
    roce::encode(net, t, payload, good);
    REQUIRE(roce::decode(good).has_value());
    using E = roce::decode_error;
    auto expect = [&](auto mutate, E e) {
        auto f = good;
        mutate(f);
        const auto d = roce::decode(f);
        REQUIRE_FALSE(d.has_value());
        CHECK(d.error() == e);
        CHECK_FALSE(roce::to_string(d.error()).empty());
    };
    expect([](auto& f) { f.resize(40); }, E::truncated);
    expect([](auto& f) { f[12] = std::byte{0x08}; f[13] = std::byte{0x06}; }, E::not_ip);  // ARP
    expect([](auto& f) { f[14 + 8] ^= std::byte{1}; }, E::bad_ip_header);                  // TTL without checksum
    expect([](auto& f) { f[14 + 6] |= std::byte{0x20}; }, E::bad_ip_header);               // more fragments
    expect([](auto& f) { f[14 + 20 + 3] ^= std::byte{1}; }, E::not_roce_port);
    expect([](auto& f) { f[14 + 20 + 5] ^= std::byte{4}; }, E::bad_udp_length);
    expect([](auto& f) { f[14 + 28 + 1] |= std::byte{0x01}; }, E::bad_transport_version);
    expect([](auto& f) { f[14 + 28] = std::byte{0x15}; }, E::unknown_opcode);
    expect([](auto& f) { f[14 + 28 + 12] ^= std::byte{0xff}; }, E::bad_icrc);
    // the variant fields are outside the ICRC: ECN marking on the way keeps the packet valid
    auto marked = good;
    marked[14 + 28 + 4] |= std::byte{0x40};  // BECN
    REQUIRE(roce::decode(marked).has_value());
    CHECK(roce::decode(marked)->bth.becn);
}

TEST_CASE("encode refuses what does not fit and leaves the buffer as it was") {
    roce::route net;
    net.src_gid = ipv4_gid(0x0a000001);
    net.dst_gid = ipv4_gid(0x0a000002);
    roce::transport t;
    std::vector<std::byte> out(2000, std::byte{0xee});
    const auto before = out;
    const std::vector<std::byte> payload(100, std::byte{1});
    t.op = opcode::read_request;
    CHECK_THROWS_WITH(roce::encode(net, t, payload, out), Catch::Contains("carries no payload"));
    t.op = opcode::send_only;
    t.psn = 1u << 24;
    CHECK_THROWS_WITH(roce::encode(net, t, payload, out), Catch::Contains("24-bit"));
    t.psn = 0;
    CHECK_THROWS_WITH(roce::encode(net, t, payload, std::span(out).first(60)), Catch::Contains("does not fit"));
    net.dst_gid[0] = std::byte{0xfe};
    CHECK_THROWS_WITH(roce::encode(net, t, payload, out), Catch::Contains("mix"));
    t.op = static_cast<opcode>(0x15);
    CHECK_THROWS_WITH(roce::encode(net, t, {}, out), Catch::Contains("not an RC opcode"));
    CHECK(out == before);
}

TEST_CASE("PSN arithmetic wraps at 2^24 and compares in a 2^23 window") {
    CHECK(roce::psn_add(0xffffff, 1) == 0);
    CHECK(roce::psn_add(0xfffffe, 5) == 3);
    CHECK(roce::psn_diff(3, 0xfffffe) == 5);
    CHECK(roce::psn_diff(0xfffffe, 3) == -5);
    CHECK(roce::psn_diff(0x7fffff, 0) == 0x7fffff);
    CHECK(roce::psn_diff(0x800000, 0) == -0x800000);
    CHECK(roce::syndrome(roce::ack_kind::nak, 2) == 0x62);
    CHECK(roce::kind_of(0x62) == roce::ack_kind::nak);
    CHECK(roce::value_of(0x31) == 0x11);
}
