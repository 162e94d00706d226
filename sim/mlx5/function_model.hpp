#pragma once
// A ConnectX function, as a vfio-user device: PCI identity with an MSI-X capability, BAR0 with
// the initialization segment, UAR pages and the MSI-X table, a firmware thread that runs the
// command queue, and the event engine that writes EQEs and raises MSI-X vectors (the kernel's
// include/linux/mlx5/device.h and mlx5_ifc.h; docs/architecture.md, "The device model").
//
//   sim::mlx5::function_model fn;
//   auto srv = sim::vfio_user::server::create(path, fn).value();
//   fn.attach(*srv);
//   srv->start();
//
// Config space (config_space.cpp: mlx5's choices for sim/pci's config_space), 4 KiB: vendor
// 0x15b3, device `options.device_id` (ConnectX-6 Dx by default), class 0x020000, BAR0 a 64-bit
// prefetchable memory BAR of options.bar0_size bytes; the command register, BAR0 (sizing included) and the MSI-X
// enable/mask bits are writable. Capabilities: MSI-X (ID 0x11) at 0x40, table size
// firmware.msix_vectors, table and PBA in BAR0 (below); PCI Express (0x10) at 0x60, an endpoint
// with options.link (16 GT/s x16 by default) and FLR (sim/pci/express.hpp: Initiate FLR resets
// the function as VFIO_USER_DEVICE_RESET does); vendor-specific (0x09) at 0xc0, the gateway of
// the kernel's pci_vsc.c (vsc.hpp). No extended capability: 0x100 reads 0.
//
// BAR0, 4 KiB pages (UAR k is page k with log_uar_page_sz 0: kernel uar.c uar2pfn):
//  - pages 0 .. first_uar_page-1: the initialization segment (device.h struct mlx5_init_seg),
// trapped;
//  - pages first_uar_page .. first_uar_page + uar_pages - 1: UAR pages. The first
//    trapped_uar_pages of them are trapped (every write arrives, in order: EQ doorbells applied
//    at once, other registers stored as a mapped write would be); the others are shared memory
//    the client maps (sparse mmap) and the firmware thread and data path poll (events.cpp);
//  - the last pages (layout_of()): the MSI-X table (16 bytes a vector, rounded up to a page),
//    then the PBA (one page), trapped. They sit at the end of BAR0 so that they never meet a
//    UAR page. The table is plain trapped storage (sim/pci/msix.hpp): a vfio-user server does
//    not see vector programming, the client wires vectors with SET_IRQS (QEMU
//    docs/interop/vfio-user.rst, "VFIO_USER_DEVICE_SET_IRQS");
//  - the rest reads 0 and ignores writes.
// Init segment: initializing (0x1fc bit 31) reads 1 for options.init_time after construction or
// reset; health_counter (0x1010) advances on every read of it until the firmware fails; the
// health buffer holds fw_version and, after a fatal error, rfr/valid/severity/synd/ext_synd;
// internal_timer (0x1000, device.h) counts nanoseconds (device_frequency_khz 1 GHz);
// cmdq_addr_h / cmdq_addr_l_sz take the queue's address.
//
// Commands (rdma-core mlx5_vfio.c; kernel cmd.c): a write of a slot vector to the doorbell (0x18)
// queues those slots and returns; the firmware thread runs them (after options.command_latency),
// writes the outputs, hands each entry back (ownership written last) and posts one CMD EQE whose
// vector names the slots it handed back that were issued while an EQ subscribed to CMD (0x0a)
// existed (a command issued before, such as the CREATE_EQ that makes the command EQ, gets none:
// cmdq.cpp). Doorbells rung while initializing are ignored. Exception: a queue in memory the client
// announced without an fd is reached only by VFIO_USER_DMA_READ/WRITE, which the protocol allows
// only while the client waits for a reply; such a command runs inside the doorbell write, as
// before.
//
// Faults (test hooks here, rig-nicsim options through sim/family.hpp; the plan's neutral form
// and its parse are sim/pci/fault_plan.hpp's): fatal(synd), silence()/resume(),
// fail_next(opcode, status, syndrome), die(). A vfio-user reset (FLR) undoes every one (a
// fault_plan in the options strikes again after it). A client that goes away leaves the
// function in reset state for the next one.
//
// Thread-safe: the server's thread, the firmware thread and a test's thread may all call in.
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "abi/mlx5/doorbell.hpp"
#include "abi/mlx5/ifc/cmd.hpp"
#include "abi/mlx5/ifc/cmdq.hpp"
#include "abi/mlx5/ifc/init_seg.hpp"
#include "abi/pci_ids.hpp"
#include "sim/mlx5/firmware.hpp"
#include "sim/mlx5/vsc.hpp"
#include "sim/pci/config_space.hpp"
#include "sim/pci/express.hpp"
#include "sim/pci/fault_plan.hpp"
#include "sim/pci/msix.hpp"
#include "sim/vfio_user/device.hpp"
#include "sim/vfio_user/server.hpp"

namespace rig::sim::roce {
class wire;
}

namespace rig::sim::mlx5 {

class datapath;  // sim/mlx5/datapath.hpp

// The model is a ConnectX-6 Dx by default: its IDs are abi/pci_ids.hpp's, the list the driver
// picks the family by.
inline constexpr std::uint16_t mellanox_vendor_id = ::rig::abi::pci::connectx6dx.vendor;
inline constexpr std::uint16_t connectx6dx_device_id = ::rig::abi::pci::connectx6dx.device;
inline constexpr std::size_t uar_page_bytes = ::rig::mlx5::abi::uar_page_size;
// cmd_hca_cap.log_bf_reg_size: 512-byte bfregs of two 256-byte halves (rdma-core mlx5.h, qp.c);
// caps.cpp advertises it, doorbells.cpp polls the halves it makes
inline constexpr std::uint32_t log_bf_reg_size = 9;
inline constexpr std::size_t msix_cap_offset = 0x40;  // in config space
inline constexpr std::size_t express_cap_offset = 0x60;
inline constexpr std::size_t vsc_cap_offset = 0xc0;

// A fault the function suffers by itself, from its options (rig-nicsim --fault): once
// `after_commands` commands have completed since the last reset, the firmware goes silent,
// reports a fatal health syndrome, fails the next command with `opcode`, or the function dies.
// Every reset re-arms it, so a driver meets it again on each bring-up (sim/pci/fault_plan.hpp:
// the family-neutral plan; this is its mlx5 form, in the command queue's own types).
struct fault_plan {
    using kind = pci::fault_kind;
    kind what = kind::none;
    std::uint32_t after_commands = 0;
    std::uint8_t health_syndrome = 0x01;  // fatal: FW internal error (kernel health.c)
    std::uint16_t opcode = 0;             // fail_command
    rig::mlx5::ifc::cmd_status status = rig::mlx5::ifc::cmd_status::bad_param_err;
    std::uint32_t syndrome = 0;
};

// What the neutral plan's numbers mean on mlx5 (rig-nicsim --fault-fail OP:STATUS[:SYNDROME],
// --fault-fatal SYND): one channel, the command queue, opcodes 16-bit, statuses 8-bit
// (mlx5_ifc.h mbox_out status), syndromes 32-bit (0x4dfa0000 when none is given); fatal's
// argument the health syndrome (initial_seg health_syndrome, 8 bits, 0 is "no error").
inline constexpr pci::fault_channel fault_channels[] = {
    {.name = "cmdq", .opcode_name = "opcode", .max_opcode = 0xffff, .status_name = "status", .max_status = 0xff,
     .max_syndrome = 0xffffffff, .default_syndrome = 0x4dfa0000},
};
inline constexpr pci::fault_space fault_space{
    .family = "mlx5", .channels = fault_channels, .fatal_name = "health syndrome", .min_fatal = 1, .max_fatal = 0xff};
// The neutral plan in mlx5's form (its numbers in fault_space's ranges).
fault_plan to_fault_plan(const pci::fault_plan& p);

// What the function still held from its driver when it was disabled or reset (rig-nicsim
// --report-ledger prints it): firmware pages the driver gave and did not take back, and
// resource objects of every kind (UAR, PD, MKEY, EQ, CQ, QP) still alive. Counted as the
// event arrives, before the function drops them. TEARDOWN_HCA ends every object, so objects
// at DISABLE_HCA are those of a driver that did not tear down.
struct ledger_entry {
    enum class event : std::uint8_t { disable_hca, reset };
    std::uint16_t function = 0;  // function_options::function_index
    event what = event::reset;
    std::size_t pages = 0;
    std::size_t objects = 0;
};
std::string to_string(const ledger_entry& e);  // "LEDGER function=K event=... pages=N objects=M"

struct function_options {
    std::uint16_t device_id = connectx6dx_device_id;
    std::uint64_t bar0_size = 32u << 20;  // a power of two, at least 64 KiB
    std::chrono::milliseconds init_time{20};
    std::uint16_t fw_rev_major = 22;
    std::uint16_t fw_rev_minor = 39;
    std::uint16_t fw_rev_subminor = 1002;
    std::uint8_t log_cmdq_size = 5;    // 32 entries
    std::uint8_t log_cmdq_stride = 6;  // 64 bytes apart
    // Which function of the card this is (rig-nicsim numbers them 0..N-1; logs name it). The
    // permanent MAC is firmware.mac; when that is 0 the model picks one at construction,
    // 02:52:49:47:xx:xx, unique in the process, and keeps it across resets.
    std::uint16_t function_index = 0;
    // How long the firmware takes over each command before handing the entry back.
    std::chrono::microseconds command_latency{0};
    // After this many commands (0: never) the firmware asks for page_request_pages more pages
    // (negative: gives that many back) by a PAGE_REQUEST event, once per reset (kernel pagealloc.c
    // req_pages_handler).
    std::uint32_t page_request_after = 0;
    std::int32_t page_request_pages = 0;
    fault_plan fault;
    firmware_options firmware;
    // The first UAR pages (ALLOC_UAR hands out the lowest free one, so a driver's first UAR is
    // one of them) are trapped: each write a REGION_WRITE the model takes in order, so EQ
    // doorbells that share a word are each seen (events.cpp). The rest are shared memory the
    // client maps, polled, costing the data path no message.
    std::uint32_t trapped_uar_pages = 1;
    // The PCI Express link (Link Capabilities and Link Status): a ConnectX-6 Dx is a Gen4 x16.
    pci::link link;
    // Called after every DISABLE_HCA that ran and every function reset (VFIO_USER_DEVICE_RESET,
    // FLR, the client's going), with the model's lock held: it must not call into the model.
    std::function<void(const ledger_entry&)> on_ledger;

};

// What the command engine did with the last doorbell of a slot (for tests and logs).
struct completion {
    bool ran = false;  // false: ignored (not owned by the device, or initializing)
    rig::mlx5::ifc::delivery_status delivery = rig::mlx5::ifc::delivery_status::ok;
};

// Where the BAR0 pieces lie for given options (see the header comment).
struct bar0_layout {
    std::uint64_t uar_begin;    // byte offset of the first UAR page
    std::uint64_t trapped_end;  // one past the last trapped UAR page (uar_begin: none trapped)
    std::uint64_t uar_end;      // one past the last UAR page
    std::uint64_t msix_table;   // byte offset of the MSI-X table
    std::uint64_t msix_pba;     // byte offset of the pending-bit array
};
bar0_layout layout_of(const function_options& o);

class function_model final : public vfio_user::device {
public:
    explicit function_model(function_options options = {});
    ~function_model() override;
    function_model(const function_model&) = delete;
    function_model& operator=(const function_model&) = delete;

    // The server whose DMA space and interrupts the model uses (before the server starts; the
    // server must outlive every later call that posts an event).
    void attach(vfio_user::server& s);
    // Joins `w` under the function's MAC and starts the data path (datapath.hpp): doorbells,
    // work entries and completions of its RC queue pairs. Once; `w` must outlive the function.
    // Misuse (a second call, the MAC already on the wire) throws std::invalid_argument.
    void attach_wire(roce::wire& w);
    const datapath* data_path() const noexcept { return _datapath.get(); }

    vfio_user::region_desc region(unsigned index) override;
    std::uint32_t irq_count(vfio_user::irq kind) override;
    bool read(unsigned region, std::uint64_t offset, std::span<std::byte> out) override;
    bool write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) override;
    void reset() override;
    void disconnected() override;
    // The data path (which caches the server's DMA space) stops, and the firmware thread,
    // which checks for a server under the lock, finds none: whichever of server and function
    // goes first, no thread of the function touches a server that is gone.
    void server_closing() override;

    // ---- events (events.cpp) ----
    // Writes one EQE of `type` (data: the 28 event-data bytes, shorter is zero-filled) into the
    // lowest-numbered EQ whose event_bitmask has the type. false: no such EQ, the firmware is
    // failed, or the EQE could not be written (the EQ buffer is not mapped; an overrun makes the
    // firmware fatal with syndrome 0xc).
    bool post_event(std::uint8_t type, std::uint8_t sub_type, std::span<const std::byte> data);
    // PAGE_REQUEST (func_id 0): n > 0 asks for n more pages, n < 0 gives -n back.
    bool request_pages(std::int32_t n);
    // PORT_CHANGE for port 1, sub_type ACTIVE or DOWN. The cable is the firmware's link state
    // (port_up(), QUERY_VPORT_STATE); a function reset plugs it back in.
    bool set_port_state(bool up);
    // For the data path (next issue): COMP on the EQ of the CQ's c_eqn; CQ_ERROR; a QP event
    // (type: PATH_MIG .. WQ_ACCESS_ERROR) with qp_events.type 0 (a QP).
    bool post_completion(std::uint32_t cqn);
    bool post_cq_error(std::uint32_t cqn, std::uint8_t syndrome);
    bool post_qp_event(std::uint32_t qpn, std::uint8_t event_type);

    // ---- faults ----
    // The health buffer reports a fatal error (rfr, synd, ext_synd); the health counter stops;
    // no command completes and no event is posted until reset.
    void fatal(std::uint8_t synd, std::uint16_t ext_synd = 0);
    // The command interface stops answering: doorbells are taken, entries stay owned by the
    // device. The heartbeat goes on and hooks may still post events (a hung command engine,
    // not a dead firmware: that is fatal()).
    void silence();
    void resume();  // commands taken while silent run now
    // Test hook: while on, the EQs' MSI-X messages are counted (interrupts_raised) but not sent,
    // as messages lost on the way to the driver's eventfd; the EQEs are written as ever.
    void withhold_interrupts(bool on);
    // The next command with this opcode fails with `status` and `syndrome` (it does not run).
    void fail_next(std::uint16_t opcode, rig::mlx5::ifc::cmd_status status, std::uint32_t syndrome);
    // The function is gone: config space and BAR0 read all ones, writes are dropped, nothing
    // completes, no interrupt. A reset brings it back.
    void die();
    // As die(), and no reset brings it back: a card that failed, not a hung one (rig-nicsim
    // --function-dies-after-ms). Its data path moves nothing from then on: no frame out, no
    // DMA, no completion. The server keeps serving: a driver meets a function that reads all
    // ones and answers nothing, as a card fallen off the bus does, not a closed socket.
    void die_for_good();
    // Test hook for the driver's signature checks (cmdq.cpp): the next command handed back with
    // a delivery status OK and output block `block` (output_entry: the entry itself) gets that
    // block's (the entry's) signature byte flipped after signing. Checksums on or off. A reset
    // disarms it.
    static constexpr unsigned output_entry = ~0u;
    void corrupt_next_output_signature(unsigned block = output_entry);
    // Test hook: the function's lock, held until the returned lock goes, as the firmware thread
    // holds it while it runs a command; the function's data path passes meanwhile
    // (roce::step_when_free).
    std::unique_lock<std::mutex> hold_lock() const { return std::unique_lock(_lock); }

    // ---- inspection ----
    hca_state state() const;
    std::uint16_t issi() const;
    std::size_t pages_owned() const;
    std::size_t objects() const;
    std::uint64_t cmdq_address() const;
    std::uint64_t doorbells_ignored() const;
    std::uint64_t commands_completed() const;
    std::uint64_t events_posted() const;
    std::uint64_t interrupts_raised() const;
    std::uint32_t commands_pending() const;  // slot vector taken but not handed back
    completion last_completion(unsigned slot) const;
    bool port_up() const;
    bool failed() const;  // fatal or dead
    // capabilities, vport, RoCE address, firmware pages (caps.cpp)
    std::array<std::uint8_t, 6> mac() const;
    bool roce_enabled() const;
    std::optional<roce_addr> gid(std::uint32_t index) const;  // nullopt: no entry
    std::vector<page_violation> page_violations() const;
    // Blocks until no command is due (silence aside) or the timeout passes; false on timeout.
    bool wait_idle(std::chrono::milliseconds timeout) const;

private:
    static constexpr std::size_t iseg_bytes = rig::mlx5::ifc::initial_seg::size_bytes;
    using clock = std::chrono::steady_clock;

    // init_segment.cpp, with _lock held
    bool initializing() const;
    void refresh_iseg();
    void write_iseg_dword(std::uint64_t offset, std::uint32_t host_value);
    void reset_locked();
    void function_reset_locked();  // reset_locked, the config state, the ledger line
    // config_space.cpp: mlx5's choices for the neutral pieces (sim/pci); the rest with _lock held
    static pci::config_space make_config(const function_options& o, const bar0_layout& l);
    static pci::msix_location msix_of(const function_options& o, const bar0_layout& l);
    void config_read(std::uint64_t offset, std::span<std::byte> out);
    void config_write(std::uint64_t offset, std::span<const std::byte> in);
    void reset_config();
    void report_ledger(ledger_entry::event what, std::size_t pages, std::size_t objects) const;
    void clear_uar_pages();

    // cmdq.cpp, with _lock held
    void ring(std::uint32_t vector);
    completion run_slot(unsigned slot);
    std::uint32_t run_due_commands();  // the vector of slots handed back
    void handed_back(std::uint32_t vector);
    bool command_eq_exists() const;  // an EQ subscribes to the command event (0x0a)
    void mark_event_slot(unsigned slot, bool events);
    void firmware_loop();
    std::optional<clock::time_point> next_due() const;

    // events.cpp, with _lock held
    bool post_event_locked(std::uint8_t type, std::uint8_t sub_type, std::span<const std::byte> data);
    bool post_qp_event_locked(std::uint32_t qpn, std::uint8_t event_type);
    bool post_to_eq(eq_object& eq, std::uint8_t type, std::uint8_t sub_type, std::span<const std::byte> data);
    void interrupt(eq_object& eq);
    bool poll_eq_doorbells();  // true when a doorbell was written since the last look
    bool eq_doorbells_in_memory() const;
    bool in_memory(const eq_object& eq) const;   // its doorbells lie in an untrapped UAR page
    void apply_eq_doorbell(std::uint32_t page, bool arm, std::uint32_t value);
    void uar_write(std::uint64_t offset, std::span<const std::byte> in);  // a trapped UAR page
    void fatal_locked(std::uint8_t synd, std::uint16_t ext_synd);
    void strike_planned_fault();
    void die_locked();
    // without the lock: wakes the firmware thread
    void kick();

    const function_options _options;
    const bar0_layout _layout;
    mutable std::mutex _lock;
    mutable std::condition_variable _wake;  // the firmware thread's: work arrived, or stop
    mutable std::condition_variable _idle;  // tests' wait_idle: a pass left nothing due
    vfio_user::server* _server = nullptr;
    firmware _fw;
    pci::config_space _config;  // 4 KiB, the extended space reads 0 (config_space.cpp)
    vsc_gateway _vsc;           // the vendor-specific capability's registers
    pci::msix_table _msix;      // trapped at the end of BAR0 (layout_of)
    std::array<std::byte, iseg_bytes> _iseg{};
    vfio_user::shared_memory _bar0;  // the UAR pages (shared) and the MSI-X table (trapped)
    clock::time_point _ready_at;
    const clock::time_point _born = clock::now();  // the internal timer counts from here
    std::uint32_t _health_counter = 0;
    std::uint64_t _doorbells_ignored = 0;
    std::array<completion, rig::mlx5::ifc::cmdq::max_commands> _last{};

    // the firmware thread's work
    std::uint32_t _pending = 0;  // slots taken by a doorbell, not yet handed back
    std::uint32_t _event_slots = 0;  // slots issued while a command EQ existed: they get a CMD EQE
    std::array<clock::time_point, rig::mlx5::ifc::cmdq::max_commands> _due{};
    bool _kicked = false;
    // An EQE went to an EQ whose doorbells lie in memory: the driver answers it with doorbells,
    // which the firmware thread watches for at its short interval again (its arm may make an
    // EQE posted meanwhile signal).
    bool _eq_answer_due = false;
    bool _stop = false;
    std::uint64_t _completed = 0;
    bool _page_request_sent = false;
    pci::fault_arm _fault;  // the options' fault plan, re-armed at every reset

    // events and faults
    std::uint64_t _events = 0;
    std::uint64_t _interrupts = 0;
    bool _interrupts_withheld = false;
    bool _fatal = false;
    bool _silent = false;
    bool _dead = false;
    bool _dead_for_good = false;  // die_for_good(): every reset ends dead again
    struct injected_failure {
        std::uint16_t opcode;
        rig::mlx5::ifc::cmd_status status;
        std::uint32_t syndrome;
    };
    std::vector<injected_failure> _fail_next;
    std::optional<unsigned> _corrupt_output;  // corrupt_next_output_signature's block
    std::uint64_t _corrupt_armed_at = 0;       // _resets when it was armed

    friend class datapath;
    std::uint64_t _resets = 0;  // function resets so far: the data path drops what it followed
    std::unique_ptr<datapath> _datapath;  // after attach_wire; stopped before the rest goes

    std::thread _thread;  // last: started once everything above exists
};

}  // namespace rig::sim::mlx5
