#pragma once
// rig-nicsim --family bnxt and rig-info as a test runs them: child processes (child_process.hpp)
// whose output is read with a deadline on every wait, stopped by their own pid.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "test/model/child_process.hpp"
#include "test/temp_dir.hpp"

namespace rig::test::bnxt_info {

using clock = std::chrono::steady_clock;

inline std::string binary(const char* variable) {
    const char* p = std::getenv(variable);
    REQUIRE(p != nullptr);
    return p;
}

// Reads `fd` into `out` until `done(out)`, end of file, or `by`; true unless the deadline passed.
template <class Done>
bool read_until(int fd, std::string& out, clock::time_point by, Done done) {
    std::array<char, 4096> b;
    while (!done(out)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(by - clock::now()).count();
        if (left <= 0) {
            return false;
        }
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left)) <= 0) {
            continue;
        }
        const ssize_t n = ::read(fd, b.data(), b.size());
        if (n <= 0) {
            return true;  // end of file
        }
        out.append(b.data(), static_cast<std::size_t>(n));
    }
    return true;
}

// The child's wait status once it ended within `bound`; SIGKILL and -1 after it.
inline int reap(pid_t pid, std::chrono::milliseconds bound) {
    const auto by = clock::now() + bound;
    for (;;) {
        int st = 0;
        const pid_t r = ::waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            return st;
        }
        if (r < 0 || clock::now() >= by) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &st, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

// rig-nicsim --family bnxt --functions N --socket-dir <fresh dir> `extra`, served once it
// printed its last socket's path (10 s); SIGTERM at the end, SIGKILL if it does not exit in 10 s.
class nicsim {
public:
    explicit nicsim(std::vector<std::string> extra, unsigned functions = 1) {
        std::vector<std::string> args = {"--family", "bnxt", "--functions", std::to_string(functions),
                                         "--socket-dir", _dir.path};
        args.insert(args.end(), extra.begin(), extra.end());
        _child = spawn_child(binary("RIG_NICSIM"), args);
        const std::string last = socket(functions - 1) + "\n";
        std::string out;
        read_until(_child.output, out, clock::now() + std::chrono::seconds(10),
                   [&](const std::string& o) { return o.find(last) != std::string::npos; });
        INFO(out);
        REQUIRE(out.find(last) != std::string::npos);
    }
    ~nicsim() {
        ::kill(_child.pid, SIGTERM);
        reap(_child.pid, std::chrono::seconds(10));
        ::close(_child.output);
    }
    nicsim(const nicsim&) = delete;
    nicsim& operator=(const nicsim&) = delete;

    std::string socket(unsigned k) const { return _dir.file("bnxt-" + std::to_string(k) + ".sock"); }
    std::string where(unsigned k) const { return "vfio-user:" + socket(k); }

private:
    temp_dir _dir{"rig-bnxt-info"};
    child _child;
};

// rig-info `args`: its exit code (-1: killed at the 60 s bound or not a normal exit) and its
// stdout and stderr together.
inline std::pair<int, std::string> rig_info(const std::vector<std::string>& args) {
    const child c = spawn_child(binary("RIG_INFO"), args);
    std::string out;
    const bool in_time = read_until(c.output, out, clock::now() + std::chrono::seconds(60),
                                    [](const std::string&) { return false; });
    ::close(c.output);
    const int st = reap(c.pid, in_time ? std::chrono::seconds(10) : std::chrono::milliseconds(0));
    return {st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, std::move(out)};
}

}  // namespace rig::test::bnxt_info
