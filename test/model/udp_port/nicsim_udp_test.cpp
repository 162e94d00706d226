// rig-nicsim's --udp, --first-mac and --fault-udp as a user meets them: listed by --help, bad
// values refused with one line and exit 2, a bind failure exit 1 naming the address and why,
// the UDP and wire counters printed on SIGUSR2 and at exit. Every wait has a deadline.
#include <poll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "test/model/child_process.hpp"
#include "test/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;

std::string nicsim() {
    const char* p = std::getenv("RIG_NICSIM");
    REQUIRE(p != nullptr);
    return p;
}

// A rig-nicsim child in a fresh socket directory: its output read until `want` shows up or the
// deadline passes.
struct model {
    rig::test::temp_dir dir{"rig-nicsim-udp"};
    rig::test::child c;
    std::string out;
    int status = -1;

    explicit model(std::vector<std::string> args) {
        args.insert(args.end(), {"--socket-dir", dir.path});
        c = rig::test::spawn_child(nicsim(), args);
    }
    ~model() {
        if (status == -1) {
            ::kill(c.pid, SIGKILL);
            ::waitpid(c.pid, &status, 0);
        }
        ::close(c.output);
    }
    // Reads until `want` is in the output (true), or end of file or 10 s (false).
    bool wait_for(const std::string& want) {
        const auto by = std::chrono::steady_clock::now() + 10s;
        while (out.find(want) == std::string::npos) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(by - std::chrono::steady_clock::now());
            pollfd p{c.output, POLLIN, 0};
            if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1) {
                return false;
            }
            char b[4096];
            const ssize_t n = ::read(c.output, b, sizeof b);
            if (n <= 0) {
                return false;
            }
            out.append(b, static_cast<std::size_t>(n));
        }
        return true;
    }
    // Its exit status once it ended by itself (within 10 s; else killed, -1).
    int exit_status() {
        wait_for("\x01never");   // to end of file
        const auto by = std::chrono::steady_clock::now() + 10s;
        while (::waitpid(c.pid, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > by) {
                return -1;
            }
            std::this_thread::sleep_for(5ms);
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
};

void refused(const std::vector<std::string>& args, int code, const std::vector<std::string>& says) {
    model m(args);
    const int rc = m.exit_status();
    INFO(m.out);
    CHECK(rc == code);
    CHECK(m.out.rfind("rig-nicsim: ", 0) == 0);
    CHECK(m.out.find('\n') == m.out.size() - 1);   // one line
    for (const std::string& s : says) {
        CHECK(m.out.find(s) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("rig-nicsim --help lists the UDP options", "[nicsim][udp]") {
    model m({"--help"});
    CHECK(m.exit_status() == 0);
    for (const char* option : {"--udp LOCAL,PEER", "--first-mac MAC", "--fault-udp K", "SIGUSR2"}) {
        CHECK(m.out.find(option) != std::string::npos);
    }
}

TEST_CASE("rig-nicsim refuses bad --udp, --first-mac and --fault-udp values with one line", "[nicsim][udp]") {
    refused({"--udp", "127.0.0.1:40000"}, 2, {"--udp", "'127.0.0.1:40000'", "LOCAL_IP:PORT,PEER_IP:PORT"});
    refused({"--udp", "127.0.0.1:40000,localhost:40001"}, 2, {"--udp", "'localhost' is not an IPv4 address"});
    refused({"--udp", "127.0.0.1:40000,127.0.0.1:0"}, 2, {"--udp", "'0' is not a port"});
    refused({"--first-mac", "03:00:00:00:00:01"}, 2, {"--first-mac", "multicast"});
    refused({"--first-mac", "02:00:00:00:00"}, 2, {"--first-mac", "six hex bytes"});
    refused({"--first-mac", "02:00:00:ff:ff:ff", "--functions", "2"}, 2, {"--first-mac", "ff:ff:ff"});
    refused({"--fault-udp", "0", "--drop", "0.1"}, 2, {"--fault-udp 0", "none given"});
    refused({"--udp", "127.0.0.1:40000,127.0.0.1:40001", "--fault-udp", "1"}, 2, {"--fault-udp 1", "0..0"});
}

TEST_CASE("rig-nicsim that cannot bind its UDP port exits 1 naming the address and why", "[nicsim][udp]") {
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t n = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0);
    const std::string taken = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    refused({"--udp", taken + ",127.0.0.1:9"}, 1, {"cannot bind UDP " + taken, "Address already in use"});
    ::close(fd);
}

TEST_CASE("rig-nicsim prints its UDP and wire counters on SIGUSR2 and at exit", "[nicsim][udp]") {
    model m({"--udp", "127.0.0.1:0,127.0.0.1:9", "--first-mac", "02:00:00:00:01:01", "--functions", "2"});
    REQUIRE(m.wait_for(".sock\n"));
    ::kill(m.c.pid, SIGUSR2);
    CHECK(m.wait_for("UDP port=0 local=127.0.0.1:"));
    CHECK(m.wait_for("peer=127.0.0.1:9 in=0 in_bytes=0 out=0 out_bytes=0 not_for_us=0 malformed=0 send_errors=0"));
    CHECK(m.wait_for("WIRE transmitted=0 "));
    const std::size_t seen = m.out.size();
    ::kill(m.c.pid, SIGTERM);
    CHECK(m.exit_status() == 0);
    CHECK(m.out.find("UDP port=0 ", seen) != std::string::npos);
    CHECK(m.out.find("WIRE ", seen) != std::string::npos);
}
