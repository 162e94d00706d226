#pragma once
// The bnxt function model (sim/bnxt/function_model.hpp) served over vfio-user in this process
// and opened as a driver opens it (driver::open("vfio-user:...")).
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <utility>

#include "driver/function.hpp"
#include "firmware/bnxt/device.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/temp_dir.hpp"

namespace rig::test::bnxt_fw {

// Teardown in reverse: the client, then the server, then the model.
struct served_bnxt {
    rig::test::temp_dir dir{"rig-bnxt-fw"};
    rig::sim::bnxt::function_model fn;
    std::unique_ptr<rig::sim::vfio_user::server> srv;
    std::unique_ptr<rig::driver::function> f;

    explicit served_bnxt(rig::sim::bnxt::function_options o = {}) : fn(o) {
        auto s = rig::sim::vfio_user::server::create(dir.file("bnxt.sock"), fn);
        REQUIRE(s.has_value());
        srv = std::move(*s);
        fn.attach(*srv);
        srv->start();
        auto opened = rig::driver::open("vfio-user:" + dir.file("bnxt.sock"));
        REQUIRE(opened.has_value());
        f = std::move(*opened);
    }
};

// A device whose RoCE rings are small enough for a test (CREQ 1024, NQ 256, CMDQ 256 slots), its
// events to `handlers`, the RoCE channel in event mode or polling, health looked at every `health`.
inline rig::firmware::bnxt::device_options small_roce(rig::firmware::bnxt::event_handlers handlers, bool events,
                                                      std::chrono::milliseconds health) {
    rig::firmware::bnxt::device_options o;
    o.creq_entries = 1024;
    o.nq_entries = 256;
    o.rcfw.cmdq_slots = 256;
    o.rcfw_events = events;
    o.events = std::move(handlers);
    o.health_interval = health;
    return o;
}

}  // namespace rig::test::bnxt_fw
