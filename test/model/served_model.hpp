#pragma once
// The mlx5 function model served in this process by the vfio-user server on a socket in a
// fresh temporary directory, and opened as a driver would open it: driver::open("vfio-user:").
// Shared by the model's own tests and the firmware layer's tests.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "test/temp_dir.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/command_queue.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/server.hpp"

namespace rig::test {

// A model function's socket in a fresh directory (`dir`, for rig-nicsim's --socket-dir too).
struct temp_socket {
    temp_dir made{"rig-mlx5"};
    const std::string& dir = made.path;
    std::string path() const { return made.file("mlx5.sock"); }
};

// A command's input for the tests: the layout's size plus `extra` trailing bytes.
template <class In>
std::vector<std::byte> make(mlx5::ifc::opcode op, std::uint16_t op_mod = 0, std::size_t extra = 0) {
    return firmware::mlx5::command_input<In>(op, op_mod, In::size_bytes + extra);
}

// Teardown (reverse order): the client goes, then the server (whose destructor tells the
// function to stop using its DMA space: device::server_closing), then the function model.
struct served_model {
    temp_socket sock;
    sim::mlx5::function_model fn;
    std::unique_ptr<sim::vfio_user::server> srv;
    std::unique_ptr<driver::function> f;

    explicit served_model(sim::mlx5::function_options o = {}, driver::open_options oo = {}) : fn(o) {
        auto s = sim::vfio_user::server::create(sock.path(), fn);
        REQUIRE(s.has_value());
        srv = std::move(*s);
        fn.attach(*srv);
        srv->start();
        auto opened = driver::open("vfio-user:" + sock.path(), oo);
        REQUIRE(opened.has_value());
        f = std::move(*opened);
    }
    served_model(const served_model&) = delete;
    served_model& operator=(const served_model&) = delete;
};

}  // namespace rig::test
