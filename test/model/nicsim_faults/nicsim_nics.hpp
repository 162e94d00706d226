#pragma once
// The two functions of a rig-nicsim process opened with the public API, as a program opens
// them ("vfio-user:DIR/mlx5-K.sock"), a region on each and a queue pair on each connected to
// the other.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "test/model/nicsim_faults/nicsim_process.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace rig::test {

// A failure found within tens of milliseconds: the health watch every 20 ms (a vanished or
// all-ones function is seen at the first look), and commands bounded by 1 s.
inline nic_options quick_failure_options() {
    nic_options o;
    o.health_interval = std::chrono::milliseconds(20);
    o.command_timeout = std::chrono::milliseconds(1000);
    return o;
}

inline std::unique_ptr<rig::nic> open_nic(const std::string& where, const nic_options& o = quick_failure_options()) {
    auto n = rig::nic::open(where, o);
    INFO(where << ": " << (n ? std::string() : n.error().message));
    REQUIRE(n.has_value());
    return std::move(*n);
}

struct nicsim_nics {
    std::unique_ptr<rig::nic> n0, n1;
    rig::region r0, r1;
    rig::queue_pair a, b;  // a on function 0, b on function 1, connected to each other
    nicsim_nics(const nicsim_process& p, std::size_t bytes)
        : n0(open_nic(p.where(0))), n1(open_nic(p.where(1))),
          r0(value(n0->allocate(bytes, rig::access::remote))), r1(value(n1->allocate(bytes, rig::access::remote))),
          a(value(n0->make_qp())), b(value(n1->make_qp())) {
        ok(a.connect(b.local()));
        ok(b.connect(a.local()));
    }
};

}  // namespace rig::test
