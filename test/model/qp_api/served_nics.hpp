#pragma once
// Function models served in this process, each on its own vfio-user socket, for the public API
// to open by name ("vfio-user:PATH") as a program would: the API opens the driver itself, so
// nothing else connects to the socket. served_mlx5: an mlx5 model, for the suites that look
// inside it; served_function: a model of the family under test (RIG_TEST_FAMILY), for the
// data-path suites, which run once per family.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <thread>
#include <utility>

#include <catch2/catch.hpp>

#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/bnxt/datapath.hpp"
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
struct served_mlx5 {
    temp_socket sock;
    sim::mlx5::function_model fn;
    std::unique_ptr<sim::vfio_user::server> srv;

    // On `w` (which must outlive it), the model runs the entries the API posts (its data path);
    // without one, entries are written and rung but never run.
    explicit served_mlx5(sim::mlx5::function_options o = quick_model(), sim::roce::wire* w = nullptr) : fn(o) {
        auto s = sim::vfio_user::server::create(sock.path(), fn);
        REQUIRE(s.has_value());
        srv = std::move(*s);
        fn.attach(*srv);
        srv->start();
        if (w != nullptr) {
            fn.attach_wire(*w);
        }
    }
    served_mlx5(const served_mlx5&) = delete;
    served_mlx5& operator=(const served_mlx5&) = delete;
    std::string where() const { return "vfio-user:" + sock.path(); }

    std::unique_ptr<rig::nic> open(const nic_options& o = {}) { return open_nic(where(), o); }

    static std::unique_ptr<rig::nic> open_nic(const std::string& where, const nic_options& o) {
        auto n = rig::nic::open(where, o);
        INFO(where << ": " << (n ? std::string() : n.error().message));
        REQUIRE(n.has_value());
        return std::move(*n);
    }
};

// The family the data-path suites run on: RIG_TEST_FAMILY=mlx5|bnxt|mixed (meson registers each
// of them once per family, the runs named by it); mlx5 when unset. mixed: function 0 (and every
// even one) is an mlx5 function, function 1 (every odd one) a bnxt function, on one wire: RC
// between the two families, RoCEv2 their common wire.
enum class family { mlx5, bnxt, mixed };
inline family family_under_test() {
    const char* v = std::getenv("RIG_TEST_FAMILY");
    if (v == nullptr || std::string_view(v) == "mlx5") {
        return family::mlx5;
    }
    if (std::string_view(v) == "bnxt") {
        return family::bnxt;
    }
    if (std::string_view(v) == "mixed") {
        return family::mixed;
    }
    FAIL("RIG_TEST_FAMILY is none of mlx5, bnxt, mixed: " << v);
    return family::mlx5;
}
// The family of function `index` under test (mixed: even mlx5, odd bnxt).
inline family family_of(std::uint16_t index) {
    const family f = family_under_test();
    return f != family::mixed ? f : index % 2 == 0 ? family::mlx5 : family::bnxt;
}

inline sim::bnxt::function_options quick_bnxt_model(std::uint16_t index = 0) {
    sim::bnxt::function_options o;
    o.function_index = index;
    o.firmware.mac = {0x02, 0x52, 0x49, 0x47, 0x42, static_cast<std::uint8_t>(index)};  // as rig-nicsim's
    return o;
}

// A function model of the family under test (or of `f`), served as served_mlx5 serves one; what
// the data-path suites ask of it beyond the API is family-neutral here.
struct served_function {
    temp_socket sock;
    std::unique_ptr<sim::mlx5::function_model> mlx5;
    std::unique_ptr<sim::bnxt::function_model> bnxt;
    std::unique_ptr<sim::vfio_user::server> srv;

    explicit served_function(std::uint16_t index = 0, sim::roce::wire* w = nullptr) : served_function(index, w, family_of(index)) {}
    served_function(std::uint16_t index, sim::roce::wire* w, family f) {
        if (f == family::mlx5) {
            mlx5 = std::make_unique<sim::mlx5::function_model>(quick_model(index));
        } else {
            bnxt = std::make_unique<sim::bnxt::function_model>(quick_bnxt_model(index));
        }
        serve(w);
    }
    // A bnxt function with these options (the bnxt-only suites).
    served_function(sim::bnxt::function_options o, sim::roce::wire* w) {
        bnxt = std::make_unique<sim::bnxt::function_model>(std::move(o));
        serve(w);
    }
    void serve(sim::roce::wire* w) {
        sim::vfio_user::device* d = mlx5 ? static_cast<sim::vfio_user::device*>(mlx5.get()) : bnxt.get();
        auto s = sim::vfio_user::server::create(sock.path(), *d);
        REQUIRE(s.has_value());
        srv = std::move(*s);
        mlx5 ? mlx5->attach(*srv) : bnxt->attach(*srv);
        srv->start();
        if (w != nullptr) {
            mlx5 ? mlx5->attach_wire(*w) : bnxt->attach_wire(*w);
        }
    }
    served_function(const served_function&) = delete;
    served_function& operator=(const served_function&) = delete;
    ~served_function() { srv.reset(); }   // the server before the model (served_mlx5's order)

    std::string where() const { return "vfio-user:" + sock.path(); }
    std::unique_ptr<rig::nic> open(const nic_options& o = {}) { return served_mlx5::open_nic(where(), o); }

    // CQEs the function's data path has written in all (0 before it runs).
    std::uint64_t cqes_written() const {
        if (mlx5) {
            return mlx5->data_path() != nullptr ? mlx5->data_path()->cqes_written() : 0;
        }
        return bnxt->data_path() != nullptr ? bnxt->data_path()->cqes_written() : 0;
    }
    // Whether its data path still runs (it leaves the model core when its server goes).
    bool data_path_running() const { return mlx5 ? mlx5->data_path() != nullptr : bnxt->data_path() != nullptr; }
    // Firmware commands it completed: mlx5's command queue; bnxt's HWRM requests and RoCE
    // commands (CMDQ) together.
    std::uint64_t commands_completed() const {
        if (mlx5) {
            return mlx5->commands_completed();
        }
        return bnxt->commands_completed() + bnxt->with_firmware([](const auto& f) { return f.rcfw().completed; });
    }
    // The requester CQEs the NIC writes for `n` send entries rung with one doorbell: one each on
    // mlx5 (Rig signals every entry); one on bnxt (Rig signals a batch's last entry, whose CQE
    // completes the batch: CQE aggregation, docs/bnxt-data-path.md).
    std::uint64_t cqes_for_one_doorbell(std::uint64_t n) const { return mlx5 ? n : 1; }
    void die() { mlx5 ? mlx5->die() : bnxt->die(); }
    // The cable: the port's link up or down (the NIC's port event when the driver asked for it).
    bool set_link(bool up) { return mlx5 ? mlx5->set_port_state(up) : bnxt->set_link(up); }
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
template <class Served>
std::unique_ptr<rig::nic> open_test_nic(const Served& m, int k, const nic_options& o = {}) {
    const auto ext = external_nics();
    const std::string where = ext ? (k == 0 ? ext->first : ext->second) : m.where();
    return served_mlx5::open_nic(where, o);
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

// ---- the errors entries carry, by family: each family's raw code and the name its table gives

enum class failure_kind { local_length, remote_invalid_request, remote_access, retry_exceeded };
struct expected_failure {
    std::uint32_t syndrome;   // rig::error::syndrome
    const char* name;         // in the error's message
};
// mlx5: the CQE syndromes (mlx5dv.h MLX5_CQE_SYNDROME_*) and abi/mlx5's names; bnxt: the CQE
// statuses of the requester and responder tables (roce_hsi.h CQ_REQ_STATUS_*, CQ_RES_RC_STATUS_*).
inline expected_failure expected(failure_kind k, std::uint16_t function_index = 0) {
    const bool mlx5 = family_of(function_index) == family::mlx5;
    switch (k) {
    case failure_kind::local_length: return mlx5 ? expected_failure{0x01, "local length error"}
                                                 : expected_failure{0x02, "LOCAL_LENGTH_ERR"};
    case failure_kind::remote_invalid_request: return mlx5 ? expected_failure{0x12, "remote invalid request error"}
                                                           : expected_failure{0x06, "REMOTE_INVALID_REQUEST_ERR"};
    case failure_kind::remote_access: return mlx5 ? expected_failure{0x13, "remote access error"}
                                                  : expected_failure{0x07, "REMOTE_ACCESS_ERR"};
    case failure_kind::retry_exceeded: return mlx5 ? expected_failure{0x15, "transport retry counter exceeded"}
                                                   : expected_failure{0x0a, "TRANSPORT_RETRY_CNT_ERR"};
    }
    return {0, ""};
}
// How many entries a ring of function `function_index`'s family holds at the API's default 2^12
// slots: mlx5 uses every slot, a bnxt ring keeps one free (bnxt_re qplib_fp.h
// bnxt_qplib_queue_full: producer == consumer means empty).
inline std::uint32_t ring_capacity(std::uint16_t function_index = 0) {
    return family_of(function_index) == family::mlx5 ? 4096 : 4095;
}

// ---- shared by the seed, error and soak suites (seed_test.cpp, errors_test.cpp, soak_test.cpp)

// Two NICs of two functions of the family under test on one wire, a region of `bytes` on each
// with access `acc`. The wire is declared first: it outlives the functions that attach to it.
// With RIG_TEST_NICS set, n1 and n2 are those functions (the served models then stand idle: only
// [any-nic] tests run that way).
struct two_served_functions {
    sim::roce::wire w;
    served_function m1;
    served_function m2;
    std::unique_ptr<rig::nic> n1;
    std::unique_ptr<rig::nic> n2;
    rig::region r1, r2;
    // `o2`: n2's options when they differ from n1's `o` (a callback that must tell the NICs apart)
    explicit two_served_functions(std::size_t bytes, rig::access acc = rig::access::remote, const nic_options& o = {},
                                  const nic_options* o2 = nullptr)
        : m1(0, &w), m2(1, &w), n1(open_test_nic(m1, 0, o)), n2(open_test_nic(m2, 1, o2 != nullptr ? *o2 : o)),
          r1(value(n1->allocate(bytes, acc))), r2(value(n2->allocate(bytes, acc))) {}
};

// ... and a queue pair on each, connected to the other.
struct two_served_nics : two_served_functions {
    rig::queue_pair a, b;
    explicit two_served_nics(std::size_t bytes, rig::access acc = rig::access::remote, const nic_options& o = {})
        : two_served_functions(bytes, acc, o), a(value(n1->make_qp())), b(value(n2->make_qp())) {
        ok(a.connect(b.local()));
        ok(b.connect(a.local()));
    }
};

// Waits (at most 5 s) until the function's data path has written `cqes` CQEs in all: entries
// have completed in the NIC, whether or not the API has taken their completions.
inline void await_cqes(const served_function& m, std::uint64_t cqes) {
    REQUIRE(m.data_path_running());
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (m.cqes_written() < cqes && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(m.cqes_written() >= cqes);
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
