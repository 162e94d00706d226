// sim/roce under faults and under an independent reader: a soak of mixed operations and sizes
// through 2 % loss, 1 % duplication and jittered delay, each function polled by its own thread
// as the NIC model runs them; and a capture of a short exchange read back by tshark.
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <sstream>
#include <string>
#include <thread>

#include "test/model/roce_engine/fabric.hpp"

using namespace rig::test::roce;
namespace sr = rig::sim::roce;

namespace {

struct message {
    sr::work_op op;
    std::uint32_t bytes;
    std::uint64_t read_from;   // READ: offset in b's source
};

std::vector<message> plan_messages(std::size_t n, std::uint32_t max_bytes, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::vector<message> out;
    for (std::size_t i = 0; i < n; ++i) {
        message m;
        m.op = static_cast<sr::work_op>(g() % 3);
        const auto band = g() % 100;
        m.bytes = static_cast<std::uint32_t>(band < 40   ? 1 + g() % 64
                                             : band < 75 ? 65 + g() % 4032
                                             : band < 95 ? 4097 + g() % 61440
                                                         : 65537 + g() % (mib - 65536));
        m.bytes = 1 + (m.bytes - 1) % max_bytes;
        m.read_from = g() % (mib - m.bytes + 1);
        out.push_back(m);
    }
    return out;
}

sr::faults soak_faults() {
    sr::faults f{0.02, 0.01, 10us, 0ns};
    if (const char* e = std::getenv("RIG_SOAK_FAULTS")) {   // "drop dup delay_ns jitter_ns", to explore
        double d, u;
        long long de, ji;
        if (std::sscanf(e, "%lf %lf %lld %lld", &d, &u, &de, &ji) == 4) {
            f = {d, u, std::chrono::nanoseconds(de), std::chrono::nanoseconds(ji)};
        }
    }
    return f;
}

// Runs `count` messages a -> b with `faults` on the switch; a's and b's engines each on a thread.
void soak(std::size_t count, std::uint32_t max_bytes, const sr::faults& faults) {
    constexpr std::size_t slots = 8;
    sr::wire w;
    w.set_faults(faults);
    if (const char* pcap = std::getenv("RIG_SOAK_PCAP")) {
        w.capture(pcap);   // for a look with tshark when this fails
    }
    // a: sources in slots [0, 8 MiB), READ destinations [8, 16); b: receives [0, 8), WRITE targets [8, 16), READ source [16, 17)
    function fa(w, 1, 16 * mib), fb(w, 2, 17 * mib);
    fa.reg(1, 0, 16 * mib, sr::access_local_write);
    fb.reg(2, 0, 8 * mib, sr::access_local_write);
    fb.reg(3, 8 * mib, 9 * mib, sr::access_local_write | sr::access_remote_write | sr::access_remote_read);
    fill_random(fb.at(16 * mib, mib), 77);
    auto& a = fa.make_qp(0x10);
    auto& b = fb.make_qp(0x20);
    connect(a, fa, b, fb, {.mtu = 1024, .a_psn = 0xffff00, .timeout = 12});   // 16.8 ms: slow machines need room
    const auto plan = plan_messages(count, max_bytes, 2026);
    std::vector<std::size_t> sends;   // message numbers of the SENDs, in order
    for (std::size_t i = 0; i < count; ++i) {
        if (plan[i].op == sr::work_op::send) {
            sends.push_back(i);
        }
    }

    std::atomic<bool> stop{false};
    std::atomic<std::size_t> received{0};
    std::string b_problem;   // b's thread writes it, this one reads it after b_failed or join
    std::atomic<bool> b_failed{false};
    // b's thread: polls b's engine, keeps receives posted, checks each message it takes
    std::thread tb([&] {
        std::size_t posted = 0, taken = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            while (posted < sends.size() && posted - taken < slots) {
                if (!b.post_receive(receive(static_cast<std::uint32_t>(posted), 2, function::va((posted % slots) * mib), mib))) {
                    break;
                }
                ++posted;
            }
            const bool did = fb.eng->poll(clock::now());
            sr::completion c;
            while (b.take(sr::completion_side::receive, c)) {
                const std::size_t m = sends[taken];
                std::vector<std::byte> expect(plan[m].bytes);
                fill_random(expect, m);
                if (c.index != taken || c.status != sr::completion_status::success || c.byte_len != plan[m].bytes ||
                    checksum(fb.at((taken % slots) * mib, plan[m].bytes)) != checksum(expect)) {
                    b_problem = "receive " + std::to_string(taken) + " (message " + std::to_string(m) + "): index " +
                                std::to_string(c.index) + ", " + std::string(sr::to_string(c.status)) + ", " +
                                std::to_string(c.byte_len) + " bytes";
                    b_failed = true;
                    stop = true;
                }
                ++taken;
                received = taken;
            }
            if (!did) {
                std::this_thread::yield();
            }
        }
    });

    // this thread is a's: posts up to `slots` messages at once, checks each completion
    std::size_t posted = 0, done = 0;
    std::string a_problem;
    const auto limit = clock::now() + 90s;
    while (done < count && a_problem.empty() && !b_failed && clock::now() < limit) {
        while (posted < count && posted - done < slots) {
            const message& m = plan[posted];
            const std::uint64_t slot = (posted % slots) * mib;
            sr::send_request r;
            if (m.op == sr::work_op::read) {
                r = request(m.op, static_cast<std::uint32_t>(posted), 1, function::va(8 * mib + slot), m.bytes, 3,
                            function::va(16 * mib + m.read_from));
            } else {
                fill_random(fa.at(slot, m.bytes), posted);
                r = request(m.op, static_cast<std::uint32_t>(posted), 1, function::va(slot), m.bytes, 3,
                            function::va(8 * mib + slot));
            }
            r.signaled = posted % 5 != 4 || m.op == sr::work_op::read || posted + 1 == count;   // some silent successes
            if (!a.post_send(r)) {
                break;
            }
            ++posted;
        }
        const bool did = fa.eng->poll(clock::now());
        sr::completion c;
        while (a.take(sr::completion_side::send, c)) {
            if (a_problem.empty() && (c.status != sr::completion_status::success || c.byte_len != plan[c.index].bytes)) {
                a_problem = "completion " + std::to_string(c.index) + " (" + std::string(sr::to_string(plan[c.index].op)) +
                            ", " + std::to_string(plan[c.index].bytes) + " bytes): " + std::string(sr::to_string(c.status));
                break;
            }
            // unsignaled ones before it completed silently: check them now too
            for (; done <= c.index; ++done) {
                const message& m = plan[done];
                const std::uint64_t slot = (done % slots) * mib;
                const bool ok = m.op == sr::work_op::read
                                    ? checksum(fa.at(8 * mib + slot, m.bytes)) == checksum(fb.at(16 * mib + m.read_from, m.bytes))
                                : m.op == sr::work_op::write
                                    ? checksum(fb.at(8 * mib + slot, m.bytes)) == checksum(fa.at(slot, m.bytes))
                                    : true;   // b checks its receives
                if (!ok && a_problem.empty()) {
                    a_problem = "message " + std::to_string(done) + " (" + std::string(sr::to_string(m.op)) + ", " +
                                std::to_string(m.bytes) + " bytes) arrived wrong";
                }
            }
        }
        if (!did) {
            std::this_thread::yield();
        }
    }
    // the last receives may complete on b after a's last completion
    const auto tail = clock::now() + 5s;
    while (received.load() < sends.size() && !b_failed && clock::now() < tail) {
        std::this_thread::sleep_for(1ms);
    }
    stop = true;
    tb.join();
    INFO("a: " << a_problem << " b: " << b_problem);
    CHECK(a_problem.empty());
    CHECK(b_problem.empty());
    CHECK(done == count);
    CHECK(received.load() == sends.size());
    const auto wc = w.counters();
    INFO("b: seq NAKs " << b.counters().seq_naks_sent << ", out of sequence " << b.counters().out_of_sequence << ", duplicates " << b.counters().duplicates_received << ", received " << b.counters().packets_received << ", a received " << a.counters().packets_received);
    INFO("dropped " << wc.dropped << ", duplicated " << wc.duplicated << ", retransmitted " << a.counters().retransmitted
                    << " + " << b.counters().retransmitted << ", timeouts " << a.counters().timeouts);
    CHECK((wc.dropped > 0) == (faults.drop > 0));
    CHECK((wc.duplicated > 0) == (faults.duplicate > 0));
    CHECK(a.counters().retransmitted > 0);
    CHECK(b.counters().duplicates_received > 0);
    CHECK(a.state() == sr::qp_state::rts);
    CHECK(b.state() == sr::qp_state::rts);
    WARN("soak: " << count << " messages, " << wc.transmitted << " frames, " << wc.dropped << " dropped, "
                  << wc.duplicated << " duplicated, " << a.counters().retransmitted << " retransmitted, "
                  << a.counters().timeouts << " ack timeouts");
}

}  // namespace

TEST_CASE("soak: mixed SEND, WRITE, READ of 1 B to 1 MiB under 2% loss, 1% duplicates and delay arrive once, whole, in order") {
    soak(500, 1 << 20, soak_faults());
}

// RC assumes a fabric that keeps order; reordering costs go-back-N dearly, but loses nothing.
TEST_CASE("soak: jitter that reorders frames costs retransmissions but loses and duplicates nothing") {
    soak(150, 64 << 10, {0, 0, 5us, 2us});
}

namespace {

std::vector<std::string> run_lines(const std::string& command) {
    std::vector<std::string> lines;
    FILE* p = ::popen(command.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf;
    std::string all;
    std::size_t got;
    while ((got = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
        all.append(buf.data(), got);
    }
    const int status = ::pclose(p);
    INFO(command);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    std::istringstream in(all);
    std::string line;
    while (std::getline(in, line)) {
        lines.push_back(line);
    }
    return lines;
}

// "opcode psn syndrome" with numbers in decimal; the syndrome empty when the packet has no AETH.
std::string normalise(const std::string& line) {
    std::istringstream in(line);
    std::string f, out;
    std::size_t n = 0;
    while (std::getline(in, f, '\t')) {
        out += (n++ == 0 ? "" : " ") + (f.empty() ? std::string() : std::to_string(std::stoul(f, nullptr, 0)));
    }
    while (n++ < 3) {
        out += " ";
    }
    return out;
}

}  // namespace

TEST_CASE("a capture of a short exchange reads back in tshark as the expected opcodes, PSNs and AETH syndromes") {
    char path[] = "/tmp/rig-roce-engine-XXXXXX.pcap";
    const int fd = ::mkstemps(path, 5);
    REQUIRE(fd >= 0);
    ::close(fd);
    {
        sr::wire w;
        REQUIRE(w.capture(path));
        function fa(w, 1, mib), fb(w, 2, mib);
        fa.reg(1, 0, mib, sr::access_local_write);
        fb.reg(2, 0, mib, sr::access_local_write | sr::access_remote_read | sr::access_remote_write);
        auto& a = fa.make_qp(0x10);
        auto& b = fb.make_qp(0x20);
        connect(a, fa, b, fb, {.mtu = 1024, .a_psn = 100, .min_rnr_timer = 1});
        sr::completion c;
        auto one = [&](const sr::send_request& r) {
            REQUIRE(a.post_send(r));
            REQUIRE(run_until({&fa, &fb}, [&] { return a.take(sr::completion_side::send, c); }));
            REQUIRE(c.status == sr::completion_status::success);
        };
        REQUIRE(b.post_receive(receive(1, 2, function::va(0), 4096)));
        one(request(sr::work_op::send, 1, 1, function::va(0), 2500));
        one(request(sr::work_op::write, 2, 1, function::va(0), 10, 2, function::va(8192)));
        one(request(sr::work_op::read, 3, 1, function::va(0), 2000, 2, function::va(8192)));
        // no receive: one RNR NAK, then a receive is posted and the retry lands
        REQUIRE(a.post_send(request(sr::work_op::send, 4, 1, function::va(0), 100)));
        REQUIRE(run_until({&fa, &fb}, [&] { return a.counters().rnr_naks_received == 1; }));
        REQUIRE(b.post_receive(receive(2, 2, function::va(0), 4096)));
        REQUIRE(run_until({&fa, &fb}, [&] { return a.take(sr::completion_side::send, c); }));
        REQUIRE(c.status == sr::completion_status::success);
        w.capture("");
    }
    const auto lines = run_lines(std::string("tshark -r ") + path +
                                 " -T fields -e infiniband.bth.opcode -e infiniband.bth.psn -e infiniband.aeth.syndrome 2>/dev/null");
    std::remove(path);
    std::vector<std::string> got;
    for (const auto& l : lines) {
        got.push_back(normalise(l));
    }
    const std::vector<std::string> expected = {
        "0 100 ",   "1 101 ",  "2 102 ",  "17 102 31",            // SEND FIRST/MIDDLE/LAST, ACK
        "10 103 ",  "17 103 31",                                  // RDMA WRITE ONLY, ACK
        "12 104 ",  "13 104 31", "15 105 31",                     // READ request, responses FIRST/LAST
        "4 106 ",   "17 106 33",                                  // SEND ONLY, RNR NAK (timer code 1)
        "4 106 ",   "17 106 31",                                  // the retry, ACK
    };
    CHECK(got == expected);
}
