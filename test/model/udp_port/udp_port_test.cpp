// sim/roce/udp_port: the wire's UDP port against a plain UDP socket acting as the peer (QEMU's
// -netdev socket,udp= framing: one datagram, one whole Ethernet frame, no FCS): bytes exact both
// ways, sealed; what is not for a local function dropped and counted; several ports learn and
// flood; faults and capture on the UDP port; send errors counted.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "test/model/udp_port/udp_link.hpp"
#include "test/temp_dir.hpp"

using namespace rig::test::udp;

namespace {

// A wire with one local function port (MAC 02:00:00:00:00:01) and a UDP port linking it to a
// plain socket of the test.
struct udp_link {
    sr::wire w;
    std::unique_ptr<sr::port> local = w.attach(mac(0, 1));
    peer_socket far;
    std::unique_ptr<sr::udp_port> udp;
    udp_link() {
        auto u = sr::udp_port::open(w, loopback(), far.address);
        REQUIRE(u.has_value());
        udp = std::move(*u);
        CHECK(udp->local().port != 0);
        CHECK(udp->receive_buffer() > 0);
    }
    void transmit(sr::frame* f) { local->transmit(f, sr::clock::now()); }
    void arrive(std::span<const std::byte> b) { far.send_to(udp->local(), b); }
};

}  // namespace

TEST_CASE("a frame to a MAC no function has leaves by the UDP port as one datagram: its bytes, sealed", "[udp]") {
    udp_link l;
    const auto away = mac(9, 9);
    l.transmit(model_frame(*l.local, away, 100, 1));   // unsealed, the payload in the frame
    const auto one = l.far.receive();
    REQUIRE(one.has_value());
    CHECK(*one == sealed_frame(l.local->mac(), away, 100, 1));   // the ICRC a NIC would put on it
    CHECK(rig::roce::decode(*one, rig::roce::icrc_check::verify).has_value());

    const bytes outside = payload(4096, 2);   // the payload by reference, as a queue pair sends it
    l.transmit(model_frame(*l.local, away, 4096, 2, &outside));
    const auto two = l.far.receive();
    REQUIRE(two.has_value());
    CHECK(*two == sealed_frame(l.local->mac(), away, 4096, 2));
    CHECK(l.w.counters().by_reference == 1);
    CHECK(l.w.counters().materialized == 0);   // sent from where it lies: no copy into the frame
    REQUIRE(eventually([&] { return l.udp->counters().datagrams_out == 2; }));
    const auto c = l.udp->counters();
    CHECK(c.bytes_out == one->size() + two->size());
    CHECK(c.send_errors == 0);
}

TEST_CASE("a datagram to a local MAC arrives at that function's port, whole and sealed", "[udp]") {
    udp_link l;
    const bytes b = sealed_frame(mac(9, 9), l.local->mac(), 1000, 3);
    l.arrive(b);
    sr::frame* f = receive_within(*l.local);
    REQUIRE(f != nullptr);
    CHECK(bytes_of(*f) == b);
    CHECK(f->sealed);   // the receiving engine checks the ICRC of what came from outside
    CHECK(f->payload_ref == nullptr);
    l.local->release(f);
    const auto c = l.udp->counters();
    CHECK(c.datagrams_in == 1);
    CHECK(c.bytes_in == b.size());
    CHECK(c.learned == 1);   // 02:00:00:00:09:09 lives behind the UDP port
    CHECK(l.w.counters().learned == 1);
}

TEST_CASE("broadcast, multicast, unknown unicast, runts and oversize datagrams are dropped and counted", "[udp]") {
    udp_link l;
    const sr::mac_address broadcast{std::byte{0xff}, std::byte{0xff}, std::byte{0xff},
                                    std::byte{0xff}, std::byte{0xff}, std::byte{0xff}};
    const sr::mac_address ipv6_nd{std::byte{0x33}, std::byte{0x33}, std::byte{0xff},
                                  std::byte{0}, std::byte{0}, std::byte{1}};
    l.arrive(sealed_frame(mac(9, 9), broadcast, 10, 1));
    l.arrive(sealed_frame(mac(9, 9), ipv6_nd, 10, 2));
    l.arrive(sealed_frame(mac(9, 9), mac(7, 7), 10, 3));   // unicast to no function here
    l.arrive(bytes(13, std::byte{0x02}));                  // shorter than an Ethernet header
    bytes huge(sr::frame_capacity + 1, std::byte{0x02});   // longer than a frame buffer
    l.arrive(huge);
    l.arrive(bytes(sr::frame_capacity, std::byte{0x02}));  // exactly a frame buffer, for 02:02:..: unknown
    REQUIRE(eventually([&] { return l.udp->counters().datagrams_in == 6; }));
    REQUIRE(eventually([&] { return l.udp->counters().not_for_us == 4; }));
    const auto c = l.udp->counters();
    CHECK(c.malformed == 2);
    CHECK(c.datagrams_out == 0);   // nothing goes back out (split horizon)
    CHECK(l.local->receive(sr::clock::now()) == nullptr);
    CHECK(l.w.counters().no_route == 2);
}

TEST_CASE("the data-path faults act on the UDP port: drop, link down, duplicate, delay", "[udp]") {
    udp_link l;
    const auto away = mac(9, 9);
    l.udp->set_faults({.drop = 1.0});
    l.transmit(model_frame(*l.local, away, 10, 1));
    l.arrive(sealed_frame(away, l.local->mac(), 10, 2));
    REQUIRE(eventually([&] { return l.w.counters().dropped == 2; }));
    CHECK_FALSE(l.far.receive(50ms).has_value());
    CHECK(l.local->receive(sr::clock::now()) == nullptr);

    l.udp->set_faults({});
    l.udp->set_link(false);
    l.transmit(model_frame(*l.local, away, 10, 3));
    REQUIRE(eventually([&] { return l.w.counters().dropped == 3; }));
    CHECK_FALSE(l.far.receive(50ms).has_value());
    l.udp->set_link(true);

    l.udp->set_faults({.duplicate = 1.0});
    l.transmit(model_frame(*l.local, away, 10, 4));
    const auto a = l.far.receive(), b = l.far.receive();
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(*a == *b);
    CHECK(*a == sealed_frame(l.local->mac(), away, 10, 4));

    l.udp->set_faults({.delay = 80ms});
    const auto sent = std::chrono::steady_clock::now();
    l.transmit(model_frame(*l.local, away, 10, 5));
    const auto late = l.far.receive();
    REQUIRE(late.has_value());
    CHECK(std::chrono::steady_clock::now() - sent >= 80ms);
    l.arrive(sealed_frame(away, l.local->mac(), 10, 6));   // arriving frames meet the delay too
    const auto arrived = std::chrono::steady_clock::now();
    sr::frame* f = receive_within(*l.local);
    REQUIRE(f != nullptr);
    CHECK(std::chrono::steady_clock::now() - arrived >= 70ms);
    l.local->release(f);
}

TEST_CASE("a capture holds the frames leaving by and arriving by the UDP port, sealed", "[udp]") {
    rig::test::temp_dir dir("rig-udp-port");
    const std::string path = dir.file("udp.pcap");
    const auto away = mac(9, 9);
    bytes in;
    {
        udp_link l;
        REQUIRE(l.w.capture(path));
        l.transmit(model_frame(*l.local, away, 64, 1));
        REQUIRE(l.far.receive().has_value());
        in = sealed_frame(away, l.local->mac(), 64, 2);
        l.arrive(in);
        sr::frame* f = receive_within(*l.local);
        REQUIRE(f != nullptr);
        l.local->release(f);
        l.arrive(sealed_frame(away, mac(7, 7), 64, 3));   // for no function: not captured
        REQUIRE(eventually([&] { return l.udp->counters().not_for_us == 1; }));
        l.w.capture("");
    }
    std::ifstream file(path, std::ios::binary);
    const std::string pcap((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    std::vector<bytes> records;
    for (std::size_t at = 24; at + 16 <= pcap.size();) {
        std::uint32_t header[4];
        std::memcpy(header, pcap.data() + at, sizeof header);
        const auto* b = reinterpret_cast<const std::byte*>(pcap.data() + at + 16);
        records.emplace_back(b, b + header[2]);
        at += 16 + header[2];
    }
    REQUIRE(records.size() == 2);
    CHECK(records[0] == sealed_frame(mac(0, 1), away, 64, 1));
    CHECK(records[1] == in);
}

TEST_CASE("with several UDP ports: unknown MACs are flooded, learned ones leave by their port only", "[udp]") {
    sr::wire w;
    auto local = w.attach(mac(0, 1));
    peer_socket far0, far1;
    auto u0 = sr::udp_port::open(w, loopback(), far0.address);
    auto u1 = sr::udp_port::open(w, loopback(), far1.address);
    REQUIRE(u0.has_value());
    REQUIRE(u1.has_value());
    const auto x = mac(5, 5);
    local->transmit(model_frame(*local, x, 10, 1), sr::clock::now());
    CHECK(far0.receive().has_value());
    CHECK(far1.receive().has_value());
    CHECK(w.counters().flooded == 1);

    far1.send_to((*u1)->local(), sealed_frame(x, mac(0, 1), 10, 2));   // x answers from behind port 1
    sr::frame* f = receive_within(*local);
    REQUIRE(f != nullptr);
    local->release(f);
    CHECK((*u1)->counters().learned == 1);
    local->transmit(model_frame(*local, x, 10, 3), sr::clock::now());
    CHECK(far1.receive().has_value());
    CHECK_FALSE(far0.receive(100ms).has_value());

    // what arrives by one UDP port for no function here never leaves by another
    far0.send_to((*u0)->local(), sealed_frame(mac(6, 6), x, 10, 4));
    REQUIRE(eventually([&] { return (*u0)->counters().not_for_us == 1; }));
    CHECK_FALSE(far1.receive(100ms).has_value());
}

TEST_CASE("a peer that is not listening costs send errors, counted, and the port goes on", "[udp]") {
    sr::wire w;
    auto local = w.attach(mac(0, 1));
    sr::udp_address gone;
    {
        peer_socket closed;
        gone = closed.address;
    }
    auto u = sr::udp_port::open(w, loopback(), gone);
    REQUIRE(u.has_value());
    // the first datagram draws an ICMP port unreachable; the next send or receive reports it
    REQUIRE(eventually([&] {
        local->transmit(model_frame(*local, mac(9, 9), 10, 1), sr::clock::now());
        return (*u)->counters().send_errors >= 1;
    }));
    CHECK((*u)->counters().datagrams_out >= 1);
}

TEST_CASE("a UDP port that cannot bind says which address and why", "[udp]") {
    sr::wire w;
    peer_socket taken;
    const auto u = sr::udp_port::open(w, taken.address, loopback(9));
    REQUIRE_FALSE(u.has_value());
    CHECK(u.error() == "cannot bind UDP " + sr::to_string(taken.address) + ": Address already in use");
    CHECK(sr::parse_udp_address("127.0.0.1:40000") == loopback(40000));
    CHECK_FALSE(sr::parse_udp_address("127.0.0.1:0").has_value());
    CHECK(sr::parse_udp_address("127.0.0.1:0", true) == loopback(0));
    for (const char* bad : {"127.0.0.1", "127.0.0:1", "127.0.0.256:1", "localhost:1", "1.2.3.4.5:1", "1.2.3.4:x",
                            "1.2.3.4:65536", "01.2.3.4:1", " 1.2.3.4:1"}) {
        INFO(bad);
        CHECK_FALSE(sr::parse_udp_address(bad).has_value());
    }
}

TEST_CASE("datagrams the kernel drops for want of receive buffer are counted (SO_RXQ_OVFL)", "[udp]") {
    sr::wire w;
    auto local = w.attach(mac(0, 1));
    peer_socket far;
    auto u = sr::udp_port::open(w, loopback(), far.address, 8192);   // a small buffer, on purpose
    REQUIRE(u.has_value());
    const bytes b = sealed_frame(mac(9, 9), mac(0, 1), 1000, 1);
    w.core().pause();   // the port reads nothing meanwhile: the burst overflows the socket
    for (int i = 0; i < 64; ++i) {
        far.send_to((*u)->local(), b);
    }
    w.core().resume();
    REQUIRE(eventually([&] { return (*u)->counters().datagrams_in > 0; }));
    far.send_to((*u)->local(), b);   // the count comes with an arrival after the drops
    REQUIRE(eventually([&] {
        const auto c = (*u)->counters();
        return c.kernel_drops > 0 && c.datagrams_in + c.kernel_drops == 65;
    }));
    for (sr::frame* f; (f = local->receive(sr::clock::now())) != nullptr;) {
        local->release(f);
    }
}
