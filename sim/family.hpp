#pragma once
// The families the device model serves, as rig-nicsim picks one by --family: its name, what
// its faults mean (pci::fault_space: channels, opcode and status ranges, the fatal argument),
// which of rig-nicsim's family options it takes, and how to make a function model from the
// options common to every family (docs/architecture.md, "The device model").
//
//   const sim::family* f = sim::find_family("mlx5");
//   if (f == nullptr || f->make == nullptr) ...          // unknown, or not built
//   std::unique_ptr<sim::served_function> fn = f->make(common);   // once per function k
//   auto srv = vfio_user::server::create(path, fn->device());
//   fn->attach(*srv);  fn->attach_wire(wire);  srv->start();
//
// Adding a family: a model class with attach(server&), attach_wire(wire&) and die_for_good()
// (sim::served<Model> wraps it), a make function, and its entry in family.cpp's table.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "sim/pci/fault_plan.hpp"
#include "sim/vfio_user/device.hpp"

namespace rig::sim {

namespace vfio_user {
class server;
}
namespace roce {
class wire;
}

// A function model of any family, as rig-nicsim holds it.
class served_function {
public:
    virtual ~served_function() = default;
    virtual vfio_user::device& device() = 0;
    // The server whose DMA space and interrupts the model uses (before the server starts).
    virtual void attach(vfio_user::server& s) = 0;
    // Joins the in-process wire under the function's MAC and starts its data path.
    virtual void attach_wire(roce::wire& w) = 0;
    // The function dies and no reset brings it back (--function-dies-after-ms).
    virtual void die_for_good() = 0;
};

template <class Model>
class served final : public served_function {
public:
    template <class... Args>
    explicit served(Args&&... args) : _model(std::forward<Args>(args)...) {}
    vfio_user::device& device() override { return _model; }
    void attach(vfio_user::server& s) override { _model.attach(s); }
    void attach_wire(roce::wire& w) override { _model.attach_wire(w); }
    void die_for_good() override { _model.die_for_good(); }
    Model& model() noexcept { return _model; }

private:
    Model _model;
};

// What rig-nicsim gives every family's function k. Unset optionals: the family's default.
struct common_options {
    std::uint16_t index = 0;  // function k of 0..N-1
    std::uint64_t mac = 0;    // its permanent MAC, 48 bits
    std::optional<std::chrono::milliseconds> init_time;  // how long it is not ready after reset
    std::chrono::microseconds command_latency{0};        // firmware time per command
    std::optional<std::uint16_t> msix_vectors;
    pci::fault_plan fault;  // in the family's fault_space
    // Family options (family::options says which a family takes; rig-nicsim refuses the rest):
    std::optional<std::uint32_t> page_request_after;  // --page-request-after
    std::optional<std::int32_t> page_request_pages;   // --page-request-pages
    std::optional<std::uint32_t> trapped_uar_pages;   // --trapped-uar-pages
    // --report-ledger: called with each ledger line (no newline), with the model's lock held
    std::function<void(const std::string& line)> on_ledger;
};

// rig-nicsim's options that only some families take.
inline constexpr std::string_view family_option_names[] = {
    "--page-request-after", "--page-request-pages", "--trapped-uar-pages", "--report-ledger"};

struct family {
    std::string_view name;         // --family NAME, and the socket names NAME-k.sock
    std::string_view description;  // in --help: "ConnectX-6 Dx (15b3:101d)"
    pci::fault_space faults;
    std::span<const std::string_view> options;  // the family options it takes
    // nullptr: the family's model is not built yet
    std::unique_ptr<served_function> (*make)(const common_options&);

    bool takes(std::string_view option) const;
};

// Every family, mlx5 first (the default).
std::span<const family> families();
// nullptr when no family has the name.
const family* find_family(std::string_view name);
// "mlx5, bnxt"
std::string family_names();

namespace mlx5 {
std::unique_ptr<served_function> make_function(const common_options& o);  // family.cpp
}
namespace bnxt {
// Defined by the bnxt model (sim/bnxt); the table names it once it exists.
std::unique_ptr<served_function> make_function(const common_options& o);
}

}  // namespace rig::sim
