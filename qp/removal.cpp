// The device's removal request (rig/nic.hpp nic_options::removal_requested): VFIO's request IRQ
// (VFIO_PCI_REQ_IRQ_INDEX). When the kernel is asked to unbind the function or to remove it, it
// signals this eventfd and waits, asking again every 10 s, until the user closes the device
// (Linux drivers/vfio/pci/vfio_pci_core.c vfio_pci_core_request; vfio_unregister_group_dev). A
// user that never lets go blocks the unbind for good, so the NIC lets go itself at the deadline
// (DPDK answers the same request by its hot-unplug handler, pci_vfio req_notifier).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "driver/log.hpp"
#include "qp/device_words.hpp"
#include "qp/nic_state.hpp"
#include "rig/nic.hpp"

namespace rig {

void nic::watch_removal() {
    auto info = _s->fn->get_irq_info(driver::irq_kind::request);
    if (!info || info->count == 0 || !info->eventfd) {
        return;   // a back end without it (an old vfio-user server): nothing asks
    }
    auto fds = _s->fn->enable_irqs(driver::irq_kind::request, 1);
    if (!fds) {
        driver::log().warn("{}: the removal request IRQ could not be wired ({}): an unbind of the function will wait "
                       "for close()", name(), fds.error().message);
        return;
    }
    _s->request_fd = fds->front();
    _s->removal_stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (_s->removal_stop_fd < 0) {
        return;
    }
    _s->removal_thread = std::thread([this] {
        pollfd p[2] = {{_s->request_fd, POLLIN, 0}, {_s->removal_stop_fd, POLLIN, 0}};
        for (;;) {
            if (::poll(p, 2, -1) < 0 && errno != EINTR) {
                return;
            }
            if ((p[1].revents & POLLIN) != 0) {
                return;   // stop_removal_watch
            }
            if ((p[0].revents & POLLIN) != 0) {
                qp::drain_eventfd(_s->request_fd);
                answer_removal();
                return;   // one answer: the device is gone after it
            }
        }
    });
}

// The request came: tell the user, give close() until the deadline, then let go of the device
// whether it came or not.
void nic::answer_removal() {
    const auto deadline = _s->options.removal_deadline;
    driver::log().warn("{}: removal of the device requested (VFIO request IRQ): letting go within {} ms", name(),
                   deadline.count());
    if (_s->options.removal_requested) {
        _s->options.removal_requested(deadline);
    }
    bool closed_in_time = false;
    {
        std::unique_lock hold(_s->removal_lock);
        closed_in_time = _s->removal_closed.wait_for(hold, deadline, [this] { return _s->closed_for_removal.load(); });
    }
    if (!closed_in_time) {
        driver::log().error("{}: not closed within {} ms of the removal request: the NIC fails and lets go of the device",
                        name(), deadline.count());
        on_fatal();
        if (_s->options.fatal) {
            _s->options.fatal(plain_error(error_kind::os, std::string(name()) + ": the device's removal was requested "
                                                       "and the NIC was not closed within " +
                                                       std::to_string(deadline.count()) + " ms: it let go"));
        }
    }
    _s->fn->let_go();
    driver::log().info("{}: let go of the device", name());
}

void nic::stop_removal_watch() noexcept {
    if (_s->removal_stop_fd >= 0) {
        const std::uint64_t one = 1;
        static_cast<void>(::write(_s->removal_stop_fd, &one, sizeof one));
        {
            std::lock_guard hold(_s->removal_lock);
        }
        _s->removal_closed.notify_all();
    }
    if (_s->removal_thread.joinable() && _s->removal_thread.get_id() != std::this_thread::get_id()) {
        _s->removal_thread.join();
    }
    if (_s->removal_stop_fd >= 0) {
        ::close(_s->removal_stop_fd);
        _s->removal_stop_fd = -1;
    }
}

}  // namespace rig
