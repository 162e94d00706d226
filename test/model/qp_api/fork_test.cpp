// fork() of a process with an open NIC (issue 18, "Tests"): the child inherits none of the NIC's
// DMA memory (MADV_DONTFORK, as rdma-core's ibv_fork_init) and every descriptor the NIC opened
// closes on exec; the parent's transfers go on, its buffers written after the fork (which would
// have gone copy-on-write, away from the device, were the memory private) landing at the peer.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

std::set<int> open_fds() {
    std::set<int> fds;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        fds.insert(std::stoi(e.path().filename().string()));
    }
    return fds;
}

// In the child (async-signal-safe calls only): is the page at `p` mapped?
bool mapped(const void* p) {
    unsigned char v = 0;
    void* page = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{4095});
    return ::mincore(page, 4096, &v) == 0;
}

}  // namespace

TEST_CASE("fork: the child holds none of the NIC's DMA memory, its descriptors close on exec, the parent "
          "goes on", "[model][fork]") {
    const std::set<int> before = open_fds();
    rig::test::two_served_nics t(64 * 1024);
    // Every descriptor opened since (the NICs', and the in-process models' own) closes on exec.
    for (const int fd : open_fds()) {
        if (before.contains(fd)) {
            continue;
        }
        const int flags = ::fcntl(fd, F_GETFD);
        if (flags < 0) {
            continue;   // the directory listing's own descriptor, closed since
        }
        INFO("fd " << fd << " -> " << std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd)).string());
        CHECK((flags & FD_CLOEXEC) != 0);
    }
    std::memset(t.r1.data(), 0x11, 4096);
    t.a.write(t.r1, 0, 4096, t.r2.remote(0));
    rig::test::expect_done(t.a, rig::side::send, 4096);
    REQUIRE(mapped(t.r1.data()));

    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // Neither region is in the child's address space; exit says so (no Catch here).
        ::_exit(mapped(t.r1.data()) || mapped(t.r2.data()) ? 1 : 0);
    }
    // The parent writes its buffer after the fork and sends it: the device reads the same pages.
    for (int round = 0; round < 8; ++round) {
        std::memset(t.r1.data(), 0x20 + round, 4096);
        t.a.write(t.r1, 0, 4096, t.r2.remote(8192));
        rig::test::expect_done(t.a, rig::side::send, 4096);
        CHECK(std::memcmp(t.r1.data(), t.r2.data() + 8192, 4096) == 0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);   // 1: the child could reach the NIC's memory
}
