// nic::open/close and regions against the served model: what the model holds afterwards.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <tuple>
#include <vector>
#include <stdexcept>
#include <string>
#include <thread>
#include <chrono>

#include <catch2/catch.hpp>

#include "abi/mlx5/ifc/eqe.hpp"
#include "rig/info.hpp"
#include "rig/nic.hpp"
#include "rig/region.hpp"
#include "qp/nic_state.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using rig::test::ok;
using rig::test::served_mlx5;
using rig::test::value;
namespace model = rig::sim::mlx5;

}  // namespace

TEST_CASE("nic: open and close, again and again, leave nothing in the model", "[model][mlx5][api]") {
    served_mlx5 m;
    for (int round = 0; round < 3; ++round) {
        auto nic = m.open();
        CHECK(m.fn.state() == model::hca_state::initialized);
        CHECK(m.fn.objects() >= 3);  // the hca's EQ and UAR, the API's UAR and PD
        CHECK(nic->mac() != std::array<std::byte, 6>{});
        CHECK(nic->gid()[0] == std::byte{0xfe});  // fe80::/64, the MAC's link-local GID
        auto r = value(nic->allocate(5000, rig::access::remote));
        auto q = value(nic->make_qp());
        CHECK(nic->regions() == 1);
        CHECK(nic->queue_pairs() == 1);
        ok(nic->close());
        CHECK(nic->closed());
        ok(nic->close());  // idempotent
        CHECK(m.fn.objects() == 0);
        CHECK(m.fn.pages_owned() == 0);
        CHECK(m.fn.state() == model::hca_state::disabled);
        CHECK(nic->stranded().empty());
        CHECK(q.destroyed());
        CHECK_FALSE(r.registered());
        CHECK_THROWS_AS(nic->make_qp(), std::invalid_argument);
        CHECK_THROWS_AS(nic->allocate(4096, rig::access::local), std::invalid_argument);
    }
}

TEST_CASE("nic: the options' trace and event hooks are family-neutral: records with their channel, events by name",
          "[model][mlx5][api]") {
    served_mlx5 m;
    std::mutex lock;
    std::vector<rig::command_record> records;
    std::vector<bool> links;
    std::vector<std::tuple<std::uint32_t, std::string, bool>> qp_events;
    rig::nic_options o;
    o.trace = [&](const rig::command_record& r) {
        std::lock_guard g(lock);
        records.push_back(r);
    };
    o.port_change = [&](bool up) {
        std::lock_guard g(lock);
        links.push_back(up);
    };
    o.qp_event = [&](std::uint32_t qp, std::string_view name, bool failure) {
        std::lock_guard g(lock);
        qp_events.emplace_back(qp, std::string(name), failure);
    };
    auto nic = m.open(o);
    auto q = value(nic->make_qp());
    const std::uint32_t qpn = q.number();
    namespace ifc = rig::mlx5::ifc;
    REQUIRE(m.fn.post_qp_event(q.number(), static_cast<std::uint8_t>(ifc::event_type::comm_est)));
    REQUIRE(m.fn.post_qp_event(q.number(), static_cast<std::uint8_t>(ifc::event_type::wq_catas_error)));
    REQUIRE(m.fn.set_port_state(false));
    const auto seen = [&] {
        std::lock_guard g(lock);
        return qp_events.size() == 2 && links.size() == 1;
    };
    for (int i = 0; i < 500 && !seen(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ok(nic->close());
    std::lock_guard g(lock);
    REQUIRE(qp_events.size() == 2);
    CHECK(qp_events[0] == std::tuple{qpn, std::string("COMM_EST"), false});
    CHECK(qp_events[1] == std::tuple{qpn, std::string("WQ_CATAS_ERROR"), true});
    CHECK(links == std::vector<bool>{false});
    REQUIRE_FALSE(records.empty());
    CHECK(std::all_of(records.begin(), records.end(), [](const auto& r) { return r.channel == "cmdq"; }));
    CHECK(records.front().name == "ENABLE_HCA");
    CHECK(records.front().opcode == 0x104);
    CHECK(rig::to_json(records.front())
              .starts_with(R"({"channel": "cmdq", "opcode": 260, "name": "ENABLE_HCA", "op_mod": 0, "status": 0, )"
                           R"("syndrome": 0, "in": ")"));
    CHECK(std::any_of(records.begin(), records.end(), [](const auto& r) { return r.name == "CREATE_QP"; }));
    CHECK(records.back().name == "DISABLE_HCA");
}

TEST_CASE("nic: open of nothing is an error naming the place", "[model][mlx5][api]") {
    auto n = rig::nic::open("vfio-user:/nonexistent/rig.sock");
    REQUIRE_FALSE(n.has_value());
    CHECK(n.error().kind == rig::error_kind::os);
    CHECK(n.error().message.find("/nonexistent/rig.sock") != std::string::npos);
}

TEST_CASE("region: allocate and deregister are reflected in the model's keys", "[model][mlx5][api]") {
    served_mlx5 m;
    auto nic = m.open();
    const std::size_t objects = m.fn.objects();

    auto a = value(nic->allocate(100, rig::access::local));
    auto b = value(nic->allocate(3 * 4096 + 1, rig::access::remote));
    auto c = value(nic->allocate(4096, rig::access::remote_read));
    CHECK(m.fn.objects() == objects + 3);  // three MKEYs
    CHECK(a.size() >= 100);
    CHECK(b.size() >= 4 * 4096);
    CHECK(a.key() != b.key());
    CHECK(b.access() == rig::access::remote);
    CHECK(c.access() == rig::access::remote_read);
    CHECK(a.owner() == nic.get());
    for (std::size_t i = 0; i < b.size(); ++i) {
        REQUIRE(b.data()[i] == std::byte{0});  // zeroed
    }
    std::memcpy(b.data(), "rig", 3);
    CHECK(std::memcmp(b.bytes().data(), "rig", 3) == 0);

    const rig::remote at = b.remote(10);
    CHECK(at.address == b.address() + 10);
    CHECK(at.key == b.key());
    CHECK(b.remote(b.size()).address == b.address() + b.size());
    CHECK_THROWS_AS(b.remote(b.size() + 1), std::invalid_argument);

    ok(b.deregister());
    CHECK(m.fn.objects() == objects + 2);
    CHECK_FALSE(b.registered());
    CHECK(nic->regions() == 2);
    CHECK_THROWS_AS(b.deregister(), std::invalid_argument);
    CHECK_THROWS_AS(b.data(), std::invalid_argument);
    CHECK_THROWS_AS(b.remote(0), std::invalid_argument);
    CHECK_THROWS_AS(nic->allocate(0, rig::access::local), std::invalid_argument);
    CHECK(m.fn.objects() == objects + 2);

    auto memory = rig::driver::dma_memory::allocate(8192, rig::driver::page_choice::small_only);
    REQUIRE(memory.has_value());
    std::byte* bytes = memory->data();
    auto d = value(rig::detail::nic_access::register_memory(*nic, std::move(*memory), rig::access::remote_write));
    CHECK(d.data() == bytes);
    CHECK(d.size() == 8192);
    CHECK(m.fn.objects() == objects + 3);
    CHECK_THROWS_AS(rig::detail::nic_access::register_memory(*nic, rig::driver::dma_memory(), rig::access::local),
                    std::invalid_argument);

    ok(a.deregister());
    ok(c.deregister());
    ok(d.deregister());
    CHECK(m.fn.objects() == objects);
    ok(nic->close());
    CHECK(m.fn.objects() == 0);
}

TEST_CASE("region: a key the firmware refuses leaves nothing behind", "[model][mlx5][api]") {
    served_mlx5 m;
    auto nic = m.open();
    const std::size_t objects = m.fn.objects();
    const std::size_t windows = m.srv->dma().window_count();
    m.fn.fail_next(static_cast<std::uint16_t>(rig::mlx5::ifc::opcode::create_mkey),
                   rig::mlx5::ifc::cmd_status::bad_param_err, 0xabcd);
    auto r = nic->allocate(4096, rig::access::remote);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == rig::error_kind::firmware);
    CHECK(r.error().opcode == static_cast<std::uint16_t>(rig::mlx5::ifc::opcode::create_mkey));
    CHECK(r.error().status == static_cast<std::uint8_t>(rig::mlx5::ifc::cmd_status::bad_param_err));
    CHECK(r.error().syndrome == 0xabcdu);
    CHECK(r.error().message.rfind("allocate: ", 0) == 0);
    CHECK(m.fn.objects() == objects);
    CHECK(m.srv->dma().window_count() == windows);  // unmapped again
    CHECK(nic->regions() == 0);
    CHECK(nic->stranded().empty());
}

TEST_CASE("nic: a second open of a function in use is refused at once as busy; the first keeps working",
          "[model][mlx5][api]") {
    served_mlx5 m;
    auto first = m.open();
    const auto t0 = std::chrono::steady_clock::now();
    auto second = rig::nic::open(m.where());
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE_FALSE(second.has_value());
    INFO(second.error().message);
    CHECK(second.error().kind == rig::error_kind::os);
    CHECK_THAT(second.error().message, Catch::Contains("busy") && Catch::Contains("VFIO_USER_VERSION"));
    CHECK(took < std::chrono::seconds(1));  // told, not left waiting for its own timeout
    const auto r = value(first->allocate(4096, rig::access::remote));  // the first client is served as before
    CHECK(r.registered());
    CHECK(m.fn.objects() >= 3);
    ok(first->close());
    first.reset();  // its connection ends
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (m.srv->client_connected() && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    auto third = m.open();  // free again
    ok(third->close());
}
