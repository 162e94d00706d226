#pragma once
// The NIC function brought up by the driver itself, through its command queue, and torn down
// again (rdma-core's VFIO bring-up, providers/mlx5/mlx5_vfio.c mlx5_vfio_alloc_context and
// mlx5_vfio_free_context; the kernel's order, mlx5/core/main.c mlx5_function_enable and
// mlx5_load_one).
//
//   auto nic = hca::bring_up(fn, {}).value();   // "bring-up step INIT_PAGES: MANAGE_PAGES ..."
//   nic->caps().log_max_qp;  nic->mac();  nic->gids();
//   nic->teardown();
//
// Bring-up is a named state machine, like SPDK's controller init: each step has its own
// deadline (hca_timeouts) and a failed step gives an error that names it. The steps, in order:
//   WAIT_INITIALIZING  iseg.initializing clears (kernel: before the queue is programmed)
//   COMMAND_QUEUE      queue page programmed, initializing clear again (command_queue::create)
//   ENABLE_HCA         ENABLE_HCA
//   ISSI               QUERY_ISSI, SET_ISSI 1 (the firmware must support ISSI 1, as rdma-core)
//   BOOT_PAGES         QUERY_PAGES(boot) + MANAGE_PAGES GIVE
//   HOST_ENDIANNESS    ACCESS_REG write HOST_ENDIANNESS (little-endian host: 0x00)
//   CAPABILITIES       QUERY_HCA_CAP general and RoCE (MAX, CUR); the port must be Ethernet
//                      with RoCE; SET_HCA_CAP as rdma-core: cmdif_checksum 0 (ENABLED with
//                      options.checksums: signatures checked from then on), log_uar_page_sz 0,
//                      mkey_by_name when offered, disable_link_up on request; RoCE
//                      sw_r_roce_src_udp_port when offered
//   INIT_PAGES         QUERY_PAGES(init) + MANAGE_PAGES GIVE
//   INIT_HCA           INIT_HCA
//   NIC_VPORT          MODIFY_NIC_VPORT_CONTEXT roce_en 1, QUERY_NIC_VPORT_CONTEXT (MAC),
//                      QUERY_VPORT_STATE (port state)
//   GID                SET_ROCE_ADDRESS index 0: RoCE v2, the IPv6 link-local GID of the port's
//                      MAC (fe80::/64 + modified EUI-64), as Linux's first GID of a RoCE port
//   UAR                ALLOC_UAR (the event queue's doorbell page)
//   EVENT_QUEUE        events::start: EQ, MSI-X vector 0, event mode, health watch
//   READY
// A failed bring-up undoes what it did, in teardown order, before it returns the error; when
// the firmware stopped answering it sends nothing more and strands what the firmware may name.
//
// Teardown (the kernel's order, main.c mlx5_function_teardown; rdma-core mlx5_vfio_free_context):
// events stop (DESTROY_EQ), DEALLOC_UAR, TEARDOWN_HCA (graceful), MANAGE_PAGES TAKE of every page,
// DISABLE_HCA, command queue freed. On firmware that stopped answering (timeout, fatal) teardown
// still completes locally: every memory the firmware may name stays allocated and mapped, is listed
// by stranded(), and the device is not touched again.
//
// Threads: bring_up and teardown from one thread; the accessors from any thread.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abi/mlx5/ifc/qp.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/capabilities.hpp"
#include "firmware/mlx5/command_queue.hpp"
#include "firmware/mlx5/command_trace.hpp"
#include "firmware/mlx5/error.hpp"
#include "firmware/mlx5/events.hpp"
#include "firmware/mlx5/pages.hpp"
#include "firmware/mlx5/stranded.hpp"

namespace rig::firmware::mlx5 {

enum class bring_up_step : std::uint8_t {
    wait_initializing,
    command_queue,
    enable_hca,
    issi,
    boot_pages,
    host_endianness,
    capabilities,
    init_pages,
    init_hca,
    nic_vport,
    gid,
    uar,
    event_queue,
    ready,
};
std::string_view to_string(bring_up_step s) noexcept;  // "INIT_PAGES"

enum class teardown_step : std::uint8_t { event_queue, uar, teardown_hca, reclaim_pages, disable_hca, done };
std::string_view to_string(teardown_step s) noexcept;  // "TEARDOWN_HCA"

using ms = std::chrono::milliseconds;

struct hca_timeouts {
    ms wait_initializing{120000};  // kernel FW_PRE_INIT_TIMEOUT_MILI
    ms command_queue{2000};        // kernel FW_INIT_TIMEOUT_MILI
    ms enable_hca{5000};
    ms issi{5000};
    ms boot_pages{10000};
    ms host_endianness{5000};
    ms capabilities{5000};
    ms init_pages{10000};
    ms init_hca{10000};
    ms nic_vport{5000};
    ms gid{5000};
    ms uar{5000};
    ms event_queue{5000};
    ms page_request{10000};  // one answer to a PAGE_REQUEST event
    // teardown, step by step
    ms stop_events{5000};
    ms dealloc_uar{5000};
    ms teardown_hca{10000};
    ms reclaim_pages{10000};
    ms disable_hca{5000};
};

struct hca_options {
    hca_timeouts timeouts;
    command_queue_options queue;
    page_supply_options pages;
    events_options events;  // events.stranded is set to the hca's own registry
    bool use_events = true;     // EVENT_QUEUE step; false: polling only, no page requests
    bool init_link_down = false;  // SET_HCA_CAP disable_link_up (when the NIC offers it)
    // SET_HCA_CAP cmdif_checksum ENABLED (the NIC must offer it), then the command queue checks
    // the signatures of every completion (command_queue::verify_signatures). Off as in rdma-core
    // and the kernel.
    bool checksums = false;
    command_sink trace;         // the command trace from the first command on (empty: off)
    // Events beyond page requests, forwarded from the event thread (may be empty).
    std::function<void(std::uint8_t port, bool up)> port_change;
    std::function<void(std::uint32_t cqn)> completion;
    std::function<void(std::uint32_t qpn, std::uint8_t event_type)> qp_event;
    std::function<void(const error&)> fatal;
};

struct firmware_version {
    std::uint16_t major = 0, minor = 0, subminor = 0;
    std::string text() const;  // "22.39.1002"
};

struct gid_entry {
    std::uint32_t index = 0;
    std::array<std::uint8_t, 16> gid{};
    std::uint8_t roce_version = 0;  // ifc::roce_addr::version_2
    std::uint8_t l3_type = 0;       // ifc::roce_addr::l3_type_ipv6
};

// The GID Linux puts first in a RoCE port's table: fe80::/64 with the modified EUI-64 of the
// MAC (U/L bit flipped, ff:fe in the middle; RFC 4291 appendix A, addrconf_ifid_eui48).
std::array<std::uint8_t, 16> link_local_gid(const std::array<std::uint8_t, 6>& mac) noexcept;

class hca {
public:
    using clock = command_queue::clock;

    static result<std::unique_ptr<hca>> bring_up(driver::function& fn, const hca_options& options = {});

    // Not torn down: tears down with the option's deadlines, errors logged.
    ~hca();
    hca(const hca&) = delete;
    hca& operator=(const hca&) = delete;

    // Idempotent: a second call does nothing and returns the first one's result.
    result<void> teardown();

    firmware_version version() const noexcept { return _version; }
    const hca_caps& caps() const noexcept { return _caps; }
    bool port_up() const noexcept { return _port_up.load(); }
    std::array<std::uint8_t, 6> mac() const noexcept { return _mac; }
    // The port's Ethernet MTU (nic_vport_context.mtu), and the RoCE path MTU that fits in it:
    // the largest of 256..4096 not above the MTU less the RoCE headers' 96 bytes (the kernel's
    // iboe_get_mtu: GRH 40, UDP 8, BTH 12, XRC 4, AtomicETH 28, ICRC 4). 1500 gives 1024, 9000
    // gives 4096; an MTU the vport does not report (0) gives 1024.
    std::uint16_t port_mtu() const noexcept { return _port_mtu; }
    ::rig::mlx5::ifc::qpc_mtu path_mtu() const noexcept;
    std::vector<gid_entry> gids() const { return _gids; }
    std::uint32_t uar() const noexcept { return _uar.value_or(0); }
    // The command queue and the page supply while the NIC is up; after teardown: misuse
    // (std::invalid_argument).
    command_queue& commands();
    page_supply& pages();
    stranded_memory& stranded_registry() noexcept { return *_stranded; }
    events* event_queue() noexcept { return _events.get(); }
    // Every memory the firmware may still name: stranded commands, firmware pages, objects'
    // buffers (the registry), and the command queue page once the firmware stopped answering.
    std::vector<stranded_region> stranded() const;
    // The firmware stopped answering or the NIC failed: the first such error.
    std::optional<error> failure() const;
    bool failed() const { return failure().has_value(); }
    bool torn_down() const noexcept { return _torn_down; }

private:
    hca(driver::function& fn, const hca_options& options);
    result<void> run_steps();
    result<void> step(bring_up_step s);
    result<void> wait_initializing(clock::time_point by);
    result<void> issi(clock::time_point by);
    result<void> host_endianness(clock::time_point by);
    result<void> capabilities(clock::time_point by);
    result<void> nic_vport(clock::time_point by);
    result<void> gid(clock::time_point by);
    result<void> event_queue(clock::time_point by);
    result<std::vector<std::byte>> exec_simple(ifc::opcode op, std::uint16_t op_mod, std::size_t in_bytes,
                                               std::size_t out_bytes, clock::time_point by);
    result<void> undo();  // teardown of what bring-up did
    void note(const error& e);  // remembers a firmware that stopped answering
    bool dead() const;

    driver::function& _fn;
    hca_options _options;
    std::unique_ptr<stranded_memory> _stranded;
    std::unique_ptr<command_queue> _queue;
    std::unique_ptr<page_supply> _pages;
    std::unique_ptr<events> _events;
    bring_up_step _reached = bring_up_step::wait_initializing;
    bool _enabled = false;
    bool _initialized = false;
    std::optional<std::uint32_t> _uar;
    bool _torn_down = false;
    std::optional<error> _teardown_error;
    firmware_version _version;
    hca_caps _caps;
    std::array<std::uint8_t, 6> _mac{};
    std::uint16_t _port_mtu = 0;
    std::vector<gid_entry> _gids;
    std::atomic<bool> _port_up{false};
    mutable std::mutex _lock;  // _failure
    std::optional<error> _failure;
};

}  // namespace rig::firmware::mlx5
