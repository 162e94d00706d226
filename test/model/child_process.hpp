#pragma once
// A program run as a child process for a test, its stdout and stderr in one pipe (rig-nicsim,
// rig-perf). argv is built before fork: after fork in a threaded test only async-signal-safe
// calls may run in the child (dup2, close, execv, _exit).
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

namespace rig::test {

struct child {
    pid_t pid = -1;
    int output = -1;  // read end of the child's stdout + stderr
};

inline child spawn_child(const std::string& bin, const std::vector<std::string>& args) {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    std::vector<char*> argv{const_cast<char*>(bin.c_str())};
    for (const std::string& a : args) {
        argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(p[1], 1);
        ::dup2(p[1], 2);
        ::close(p[0]);
        ::close(p[1]);
        ::execv(bin.c_str(), argv.data());
        ::_exit(127);
    }
    ::close(p[1]);
    return {pid, p[0]};
}

// Everything `fd` gives until end of file; closes it.
inline std::string read_all(int fd) {
    std::string out;
    std::array<char, 4096> b;
    for (ssize_t n; (n = ::read(fd, b.data(), b.size())) > 0;) {
        out.append(b.data(), static_cast<std::size_t>(n));
    }
    ::close(fd);
    return out;
}

// The exit status and output of a run that ends by itself.
inline std::pair<int, std::string> run_to_exit(const std::string& bin, const std::vector<std::string>& args) {
    const child c = spawn_child(bin, args);
    std::string out = read_all(c.output);
    int status = 0;
    REQUIRE(::waitpid(c.pid, &status, 0) == c.pid);
    REQUIRE(WIFEXITED(status));
    return {WEXITSTATUS(status), std::move(out)};
}

}  // namespace rig::test
