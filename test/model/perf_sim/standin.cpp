// A stand-in for rig-perf that drives run_with_sim as rig-perf's main does, with a TCP
// ping-pong instead of a benchmark: the session tests need a client and a server that really
// reach their model functions and each other, and that can be made to run long or fail.
//
//   perf-sim-standin [-D S] [-p PORT] [--family F] [--standin-fail]   client: runs the session
//   perf-sim-standin ... -d vfio-user:PATH -p PORT         server (started by the session)
//
// The client prints "client DEVICE" and the server's "server DEVICE" answer; with -D it then
// prints "running" and sleeps S seconds. The server ends when the client closes.
// --standin-fail: the server exits 3 at once.
// Env RIG_PERF_STANDIN_START_MS: the session's start deadline (default: run_with_sim's own).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "driver/function.hpp"
#include "tools/rig-perf/sim_session.hpp"

namespace {

using namespace std::chrono_literals;

// The device is a live model function: its config space answers with Mellanox's vendor id
// (mlx5) or Broadcom's (bnxt).
bool device_answers(const std::string& device) {
    auto f = rig::driver::open(device);
    if (!f) {
        std::fprintf(stderr, "standin: %s: %s\n", device.c_str(), f.error().message.c_str());
        return false;
    }
    auto vendor = (*f)->config_read16(0);
    return vendor && (*vendor == 0x15b3 || *vendor == 0x14e4);
}

int serve(const std::string& device, std::uint16_t port) {
    if (!device_answers(device)) {
        return 4;
    }
    const int l = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0) {
        std::fprintf(stderr, "standin: listen on %u: %s\n", port, std::strerror(errno));
        return 5;
    }
    pollfd p{l, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) {
        std::fprintf(stderr, "standin: no client within 10 s\n");
        return 6;
    }
    const int c = ::accept(l, nullptr, nullptr);
    char ping[4];
    if (::recv(c, ping, sizeof ping, MSG_WAITALL) != 4 || std::memcmp(ping, "ping", 4) != 0) {
        return 7;
    }
    const std::string answer = "server " + device + "\n";
    if (::send(c, answer.data(), answer.size(), 0) != static_cast<ssize_t>(answer.size())) {
        return 8;
    }
    // like perftest's closing handshake: the server ends when the client is done
    char rest[16];
    while (::recv(c, rest, sizeof rest, 0) > 0) {
    }
    ::close(c);
    ::close(l);
    return 0;
}

int client(const rig::perf::options& o) {
    std::printf("client %s\n", o.device.c_str());
    if (!device_answers(o.device) || o.server != "127.0.0.1") {
        return 9;
    }
    const auto until = std::chrono::steady_clock::now() + 10s;
    int fd = -1;
    for (;;) {  // the server may still be starting
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(o.port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
            break;
        }
        ::close(fd);
        if (std::chrono::steady_clock::now() > until) {
            std::fprintf(stderr, "standin: no server on port %u\n", o.port);
            return 10;
        }
        std::this_thread::sleep_for(10ms);
    }
    if (::send(fd, "ping", 4, 0) != 4) {
        return 11;
    }
    std::string answer;  // one line
    for (char ch = 0; ch != '\n';) {
        if (::recv(fd, &ch, 1, 0) != 1) {
            return 12;
        }
        answer += ch;
    }
    std::printf("%s", answer.c_str());
    if (o.duration) {
        std::printf("running\n");
        std::fflush(stdout);
        std::this_thread::sleep_for(*o.duration);
    }
    ::close(fd);
    std::fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    rig::perf::options o;
    std::string device;
    bool fail = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "-d" && i + 1 < args.size()) {
            device = args[++i];
        } else if (args[i] == "-p" && i + 1 < args.size()) {
            o.port = static_cast<std::uint16_t>(std::stoul(args[++i]));
        } else if (args[i] == "-D" && i + 1 < args.size()) {
            o.duration = std::chrono::seconds(std::stoul(args[++i]));
        } else if (args[i] == "--family" && i + 1 < args.size()) {
            o.sim_family = args[++i];   // --sim's functions, as rig-perf's --family
        } else if (args[i] == "--standin-fail") {
            fail = true;
        }
    }
    if (!device.empty()) {
        if (fail) {
            std::fprintf(stderr, "standin: server failing on purpose\n");
            return 3;
        }
        return serve(device, o.port);
    }
    o.sim = true;
    if (const char* ms = std::getenv("RIG_PERF_STANDIN_START_MS"); ms != nullptr) {
        rig::perf::sim_setup setup;
        setup.nicsim = rig::perf::find_nicsim();
        setup.server = "/proc/self/exe";
        setup.start_deadline = std::chrono::milliseconds(std::atoi(ms));
        return rig::perf::run_with_sim(o, args, client, setup);
    }
    return rig::perf::run_with_sim(o, args, client);
}
