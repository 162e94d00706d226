#pragma once
// tools/rig-nicsim as a test runs it: a child process serving functions of the family under test
// (RIG_TEST_FAMILY: mlx5, bnxt, or mixed: mlx5 and bnxt in turn) on sockets in a fresh directory, its stdout and stderr read on a thread of ours so that a test can wait for
// a line it prints (the socket paths, a fault as it fires), and the pcap files it writes read
// back. The binary's path comes from the RIG_NICSIM environment variable (set by meson).
#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "test/model/child_process.hpp"

#include "test/model/qp_api/served_nics.hpp"
#include "test/model/served_model.hpp"

namespace rig::test {

inline std::string nicsim_binary() {
    const char* p = std::getenv("RIG_NICSIM");
    REQUIRE(p != nullptr);
    return p;
}

class nicsim_process {
public:
    using clock = std::chrono::steady_clock;

    // rig-nicsim --family F --functions N --socket-dir <fresh dir> `extra`, served once it
    // printed every socket path (bounded: 10 s).
    explicit nicsim_process(const std::vector<std::string>& extra, unsigned functions = 2) {
        std::vector<std::string> args = {"--family", family_argument(), "--functions", std::to_string(functions),
                                         "--socket-dir", _dir.dir};
        args.insert(args.end(), extra.begin(), extra.end());
        spawn(args);
        for (unsigned k = 0; k < functions; ++k) {
            INFO(output());
            REQUIRE(wait_for(socket(k) + "\n", std::chrono::seconds(10)));
        }
        served_at = clock::now();
    }
    // A child still running is killed (SIGKILL) and reaped.
    ~nicsim_process() {
        if (_status < 0) {
            ::kill(_pid, SIGKILL);
            int st = 0;
            ::waitpid(_pid, &st, 0);
        }
        if (_reader.joinable()) {
            _reader.join();
        }
    }
    nicsim_process(const nicsim_process&) = delete;
    nicsim_process& operator=(const nicsim_process&) = delete;

    const std::string& dir() const noexcept { return _dir.dir; }
    static std::string family_argument() {
        switch (family_under_test()) {
        case family::mlx5: return "mlx5";
        case family::bnxt: return "bnxt";
        case family::mixed: break;
        }
        return "mlx5,bnxt";
    }
    std::string socket(unsigned k) const {
        const char* family = family_of(static_cast<std::uint16_t>(k)) == family::mlx5 ? "mlx5" : "bnxt";
        return _dir.dir + "/" + family + "-" + std::to_string(k) + ".sock";
    }
    std::string where(unsigned k) const { return "vfio-user:" + socket(k); }

    // Everything the child wrote so far, stdout and stderr interleaved.
    std::string output() const {
        std::lock_guard g(_lock);
        return _out;
    }
    // true once the output holds `text` (from byte `from` on), false at the bound.
    bool wait_for(std::string_view text, std::chrono::milliseconds bound, std::size_t from = 0) const {
        std::unique_lock g(_lock);
        return _grew.wait_for(g, bound, [&] {
            return _out.find(text, std::min(from, _out.size())) != std::string::npos || _eof;
        }) && _out.find(text, std::min(from, _out.size())) != std::string::npos;
    }
    void signal(int sig) const { REQUIRE(::kill(_pid, sig) == 0); }
    // The child's wait status once it ended (within `bound`), or -1.
    int wait_exit(std::chrono::milliseconds bound) {
        const auto end = clock::now() + bound;
        while (_status < 0) {
            int st = 0;
            const pid_t r = ::waitpid(_pid, &st, WNOHANG);
            REQUIRE(r >= 0);
            if (r == _pid) {
                _status = st;
                break;
            }
            if (clock::now() >= end) {
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        return _status;
    }
    // SIGINT, then the exit code of a clean exit (-1: it did not exit normally within 10 s).
    int stop() {
        signal(SIGINT);
        const int st = wait_exit(std::chrono::seconds(10));
        return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }

    clock::time_point served_at;  // when the test saw every socket served (timed faults count from about here)

private:
    void spawn(const std::vector<std::string>& args) {
        const child c = spawn_child(nicsim_binary(), args);
        _pid = c.pid;
        _reader = std::thread([this, fd = c.output] {
            std::array<char, 4096> b;
            for (ssize_t n; (n = ::read(fd, b.data(), b.size())) > 0;) {
                std::lock_guard g(_lock);
                _out.append(b.data(), static_cast<std::size_t>(n));
                _grew.notify_all();
            }
            ::close(fd);
            std::lock_guard g(_lock);
            _eof = true;
            _grew.notify_all();
        });
    }

    temp_socket _dir;
    pid_t _pid = -1;
    int _status = -1;  // wait status once reaped
    mutable std::mutex _lock;
    mutable std::condition_variable _grew;
    std::string _out;
    bool _eof = false;
    std::thread _reader;
};

// The permanent MAC rig-nicsim gives function k: 02:00:00:00:HH:LL with HHLL = k + 1.
inline std::array<std::byte, 6> nicsim_mac(unsigned k) {
    return {std::byte{0x02}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte((k + 1) >> 8),
            std::byte((k + 1) & 0xff)};
}

// One record of a pcap file (LINKTYPE_ETHERNET, microsecond stamps).
struct captured_frame {
    std::int64_t us = 0;  // system clock, microseconds since the epoch
    std::vector<std::byte> bytes;
    std::array<std::byte, 6> dst() const { return mac_at(0); }
    std::array<std::byte, 6> src() const { return mac_at(6); }
    std::array<std::byte, 6> mac_at(std::size_t at) const {
        std::array<std::byte, 6> m{};
        if (bytes.size() >= at + 6) {
            std::memcpy(m.data(), bytes.data() + at, 6);
        }
        return m;
    }
};

// Every frame of a pcap file written in host byte order (as sim::roce::wire::capture writes it).
inline std::vector<captured_frame> read_pcap(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(all.size() >= 24);
    std::uint32_t magic = 0;
    std::memcpy(&magic, all.data(), 4);
    REQUIRE(magic == 0xa1b2c3d4u);
    std::vector<captured_frame> out;
    std::size_t at = 24;
    while (at + 16 <= all.size()) {
        std::uint32_t h[4];
        std::memcpy(h, all.data() + at, sizeof h);
        at += 16;
        REQUIRE(at + h[2] <= all.size());
        captured_frame f;
        f.us = std::int64_t{h[0]} * 1000000 + h[1];
        f.bytes.resize(h[2]);
        std::memcpy(f.bytes.data(), all.data() + at, h[2]);
        at += h[2];
        out.push_back(std::move(f));
    }
    CHECK(at == all.size());  // no record cut short
    return out;
}

inline std::int64_t system_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace rig::test
