#pragma once
// mlx5 function models served in this process, each on its own vfio-user socket, for the
// public API to open by name ("vfio-user:PATH") as a program would: the API opens the driver
// itself, so nothing else connects to the socket.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "qp/nic.hpp"
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
    std::string where() const { return "vfio-user:" + sock.path(); }

    std::unique_ptr<rig::nic> open(const nic_options& o = {}) {
        auto n = rig::nic::open(where(), o);
        INFO((n ? std::string() : n.error().message));
        REQUIRE(n.has_value());
        return std::move(*n);
    }
};

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

}  // namespace rig::test
