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
// mlx5: driver::open, then firmware::mlx5::hca::bring_up (reference/mlx5.md §1.1), then one UAR
// (the queue pairs' doorbells and the CQs' arm doorbells, BAR0 page `uar`, mapped write-
// combining: §4.1) and one protection domain shared by every region and queue pair of the NIC.
//
// close() is idempotent: it destroys every queue pair and region left, gives back the UAR and
// PD, and tears the NIC down. On a firmware that stopped answering it completes locally: what
// the firmware may still name stays allocated and mapped, and stranded() lists it.
// Control calls (open aside: allocate, register_memory, deregister, make_qp, connect, destroy,
// close, stranded) are thread-safe: they take the NIC's lock.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/hca.hpp"
#include "firmware/mlx5/stranded.hpp"
#include "qp/endpoint.hpp"
#include "qp/error.hpp"
#include "qp/qp.hpp"
#include "qp/region.hpp"

namespace rig {

namespace detail {
struct region_state;
struct qp_state;
}  // namespace detail

struct nic_options {
    driver::open_options open;
    firmware::mlx5::hca_options hca;
    // Each firmware command of the API's control calls must complete within this.
    std::chrono::milliseconds command_timeout{5000};
    // Each ring of a queue pair has 2^n entries (capped by the NIC's log_max_qp_sz); its CQs
    // have as many CQEs.
    std::uint8_t log_ring_entries = 12;
    // queue_pair::wait sleeps on the CQ's completion event, looking again at least this often
    // (a lost event costs one look, never the whole bound).
    std::chrono::milliseconds wait_look_interval{10};
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

    // An unconnected queue pair whose sends start at a random PSN. Misuse: the NIC closed.
    result<queue_pair> make_qp();

    result<void> close();
    bool closed() const;

    std::vector<firmware::mlx5::stranded_region> stranded() const;
    std::array<std::byte, 6> mac() const noexcept { return _mac; }
    std::array<std::byte, 16> gid() const noexcept { return _gid; }  // GID table entry 0
    // The path MTU this NIC's queue pairs connect with, in bytes (256 ... 4096): the largest RoCE
    // MTU its port's Ethernet MTU carries (connect; as the kernel's iboe_get_mtu).
    std::uint32_t path_mtu() const noexcept { return _path_mtu; }
    std::string_view name() const noexcept;
    // The live queue pairs and registered regions (for tests and diagnostics).
    std::size_t queue_pairs() const;
    std::size_t regions() const;

private:
    friend class region;
    friend class queue_pair;
    nic() = default;
    result<void> start(std::string_view where, const nic_options& options);
    result<region> add_region(driver::dma_memory memory, access a, const char* call);
    result<void> deregister(detail::region_state& s);
    result<void> connect(detail::qp_state& s, const endpoint& e, std::uint32_t path_mtu_bytes);
    result<void> destroy(detail::qp_state& s);
    result<firmware::mlx5::qp_state_info> query(const detail::qp_state& s);
    // Destroys what the firmware still holds of a queue pair: QP, then CQs. Lock held.
    result<void> release_qp(detail::qp_state& s);
    // MKEY destroyed, memory unmapped and freed; stranded when the firmware may still use it.
    result<void> release_region(detail::region_state& s);
    // A failed command after which the firmware may still hold memory: nothing more is sent.
    void note(const firmware::mlx5::error& e);
    // From the event thread: a QP event, and the NIC's failure (hca_options handlers).
    void on_qp_event(std::uint32_t qpn, std::uint8_t event_type);
    void on_completion(std::uint32_t cqn);
    // Blocks until `events` differs from `seen`, the NIC fails, or `bound` passes (queue_pair::wait).
    void sleep_until_event(const std::atomic<std::uint32_t>& events, std::uint32_t seen,
                           std::chrono::nanoseconds bound);
    std::chrono::milliseconds wait_look_interval() const noexcept { return _options.wait_look_interval; }
    bool machine_failed() const noexcept { return _machine_failed.load(std::memory_order_relaxed); }
    firmware::mlx5::command_queue::clock::time_point by() const;
    firmware::mlx5::command_queue& commands();

    nic_options _options;
    std::unique_ptr<driver::function> _fn;
    std::unique_ptr<firmware::mlx5::hca> _hca;
    driver::bar_mapping _bar0;
    std::optional<std::uint32_t> _uar;
    std::optional<std::uint32_t> _pd;
    std::array<std::byte, 6> _mac{};
    std::array<std::byte, 16> _gid{};
    std::uint32_t _path_mtu = 1024;
    std::uint8_t _log_ring = 12;
    std::uint32_t _next_bfreg = 0;
    std::mt19937 _random;
    mutable std::mutex _lock;
    bool _closed = false;
    std::optional<result<void>> _close_result;
    std::list<std::unique_ptr<detail::region_state>> _regions;
    std::list<std::unique_ptr<detail::qp_state>> _qps;
    // The event thread's view: never held while a command runs (a command may wait on that
    // thread), so the handler cannot deadlock against a control call.
    std::mutex _event_lock;
    std::map<std::uint32_t, detail::qp_state*> _by_qpn;
    std::map<std::uint32_t, std::atomic<std::uint32_t>*> _events_by_cqn;  // a QP's CQ -> its counter
    std::atomic<bool> _machine_failed{false};
    // Where wait() sleeps: the event thread notifies after a COMP event, a QP event or the
    // NIC's failure.
    std::mutex _wake_lock;
    std::condition_variable _wake;
};

}  // namespace rig
