#pragma once
// A NIC driven by Rig (DESIGN.md §2): opened through the PCI layer, brought up through its
// firmware, and the owner of every region and queue pair made on it.
//
//   auto nic = rig::nic::open("vfio-user:/run/rig/mlx5-0.sock").value();  // or "0000:3b:00.0"
//   rig::region r = nic->allocate(1 << 20, rig::access::remote).value();
//   rig::queue_pair q = nic->make_qp().value();
//   ...
//   nic->close();
//
// open: driver::open, the family picked by the function's PCI IDs (driver/identify.hpp), then
// that family's bring-up through its firmware (qp/control.hpp: one control plane per family;
// mlx5's in qp/mlx5/control.hpp) and the NIC-wide objects its queue pairs and regions share.
//
// close() is idempotent: it destroys every queue pair and region left, gives back the NIC-wide
// objects, and tears the NIC down. On a firmware that stopped answering it completes locally: what
// the firmware may still name stays allocated and mapped, and stranded() lists it.
// Control calls (open aside: allocate, register_memory, deregister, make_qp, connect, destroy,
// close, stranded) are thread-safe: they take the NIC's lock.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "rig/endpoint.hpp"
#include "rig/error.hpp"
#include "rig/group.hpp"
#include "rig/info.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"

namespace rig {

namespace detail {
struct region_state;
struct qp_state;
struct group_state;
class control_plane;
}  // namespace detail

struct nic_options {
    driver::open_options open;
    // Each firmware command of the API's control calls must complete within this.
    std::chrono::milliseconds command_timeout{5000};
    // How long the function may say it is not ready yet after reset before open gives up
    // (mlx5: the init segment's initializing bit, the kernel's FW_PRE_INIT_TIMEOUT_MILI; bnxt:
    // VER_GET answering DEV_NOT_RDY).
    std::chrono::milliseconds ready_timeout{120000};
    // How often the firmware's health is looked at (mlx5: the health buffer's counter).
    std::chrono::milliseconds health_interval{1000};
    // Firmware events by interrupt (completion events that wake wait(), queue pair and port
    // events, the firmware's requests); false: commands polled, no events.
    bool use_events = true;
    // Bring the function up with its link down, when the NIC offers that.
    bool init_link_down = false;
    // Every firmware command the NIC executed, from the first one of bring-up on (empty: off).
    // Called on the thread that ran the command: it must not call into the NIC.
    std::function<void(const command_record&)> trace;
    // Events, from the NIC's event thread (may be empty; they must not call into the NIC):
    // a completion event of completion queue `cq`;
    std::function<void(std::uint32_t cq)> completion;
    // an event of queue pair `qp`, by the family's name ("WQ_CATAS_ERROR"), and whether it is
    // the queue pair's failure;
    std::function<void(std::uint32_t qp, std::string_view event, bool failure)> qp_event;
    // the port's link went up or down;
    std::function<void(bool up)> port_change;
    // the NIC's machine failed (fatal health report, internal error, the function gone).
    std::function<void(const error&)> fatal;
    // the device's removal was requested (VFIO's request IRQ: an unbind or hot unplug of the
    // function waits for its user to let go; kernel VFIO, and a vfio-user server that offers
    // it, as rig-nicsim does): close() the NIC within `deadline`. Called on the NIC's removal
    // thread, which may call close() (not destroy the NIC). Whether closed in time or not, at the
    // deadline's end the NIC lets go of the device: not closed, it fails first (its queue pairs'
    // entries and groups complete with the NIC's failure, as on a fatal error) and its BARs are
    // left as private memory, so threads still posting write into nothing (driver::function
    // let_go). Further use of the NIC gets its failure.
    std::function<void(std::chrono::milliseconds deadline)> removal_requested;
    std::chrono::milliseconds removal_deadline{5000};
    // Each ring of a queue pair has 2^n entries (capped by the NIC's log_max_qp_sz); its CQs
    // have as many CQEs.
    std::uint8_t log_ring_entries = 12;
    // queue_pair::wait sleeps on the CQ's completion event, looking again at least this often
    // (a lost event costs one look, never the whole bound).
    std::chrono::milliseconds wait_look_interval{10};
    // MSI-X vectors kept for completion groups' event queues (one each; vector 0 is the NIC's
    // own), capped by what the function offers: at most this many groups at once.
    std::uint32_t completion_vectors = 8;
};

class nic {
public:
    static result<std::unique_ptr<nic>> open(std::string_view where, const nic_options& options = {});

    ~nic();  // close(), errors ignored (stranded memory is kept for the life of the process)
    nic(const nic&) = delete;
    nic& operator=(const nic&) = delete;

    // `bytes` (rounded up to whole pages) of zeroed DMA memory, mapped for the NIC, registered.
    // Misuse: bytes 0, or the NIC closed.
    result<region> allocate(std::size_t bytes, access a);
    // Caller memory (a driver::dma_memory: memfd pages this process owns) registered whole; the
    // NIC owns it from now on and frees it at deregister. Misuse: empty memory, NIC closed.
    result<region> register_memory(driver::dma_memory memory, access a);
    // Memory the application already has, registered as it lies: on kernel VFIO any range of
    // the address space (VFIO_IOMMU_MAP_DMA takes any address); on vfio-user memory mapped from a
    // file (memfd, hugetlbfs), whose descriptor the server maps, refused by name without one
    // (unless the NIC was opened with vfio_user_dma_by_message). The application keeps it:
    // deregister and close unmap it from the NIC and leave it mapped in the process (stranded
    // memory, which the NIC may still write, it must keep). Misuse: empty, or not whole 4 KiB
    // pages; the NIC closed.
    result<region> register_memory(const app_memory& memory, access a);

    // An unconnected queue pair whose sends start at a random PSN. Misuse: the NIC closed.
    result<queue_pair> make_qp();
    // The same, both rings completing to group `g` (its rings of g's log_ring_entries). Misuse:
    // the NIC closed, `g` destroyed or of another NIC, or no room left in g's CQ for the new
    // rings' entries (its entries() against the rings of its queue pairs).
    result<queue_pair> make_qp(completion_group& g);
    // A completion group (rig/group.hpp): a CQ and an EQ on a free MSI-X vector. Error when the
    // firmware refuses, or no vector is free (nic_options::completion_vectors). Misuse: the NIC
    // closed, entries 0 or over the NIC's largest CQ.
    result<completion_group> make_group(const group_options& options = {});

    result<void> close();
    bool closed() const;

    std::vector<stranded_region> stranded() const;
    std::array<std::byte, 6> mac() const noexcept { return _mac; }
    std::array<std::byte, 16> gid() const noexcept { return _gid; }  // GID table entry 0
    // The path MTU this NIC's queue pairs connect with, in bytes (256 ... 4096): the largest RoCE
    // MTU its port's Ethernet MTU carries (connect; as the kernel's iboe_get_mtu).
    std::uint32_t path_mtu() const noexcept { return _path_mtu; }
    std::string_view name() const noexcept;
    // The live queue pairs and registered regions (for tests and diagnostics).
    std::size_t queue_pairs() const;
    std::size_t regions() const;
    // Whether `qpn` is a live queue pair of this NIC (the seed's read: its peer must be one).
    bool has_queue_pair(std::uint32_t qpn) const;

private:
    friend class region;
    friend class queue_pair;
    friend class completion_group;
    nic();
    result<void> start(std::string_view where, const nic_options& options);
    // `bytes`: what the region exposes and its key covers (0: the whole memory); the memory is
    // mapped whole (allocate's may be whole 2 MiB pages for a request of a few KiB).
    result<region> add_region(driver::dma_memory memory, access a, const char* call, std::size_t bytes = 0);
    result<void> deregister(detail::region_state& s);
    result<void> connect(detail::qp_state& s, const endpoint& e, std::uint32_t path_mtu_bytes);
    result<void> destroy(detail::qp_state& s);
    result<qp_info> query(const detail::qp_state& s);
    result<queue_pair> add_qp(std::unique_ptr<detail::qp_state> s, std::uint8_t log_ring, detail::group_state* g);
    result<void> destroy(detail::group_state& g);
    // The group's CQ and EQ destroyed. Lock held.
    result<void> release_group(detail::group_state& g);
    // Wakes the group's sleepers (its eventfd) and has its next poll take in failures.
    void wake_group(detail::group_state& g);
    // Destroys what the firmware still holds of a queue pair. Lock held.
    result<void> release_qp(detail::qp_state& s);
    // The region's key destroyed, its memory unmapped and freed; stranded when the firmware may
    // still use it. Lock held.
    result<void> release_region(detail::region_state& s);
    // From the family's event thread: a queue pair's failure (a family code, never 0), a
    // completion event, the NIC's failure.
    void on_qp_failure(std::uint32_t qpn, std::uint8_t code);
    void on_completion(std::uint32_t cqn);
    void on_fatal();
    // Blocks until `events` differs from `seen`, the NIC fails, or `bound` passes (queue_pair::wait).
    void sleep_until_event(const std::atomic<std::uint32_t>& events, std::uint32_t seen,
                           std::chrono::nanoseconds bound);
    std::chrono::milliseconds wait_look_interval() const noexcept { return _options.wait_look_interval; }
    bool machine_failed() const noexcept { return _machine_failed.load(std::memory_order_relaxed); }
    // qp/removal.cpp: the request IRQ wired to an eventfd (when the function offers one) and the
    // thread that answers it; stopped before the NIC goes.
    void watch_removal();
    void answer_removal();
    void stop_removal_watch() noexcept;

    nic_options _options;
    std::unique_ptr<driver::function> _fn;
    std::unique_ptr<detail::control_plane> _control;  // the family's: commands, objects, events
    std::array<std::byte, 6> _mac{};
    std::array<std::byte, 16> _gid{};
    std::uint32_t _path_mtu = 1024;
    std::uint8_t _log_ring = 12;
    std::mt19937 _random;
    mutable std::mutex _lock;
    bool _closed = false;
    std::optional<result<void>> _close_result;
    std::list<std::unique_ptr<detail::region_state>> _regions;
    std::list<std::unique_ptr<detail::qp_state>> _qps;
    std::list<std::unique_ptr<detail::group_state>> _groups;
    std::vector<detail::group_state*> _live_groups;  // under _event_lock: the groups on_fatal wakes
    // The event thread's view: never held while a command runs (a command may wait on that
    // thread), so the handler cannot deadlock against a control call.
    std::mutex _event_lock;
    std::map<std::uint32_t, detail::qp_state*> _by_qpn;
    std::map<std::uint32_t, std::atomic<std::uint32_t>*> _events_by_cqn;  // a QP's CQ -> its counter
    std::atomic<bool> _machine_failed{false};
    // Where wait() sleeps: the event thread notifies after a completion event, a queue pair's
    // failure or the NIC's failure.
    std::mutex _wake_lock;
    std::condition_variable _wake;
    // The removal watch: the request IRQ's eventfd (the function owns it), an eventfd that stops
    // the thread, and close()'s word to a removal waiting for it.
    int _request_fd = -1;
    int _removal_stop_fd = -1;
    std::thread _removal_thread;
    std::mutex _removal_lock;
    std::condition_variable _removal_closed;
    std::atomic<bool> _closed_for_removal{false};   // close() finished (taken without _lock)
};

}  // namespace rig
