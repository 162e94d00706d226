#pragma once
// A Broadcom BCM57508 (P5 "Thor") PCI function, as a vfio-user device: config space, BAR0 with
// the HWRM channel, BAR2 doorbells, BAR4 with the MSI-X table and PBA, and a firmware thread
// that runs HWRM requests (firmware.hpp). bnxt_hsi.h and bnxt_hwrm.c; docs/architecture.md,
// "The device model".
//
//   sim::bnxt::function_model fn;                         // or fn({.firmware = {...}})
//   auto srv = sim::vfio_user::server::create(path, fn).value();
//   fn.attach(*srv);
//   srv->start();
//   // a driver: driver::open("vfio-user:" + path), dma_map its buffers, then per request:
//   //   region_write(BAR0, 0x000, request)  (32-bit writes; zero the rest of the window)
//   //   region_write(BAR0, 0x100, le32 1)   (the trigger)
//   //   poll the response at resp_addr until resp_len != 0 and byte resp_len-1 == 1
//
// Config space (sim/pci/config_space): vendor 0x14e4, device options.device_id (0x1750), class
// 0x020000; BAR0 (64-bit, 64 KiB), BAR2 (64-bit, options.bar2_size), BAR4 (64-bit, the MSI-X
// table and PBA); capabilities MSI-X at 0x40 (options.msix_vectors, table BAR4 +0, PBA after
// it) and PCI Express at 0x60 (an endpoint with FLR: Initiate FLR resets the function).
//
// BAR0, trapped (every access a REGION_READ/WRITE):
//  - 0x000 .. max_req_win_len-1: the HWRM request window; reads give back what was written.
//  - 0x100: the trigger. A write of 1 hands the window, as it is then, to the firmware thread,
//    which runs it after options.command_latency; the response goes to the request's resp_addr.
//    A trigger while a request is still running is ignored (one command at a time) and counted
//    (doorbells_ignored). Reads give 1 while a request runs, 0 otherwise.
//  - 0x600 .. 0x703: the RoCE mailbox (cmdq_init at 0x600, producer 0x60C, trigger 0x700).
//    A write of 1 to 0x700 hands the mailbox to the firmware thread: a producer with bit 31
//    (re)starts the channel from cmdq_init, then the commands up to the producer run and
//    complete on the CREQ, whose MSI-X vector (its logical_id) is raised (firmware::rcfw_doorbell).
//  - everything else reads 0 and ignores writes.
// BAR2: doorbells: the L2/privileged page at db_offset 0x10000 (FUNC_QCFG
// legacy_l2_db_size_kb), trapped (every store a REGION_WRITE, taken in order: notices.cpp), and
// shared memory the client maps (sparse mmap) around it: DPI pages after the L2 area
// (l2_doorbell_bar_size_kb). The data path (datapath.hpp, once attach_wire joined a wire)
// polls the shared pages its objects name (docs/bnxt-data-path.md).
// BAR4: the MSI-X table (16 bytes a vector) at 0 and the PBA after it, trapped (sim/pci/msix).
//
// Faults (test hooks; rig-nicsim's fault plan through options.fault, channel 0 = hwrm):
// silence()/resume() (requests are taken and not answered / answered now), fail_next(req_type,
// error_code, cmd_err) (the next such request is refused with them and does not run), die()
// (config space and BARs read all ones, writes dropped, nothing answered; a reset brings it
// back), die_for_good(). fatal (the plan's) silences the firmware as a crashed ChiMP would.
// Every reset (VFIO_USER_DEVICE_RESET, FLR, the client's going) resets the firmware (all
// objects, context memory given back, DEV_NOT_RDY again for firmware.not_ready_time), undoes
// the faults and re-arms the plan. A client that goes away leaves the function reset.
//
// Limits: requests run on the firmware thread, so their memory must be announced with an fd
// (windows without fd are reached only from the server's thread: such a request's DMA is
// refused and reported). A request's cmpl_ring is not read: no HWRM_DONE completion is written,
// the driver polls the response (bnxt_en and DPDK send cmpl_ring 0xffff).
//
// Thread-safe: the server's thread, the firmware thread and a test's thread may all call in.
#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "abi/pci_ids.hpp"
#include "sim/bnxt/firmware.hpp"
#include "sim/pci/config_space.hpp"
#include "sim/pci/fault_plan.hpp"
#include "sim/pci/msix.hpp"
#include "sim/vfio_user/device.hpp"
#include "sim/vfio_user/server.hpp"

namespace rig::sim::roce {
class wire;
}

namespace rig::sim::bnxt {

class datapath;  // sim/bnxt/datapath.hpp

inline constexpr std::uint16_t broadcom_vendor_id = ::rig::abi::pci::vendor_broadcom;
inline constexpr std::uint16_t bcm57508_device_id = 0x1750;
inline constexpr std::uint64_t bar0_bytes = 64 << 10;
inline constexpr std::uint64_t hwrm_trigger = 0x100;          // GRCPF_REG_CHIMP_COMM_TRIGGER
inline constexpr std::uint64_t rcfw_mailbox = 0x600;          // RCFW_COMM_BASE_OFFSET
inline constexpr std::uint64_t rcfw_mailbox_bytes = 0x104;    // RCFW_COMM_SIZE
inline constexpr std::size_t msix_cap_offset = 0x40;
inline constexpr std::size_t express_cap_offset = 0x60;

struct function_options {
    std::uint16_t device_id = bcm57508_device_id;
    std::uint16_t function_index = 0;   // which function of the card (rig-nicsim's k); logs
    std::uint64_t bar2_size = 4u << 20;  // a power of two, above the L2 doorbell area
    std::uint16_t msix_vectors = 64;     // also FUNC_RESOURCE_QCAPS max_msix
    std::chrono::microseconds command_latency{0};   // firmware time per HWRM request and per CMDQ trigger
    pci::fault_plan fault;               // fail_command: channel 0 (hwrm) only for now
    pci::link link{};                    // a BCM57508 is a Gen4 x16
    firmware_options firmware;
    // rig-nicsim --report-ledger: after every FUNC_DRV_UNRGTR the driver's going leaves, every
    // FUNC_RESET, every reset and the firmware's own reset after its notice, a line
    // "LEDGER function=K event=drv_unrgtr|func_reset|reset|firmware_reset rings=N stat_ctxs=N vnics=N
    // filters=N roce_objects=N context_pages=N" (what the firmware still holds), lock held.
    std::function<void(const std::string&)> on_ledger;
    // The data path (docs/bnxt-data-path.md "Completions"): a requester CQE only for signalled
    // WQEs and failed ones (on, the chip's aggregation), or one for every WQE (off).
    bool aggregate_requester_cqes = true;
    // RES_RC HW_FLUSH_ERR CQEs for the receives left on a QP that failed (drivers skip them).
    bool hw_flush_cqes = false;
    // The reset notice's waits (RESET_NOTIFY timestamp_lo/hi, deciseconds; bnxt_en's defaults
    // BNXT_DFLT_FW_RST_MIN_DSECS 20 and _MAX_DSECS 60): the firmware answers again after the
    // minimum.
    std::uint16_t reset_min_wait_ds = 20;
    std::uint16_t reset_max_wait_ds = 60;
};

class function_model final : public vfio_user::device {
public:
    explicit function_model(function_options options = {});
    ~function_model() override;
    function_model(const function_model&) = delete;
    function_model& operator=(const function_model&) = delete;

    // The server whose DMA space and interrupts the model uses (before the server starts).
    void attach(vfio_user::server& s);
    // Joins `w` under the function's MAC and starts the data path (datapath.hpp): doorbells,
    // WQEs, CQEs and NQ entries of the RC queue pairs. Misuse (attached twice, the MAC already on
    // the wire) throws std::invalid_argument.
    void attach_wire(roce::wire& w);
    const datapath* data_path() const noexcept { return _datapath.get(); }

    vfio_user::region_desc region(unsigned index) override;
    std::uint32_t irq_count(vfio_user::irq kind) override;
    bool read(unsigned region, std::uint64_t offset, std::span<std::byte> out) override;
    bool write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) override;
    void reset() override;
    void disconnected() override;
    void server_closing() override;

    // ---- faults ----
    void silence();
    void resume();
    void fail_next(std::uint16_t req_type, std::uint16_t error_code, std::uint8_t cmd_err);
    // The next RoCE command of `opcode` completes with CREQ `status` and does not run.
    void fail_next_rcfw(std::uint8_t opcode, std::uint8_t status);
    void die();
    void die_for_good();
    // The cable: PORT_PHY_QCFG's link, and a LINK_STATUS_CHANGE async event when the driver
    // asked for one (firmware::set_link), raising its NQ's vector when armed. true when the
    // event was written.
    bool set_link(bool up);
    // The firmware's reset notice (the fault plan's fatal, notices.cpp): RESET_NOTIFY with
    // `reason` to the async event ring when the driver registered for it, then the firmware is
    // in reset: it answers nothing (either channel) for reset_min_wait, then comes back as after
    // a reset (every object and the context memory dropped, DEV_NOT_RDY for not_ready_time).
    // true when the notice was written.
    bool reset_notice(std::uint8_t reason);
    // The NIC moved queue pair `qpn` to the error state (firmware::rcfw_qp_error): a
    // QP_ERROR_NOTIFICATION on the CREQ and its MSI-X vector. false when nothing was written.
    bool qp_error(std::uint32_t qpn, std::uint8_t req_reason, std::uint8_t res_reason, std::uint16_t sq_cons,
                  std::uint16_t rq_cons);

    // ---- inspection ----
    std::uint64_t commands_completed() const;
    std::uint64_t doorbells_ignored() const;
    std::optional<outcome> last_outcome() const;
    bool busy() const;      // a request taken and not answered
    bool failed() const;    // dead
    std::size_t context_pages() const;
    std::vector<context_violation> context_violations() const;
    bool roce_backing_store() const;
    bool roce_receive_ready() const;
    std::size_t rings() const;
    // MSI-X messages the model raised on `vector` since it was made (CREQ, NQs, async events).
    std::uint64_t interrupts(std::uint16_t vector) const;
    // The firmware is in reset after its notice (not answering yet).
    bool in_firmware_reset() const;
    // Blocks until no request is due (silence aside) or the timeout passes; false on timeout.
    bool wait_idle(std::chrono::milliseconds timeout) const;
    // Runs `f(firmware&)` under the model's lock (tests: the firmware's state).
    template <class F>
    auto with_firmware(F&& f) const {
        std::lock_guard g(_lock);
        return f(_fw);
    }

private:
    using clock = std::chrono::steady_clock;
    void reset_locked();
    void report_ledger(const char* event) const;
    void run_thread();
    void run_pending_locked();
    bool bar0_read(std::uint64_t offset, std::span<std::byte> out);
    bool bar0_write(std::uint64_t offset, std::span<const std::byte> in);
    void trigger_locked();
    void run_rcfw_locked();
    // notices.cpp
    std::uint64_t privileged_page() const noexcept;   // its offset in BAR2 (db_offset)
    void privileged_write_locked(std::uint64_t offset, std::size_t bytes);
    void raise_locked(std::uint16_t vector);
    bool reset_notice_locked(std::uint8_t reason);
    void firmware_back_locked();

    const function_options _options;
    mutable std::mutex _lock;
    mutable std::condition_variable _wake;
    mutable std::condition_variable _idle;
    vfio_user::server* _server = nullptr;
    firmware _fw;
    pci::config_space _config;
    pci::msix_table _msix;
    vfio_user::shared_memory _bar2;
    std::array<std::byte, 128> _window{};
    std::array<std::byte, rcfw_mailbox_bytes> _mailbox{};
    std::optional<std::array<std::byte, 128>> _pending;   // the window a trigger handed over
    clock::time_point _due{};
    clock::time_point _rcfw_due{};   // the CMDQ trigger's commands run from then (command_latency)
    bool _stop = false;
    std::uint64_t _completed = 0;
    std::uint64_t _ignored = 0;
    std::optional<outcome> _last;
    bool _silent = false;
    bool _dead = false;
    bool _dead_for_good = false;
    struct injected {
        std::uint16_t req_type, error_code;
        std::uint8_t cmd_err;
    };
    std::vector<injected> _fail_next;
    bool _rcfw_kick = false;   // the CMDQ trigger was written: commands to run
    std::vector<std::pair<std::uint8_t, std::uint8_t>> _rcfw_fail_next;   // opcode, CREQ status
    pci::fault_arm _arm;
    std::uint64_t _resets = 0;   // function resets: the data path drops what it followed
    std::optional<clock::time_point> _firmware_back;   // in reset after its notice until then
    std::map<std::uint16_t, std::uint64_t> _raised;    // MSI-X messages by vector
    friend class datapath;
    std::unique_ptr<datapath> _datapath;   // after attach_wire; stopped before the rest goes
    std::thread _thread;   // last: started once everything above exists
};

}  // namespace rig::sim::bnxt
