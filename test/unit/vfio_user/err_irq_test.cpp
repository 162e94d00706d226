// The ERR interrupt (VFIO_PCI_ERR_IRQ_INDEX): one vector whatever the device model reports, as
// kernel vfio-pci offers one on every PCIe function (vfio_pci_core.c vfio_pci_get_irq_count).
// QEMU (hw/vfio/pci.c) warns "Could not enable error recovery for the device" in
// vfio_pci_populate_device unless the count is 1; with it, vfio_register_err_notifier installs
// an eventfd.
#include <cstdint>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace rig::test;
namespace abi = rig::vfio_user::abi;
namespace vu = rig::sim::vfio_user;
using abi::command;

namespace {

constexpr std::uint32_t err_index = static_cast<std::uint32_t>(vu::irq::err);

bool fired(int efd) {
    pollfd p{efd, POLLIN, 0};
    std::uint64_t n = 0;
    return ::poll(&p, 1, 1000) == 1 && ::read(efd, &n, sizeof n) == sizeof n && n == 1;
}

}  // namespace

TEST_CASE("vfio-user server: one ERR interrupt, wired by eventfd", "[vfio_user][irq]") {
    local_server s;   // the test device reports no ERR vector of its own
    REQUIRE(s.dev.irq_count(vu::irq::err) == 0);
    raw_conn c(socket_in(s.dir));
    c.handshake();

    c.send(static_cast<std::uint16_t>(command::device_get_irq_info), bytes_of(abi::irq_info{16, 0, err_index, 0}));
    auto info = c.receive();
    REQUIRE(info);
    REQUIRE_FALSE(info->is_error());
    const auto i = abi::decode<abi::irq_info>(info->payload);
    REQUIRE(i);
    CHECK(i->index == err_index);
    CHECK(i->count == 1);
    CHECK(i->flags == (abi::irq_info_eventfd | abi::irq_info_noresize));

    // QEMU's vfio_set_irq_signaling(ERR, 0, ACTION_TRIGGER, fd): one eventfd for vector 0
    const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    REQUIRE(efd >= 0);
    const auto set = [&](std::uint32_t flags, std::uint32_t count, std::span<const int> fds) {
        c.send(static_cast<std::uint16_t>(command::device_set_irqs),
               bytes_of(abi::irq_set{20, flags, err_index, 0, count}), fds);
        auto r = c.receive();
        REQUIRE(r);
        return r->is_error() ? static_cast<int>(r->hdr.error_no) : 0;
    };
    CHECK(set(abi::irq_set_data_eventfd | abi::irq_set_action_trigger, 1, std::span<const int>(&efd, 1)) == 0);
    CHECK(s.srv->trigger(vu::irq::err, 0));   // the eventfd was kept
    CHECK(fired(efd));
    CHECK_FALSE(s.srv->trigger(vu::irq::err, 1));   // there is one vector
    CHECK(set(abi::irq_set_data_eventfd | abi::irq_set_action_trigger, 2, {}) == EINVAL);
    // de-assigned (no fd), as QEMU does at teardown: nothing to signal
    CHECK(set(abi::irq_set_data_eventfd | abi::irq_set_action_trigger, 1, {}) == 0);
    CHECK_FALSE(s.srv->trigger(vu::irq::err, 0));
    ::close(efd);
}
