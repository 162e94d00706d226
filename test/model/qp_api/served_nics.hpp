#pragma once
// mlx5 function models served in this process, each on its own vfio-user socket, for the
// public API to open by name ("vfio-user:PATH") as a program would: the API opens the driver
// itself, so nothing else connects to the socket.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <catch2/catch.hpp>

#include "qp/nic.hpp"
#include "qp/qp.hpp"
#include "qp/region.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/model/served_model.hpp"

namespace rig::test {

inline sim::mlx5::function_options quick_model(std::uint16_t index = 0) {
    sim::mlx5::function_options o;
    o.init_time = std::chrono::milliseconds(1);
    o.function_index = index;
    return o;
}

// Teardown (reverse order): the server first, whose destructor tells the function to stop
// using its DMA space (device::server_closing), then the function model.
struct served_function {
    temp_socket sock;
    sim::mlx5::function_model fn;
    std::unique_ptr<sim::vfio_user::server> srv;

    // On `w` (which must outlive it), the model runs the entries the API posts (its data path);
    // without one, entries are written and rung but never run.
    explicit served_function(sim::mlx5::function_options o = quick_model(), sim::roce::wire* w = nullptr)
        : fn(o) {
        auto s = sim::vfio_user::server::create(sock.path(), fn);
        REQUIRE(s.has_value());
        srv = std::move(*s);
        fn.attach(*srv);
        srv->start();
        if (w != nullptr) {
            fn.attach_wire(*w);
        }
    }
    served_function(const served_function&) = delete;
    served_function& operator=(const served_function&) = delete;
    std::string where() const { return "vfio-user:" + sock.path(); }

    std::unique_ptr<rig::nic> open(const nic_options& o = {}) { return open_nic(where(), o); }

    static std::unique_ptr<rig::nic> open_nic(const std::string& where, const nic_options& o) {
        auto n = rig::nic::open(where, o);
        INFO(where << ": " << (n ? std::string() : n.error().message));
        REQUIRE(n.has_value());
        return std::move(*n);
    }
};

// RIG_TEST_NICS="A,B": the two functions the tests tagged [any-nic] open instead of the models
// served in this process, e.g. two model functions a QEMU guest sees on kernel VFIO
// ("0000:00:05.0,0000:00:06.0", test/guest/), or two ports of a card. Such tests use only the
// public API, so they hold on any NIC; the others also look inside the served model.
inline std::optional<std::pair<std::string, std::string>> external_nics() {
    const char* v = std::getenv("RIG_TEST_NICS");
    if (v == nullptr || *v == '\0') {
        return std::nullopt;
    }
    const std::string s(v);
    const auto comma = s.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == s.size()) {
        FAIL("RIG_TEST_NICS is not two functions A,B: " << s);
    }
    return std::pair{s.substr(0, comma), s.substr(comma + 1)};
}

// A test's NIC k (0 or 1): RIG_TEST_NICS's when set, else the served model's.
inline std::unique_ptr<rig::nic> open_test_nic(const served_function& m, int k, const nic_options& o = {}) {
    const auto ext = external_nics();
    const std::string where = ext ? (k == 0 ? ext->first : ext->second) : m.where();
    return served_function::open_nic(where, o);
}

template <class T>
T value(rig::result<T> r) {
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r.has_value());
    return std::move(*r);
}
inline void ok(const rig::result<void>& r) {
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r.has_value());
}

// ---- shared by the seed, error and soak suites (seed_test.cpp, errors_test.cpp, soak_test.cpp)

// Two NICs of two functions on one wire, a region of `bytes` on each with access `a`, and a
// queue pair on each connected to the other. The wire is declared first: it outlives the
// functions that attach to it. With RIG_TEST_NICS set, n1 and n2 are those functions (the
// served models then stand idle: only [any-nic] tests run that way).
struct two_served_nics {
    sim::roce::wire w;
    served_function m1;
    served_function m2;
    std::unique_ptr<rig::nic> n1;
    std::unique_ptr<rig::nic> n2;
    rig::region r1, r2;
    rig::queue_pair a, b;
    explicit two_served_nics(std::size_t bytes, rig::access acc = rig::access::remote, const nic_options& o = {})
        : m1(quick_model(0), &w), m2(quick_model(1), &w), n1(open_test_nic(m1, 0, o)), n2(open_test_nic(m2, 1, o)),
          r1(value(n1->allocate(bytes, acc))), r2(value(n2->allocate(bytes, acc))),
          a(value(n1->make_qp())), b(value(n2->make_qp())) {
        ok(a.connect(b.local()));
        ok(b.connect(a.local()));
    }
};

// Waits (at most 5 s) until the function's data path has written `cqes` CQEs in all: entries
// have completed in the NIC, whether or not the API has taken their completions.
inline void await_cqes(const served_function& m, std::uint64_t cqes) {
    REQUIRE(m.fn.data_path() != nullptr);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (m.fn.data_path()->cqes_written() < cqes && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(m.fn.data_path()->cqes_written() >= cqes);
}

// The oldest due entry of `s` completes Ok with `n` bytes within `bound`.
inline void expect_done(rig::queue_pair& q, rig::side s, std::uint32_t n,
                        std::chrono::microseconds bound = std::chrono::seconds(5)) {
    auto c = q.wait(s, bound);
    REQUIRE(c.has_value());
    INFO((*c ? std::string() : c->error().message));
    REQUIRE(c->has_value());
    CHECK(**c == n);
}

// The oldest due entry of `s` completes with an error within `bound`; the error.
inline rig::error expect_failed(rig::queue_pair& q, rig::side s,
                                std::chrono::microseconds bound = std::chrono::seconds(5)) {
    auto c = q.wait(s, bound);
    REQUIRE(c.has_value());
    INFO((*c ? "Ok " + std::to_string(**c) : std::string()));
    REQUIRE_FALSE(c->has_value());
    CHECK(c->error().kind == rig::error_kind::entry);
    return c->error();
}

// A seeded pseudo-random byte pattern (splitmix64): the bytes a transfer must deliver, made
// again independently at the destination to check them.
inline std::uint64_t splitmix(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
inline void fill_pattern(std::byte* p, std::size_t n, std::uint64_t seed) noexcept {
    std::uint64_t x = seed;
    for (std::size_t i = 0; i < n; i += 8) {
        const std::uint64_t v = splitmix(x);
        for (std::size_t k = 0; k < 8 && i + k < n; ++k) {
            p[i + k] = static_cast<std::byte>(v >> (8 * k));
        }
    }
}
// The index of the first byte that differs from the pattern, or n when all match.
inline std::size_t pattern_mismatch(const std::byte* p, std::size_t n, std::uint64_t seed) noexcept {
    std::uint64_t x = seed;
    for (std::size_t i = 0; i < n; i += 8) {
        const std::uint64_t v = splitmix(x);
        for (std::size_t k = 0; k < 8 && i + k < n; ++k) {
            if (p[i + k] != static_cast<std::byte>(v >> (8 * k))) {
                return i + k;
            }
        }
    }
    return n;
}

}  // namespace rig::test
