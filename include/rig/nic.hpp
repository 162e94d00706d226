#pragma once
/// @file
/// A NIC driven by Rig (docs/guide.md, "Opening a NIC"): opened through the PCI layer, brought
/// up through its firmware, and the owner of every region and queue pair made on it.
///
/// @code
///   auto nic = rig::nic::open("vfio-user:/run/rig/mlx5-0.sock").value();  // or "0000:3b:00.0"
///   rig::region r = nic->allocate(1 << 20, rig::access::remote).value();
///   rig::queue_pair q = nic->make_qp().value();
///   ...
///   nic->close();
/// @endcode
///
/// open: the PCI layer opens the function (kernel VFIO or vfio-user), the family is picked by
/// its PCI IDs, then that family's bring-up runs through its firmware and makes the NIC-wide
/// objects its queue pairs and regions share.
///
/// close() is idempotent: it destroys every queue pair and region left, gives back the NIC-wide
/// objects, and tears the NIC down. On a firmware that stopped answering it completes locally: what
/// the firmware may still name stays allocated and mapped, and stranded() lists it.
/// Control calls (open aside: allocate, register_memory, deregister, make_qp, connect, destroy,
/// close, stranded) are thread-safe: they take the NIC's lock.
#include "rig/config.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "rig/endpoint.hpp"
#include "rig/error.hpp"
#include "rig/group.hpp"
#include "rig/info.hpp"
#include "rig/open_options.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"

namespace rig {

namespace detail {
struct region_state;
struct qp_state;
struct group_state;
struct nic_state;
struct nic_access;
class control_plane;
}  // namespace detail

/// When a doorbell also copies the entry it announces into the NIC's doorbell page
/// (nic_options::copy_to_doorbell; docs/guide.md, "Doorbell copy").
enum class doorbell_copy : std::uint8_t {
    never,            ///< the doorbell alone: the NIC reads every entry from host memory
    inline_entries,   ///< a doorbell of one new entry that carries its data inline (post_write_inline)
    single_entries,   ///< a doorbell of any one new entry (the default)
};

/// How nic::open brings a NIC up, and where its events go.
struct nic_options {
    open_options open;   ///< how the PCI function is reached (rig/open_options.hpp)
    /// Each firmware command of the API's control calls must complete within this.
    std::chrono::milliseconds command_timeout{5000};
    /// How long the function may say it is not ready yet after reset before open gives up
    /// (mlx5: the init segment's initializing bit, the kernel's FW_PRE_INIT_TIMEOUT_MILI; bnxt:
    /// VER_GET answering DEV_NOT_RDY).
    std::chrono::milliseconds ready_timeout{120000};
    /// How often the firmware's health is looked at (mlx5: the health buffer's counter).
    std::chrono::milliseconds health_interval{1000};
    /// Firmware events by interrupt (completion events that wake wait(), queue pair and port
    /// events, the firmware's requests); false: commands polled, no events.
    bool use_events = true;
    /// Bring the function up with its link down, when the NIC offers that.
    bool init_link_down = false;
    /// Every firmware command the NIC executed, from the first one of bring-up on (empty: off).
    /// Called on the thread that ran the command: it must not call into the NIC.
    std::function<void(const command_record&)> trace;
    /// Events, from the NIC's event thread (each may be empty; none may call into the NIC):
    /// a completion event of completion queue `cq`.
    std::function<void(std::uint32_t cq)> completion;
    /// An event of queue pair `qp`, by the family's name ("WQ_CATAS_ERROR"), and whether it is
    /// the queue pair's failure.
    std::function<void(std::uint32_t qp, std::string_view event, bool failure)> qp_event;
    /// The port's link went up or down.
    std::function<void(bool up)> port_change;
    /// The NIC's machine failed (fatal health report, internal error, the function gone).
    std::function<void(const error&)> fatal;
    /// The device's removal was requested (VFIO's request IRQ: an unbind or hot unplug of the
    /// function waits for its user to let go; kernel VFIO, and a vfio-user server that offers
    /// it, as rig-nicsim does): close() the NIC within `deadline`. Called on the NIC's removal
    /// thread, which may call close() (not destroy the NIC). Whether closed in time or not, at the
    /// deadline's end the NIC lets go of the device: not closed, it fails first (its queue pairs'
    /// entries and groups complete with the NIC's failure, as on a fatal error) and its BARs are
    /// left as private memory, so threads still posting write into nothing (driver::function
    /// let_go). Further use of the NIC gets its failure.
    std::function<void(std::chrono::milliseconds deadline)> removal_requested;
    /// How long after the removal request the NIC lets go of the device (removal_requested).
    std::chrono::milliseconds removal_deadline{5000};
    /// Each ring of a queue pair has 2^n entries (capped by the NIC's log_max_qp_sz); its CQs
    /// have as many CQEs.
    std::uint8_t log_ring_entries = 12;
    /// queue_pair::wait sleeps on the CQ's completion event, looking again at least this often
    /// (a lost event costs one look, never the whole bound).
    std::chrono::milliseconds wait_look_interval{10};
    /// MSI-X vectors kept for completion groups' event queues (one each; vector 0 is the NIC's
    /// own), capped by what the function offers: at most this many groups at once.
    std::uint32_t completion_vectors = 8;
    /// A send ring's doorbell that announces exactly one new entry also copies that entry into
    /// the NIC's doorbell page, so the NIC can start it without first reading it from host
    /// memory: on a card, less latency for a lone post, for a few more CPU stores per doorbell.
    /// Several entries per doorbell are never copied. mlx5: BlueFlame (rdma-core's mlx5_bf_copy;
    /// its default, prefer_bf, is single_entries), done only where the NIC offers it
    /// (cmd_hca_cap.bf) and its doorbell page is mapped write-combining or is the model's memory
    /// (kernel VFIO maps BARs uncached: there the doorbell alone is written, whatever is asked).
    /// bnxt: ignored (Thor's push path for small entries is not implemented).
    doorbell_copy copy_to_doorbell = doorbell_copy::single_entries;
};

/// One NIC function: its regions, queue pairs and completion groups (rig/nic.hpp).
class RIG_API nic {
public:
    /// Opens `where` ("0000:bb:dd.f": kernel VFIO; "vfio-user:PATH": a vfio-user server such as
    /// rig-nicsim) and brings the NIC up. Errors: the PCI layer's or the OS's refusal, a function
    /// of no family Rig drives, the firmware's refusal or silence at a bring-up step.
    static result<std::unique_ptr<nic>> open(std::string_view where, const nic_options& options = {});

    /// close(), errors ignored (stranded memory is kept for the life of the process).
    ~nic();
    nic(const nic&) = delete;
    nic& operator=(const nic&) = delete;

    /// `bytes` (rounded up to whole pages) of zeroed DMA memory, mapped for the NIC, registered.
    /// Misuse: bytes 0, or the NIC closed.
    result<region> allocate(std::size_t bytes, access a);
    /// Memory the application already has, registered as it lies: on kernel VFIO any range of
    /// the address space (VFIO_IOMMU_MAP_DMA takes any address); on vfio-user memory mapped from a
    /// file (memfd, hugetlbfs), whose descriptor the server maps, refused by name without one
    /// (unless the NIC was opened with vfio_user_dma_by_message). The application keeps it:
    /// deregister and close unmap it from the NIC and leave it mapped in the process (stranded
    /// memory, which the NIC may still write, it must keep). Misuse: empty, or not whole 4 KiB
    /// pages; the NIC closed.
    result<region> register_memory(const app_memory& memory, access a);

    /// An unconnected queue pair whose sends start at a random PSN. Misuse: the NIC closed.
    result<queue_pair> make_qp();
    /// The same, both rings completing to group `g` (its rings of g's log_ring_entries). Misuse:
    /// the NIC closed, `g` destroyed or of another NIC, or no room left in g's CQ for the new
    /// rings' entries (its entries() against the rings of its queue pairs).
    result<queue_pair> make_qp(completion_group& g);
    /// A completion group (rig/group.hpp): a CQ and an EQ on a free MSI-X vector. Error when the
    /// firmware refuses, or no vector is free (nic_options::completion_vectors). Misuse: the NIC
    /// closed, entries 0 or over the NIC's largest CQ.
    result<completion_group> make_group(const group_options& options = {});

    /// Destroys what is left (queue pairs, groups, regions) and tears the NIC down; idempotent
    /// (a second call returns the first's result). Error: the first refusal met; what the
    /// firmware may still name is kept and listed by stranded().
    result<void> close();
    /// Whether close() was called.
    bool closed() const;

    /// Memory the NIC could not give back because its firmware may still name it (close or
    /// deregister on a silent firmware): kept mapped for the life of the process.
    std::vector<stranded_region> stranded() const;
    /// The port's MAC address.
    std::array<std::byte, 6> mac() const noexcept { return _mac; }
    /// The port's GID table entry 0 (the GID its queue pairs' packets carry).
    std::array<std::byte, 16> gid() const noexcept { return _gid; }
    /// The path MTU this NIC's queue pairs connect with, in bytes (256 ... 4096): the largest RoCE
    /// MTU its port's Ethernet MTU carries (connect; as the kernel's iboe_get_mtu).
    std::uint32_t path_mtu() const noexcept { return _path_mtu; }
    /// The function's name as opened ("0000:3b:00.0", "vfio-user:/run/rig/mlx5-0.sock"), or
    /// "(closed)".
    std::string_view name() const noexcept;
    /// The live queue pairs (for tests and diagnostics).
    std::size_t queue_pairs() const;
    /// The registered regions (for tests and diagnostics).
    std::size_t regions() const;
    /// Whether `qpn` is a live queue pair of this NIC (the seed's read: its peer must be one).
    bool has_queue_pair(std::uint32_t qpn) const;

private:
    friend class region;
    friend class queue_pair;
    friend class completion_group;
    friend struct detail::nic_access;
    nic();
    result<void> start(std::string_view where, const nic_options& options);
    // A region over `s`'s memory (its bytes and rights set): mapped whole for the NIC (allocate's
    // may be whole 2 MiB pages for a request of a few KiB), its key covering s->bytes.
    result<region> add_region(std::unique_ptr<detail::region_state> s, const char* call);
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
    std::chrono::milliseconds wait_look_interval() const noexcept;
    bool machine_failed() const noexcept { return _machine_failed.load(std::memory_order_relaxed); }
    // qp/removal.cpp: the request IRQ wired to an eventfd (when the function offers one) and the
    // thread that answers it; stopped before the NIC goes.
    void watch_removal();
    void answer_removal();
    void stop_removal_watch() noexcept;

    // What the data path reads on every post and poll stays here; the rest is the library's
    // (qp/nic_state.hpp).
    std::array<std::byte, 6> _mac{};
    std::array<std::byte, 16> _gid{};
    std::uint32_t _path_mtu = 1024;
    std::atomic<bool> _machine_failed{false};
    std::unique_ptr<detail::nic_state> _s;
};

}  // namespace rig
