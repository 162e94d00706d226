#pragma once
// The firmware of a ConnectX function model: the semantics of the commands the command queue
// delivers (mlx5_ifc.h; statuses and syndromes as the kernel's cmd.c names them). Transport-free:
// the command engine (cmdq.cpp) gathers a command's input from the queue entry and its mailboxes,
// calls execute(), and scatters the output back.
//
// Implemented: NOP, ENABLE_HCA, DISABLE_HCA, QUERY_ISSI, SET_ISSI, QUERY_PAGES, MANAGE_PAGES,
// INIT_HCA, TEARDOWN_HCA, QUERY_ADAPTER; resource objects (objects.cpp, qp.cpp): ALLOC/DEALLOC_UAR and _PD,
// CREATE/DESTROY_MKEY, _EQ, _CQ, _QP, the RC QP transitions and QUERY_QP.
// Capabilities, vport, RoCE address (caps.cpp): QUERY/SET_HCA_CAP (general and RoCE pages),
// ACCESS_REG HOST_ENDIANNESS, QUERY_VPORT_STATE, QUERY/MODIFY_NIC_VPORT_CONTEXT,
// SET/QUERY_ROCE_ADDRESS.
// Firmware pages: the pages given are kept in a page_ledger that watches the DMA space; a page
// unmapped while the firmware owns it, or still owned at DISABLE_HCA, is a page_violation.
// Any other opcode gets BAD_OP_ERR, as on a card.
//
// Not thread-safe: the function model serialises calls (the page ledger has its own lock).
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <string>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/cmd.hpp"
#include "sim/mlx5/objects.hpp"
#include "sim/object_changes.hpp"
#include "sim/vfio_user/dma_space.hpp"

namespace rig::sim::mlx5 {

// The function's state, as the firmware sees it (kernel main.c mlx5_function_enable: ENABLE_HCA,
// pages, INIT_HCA).
enum class hca_state : std::uint8_t {
    disabled,     // after reset and DISABLE_HCA
    enabled,      // after ENABLE_HCA, and after TEARDOWN_HCA
    initialized,  // after INIT_HCA
};

struct firmware_options {
    std::uint32_t boot_pages = 16;  // QUERY_PAGES op_mod 1
    std::uint32_t init_pages = 64;  // QUERY_PAGES op_mod 2 (beyond the boot pages)
    std::uint32_t max_pages = 1u << 20;  // pages the firmware will hold at most
    // ---- capabilities, vport, RoCE address (caps.cpp) ----
    // The port's permanent MAC (nic_vport_context.permanent_address); 0: one is assigned,
    // locally administered and unique within the process (02:52:49:47:xx:xx).
    std::uint64_t mac = 0;
    // nic_vport_context.mtu: the port's Ethernet MTU. A RoCE port is usually set up for jumbo
    // frames; 9000 lets a driver choose RoCE path MTU 4096 (1500 would give 1024).
    std::uint16_t port_mtu = 9000;
    std::uint16_t gid_table_size = 256;  // cmd_hca_cap.gid_table_size = roce_address_table_size
    std::uint8_t log_max_msg = 31;       // messages up to 2^31 bytes (docs/guide.md)
    std::uint8_t log_max_ra_req_qp = 4;  // 16 outstanding RDMA READs per QP, as ConnectX
    std::uint8_t log_max_ra_res_qp = 4;
    // ---- resource objects ----
    // UAR k is BAR0 page k. The init segment is more than its first page or two: the
    // kernel's struct mlx5_init_seg runs to clr_intx at 0x200c, and mlx5_ifc.h's initial_seg
    // is 0x400c bytes (pages 0-4). ALLOC_UAR hands out first_uar_page .. + uar_pages - 1, the
    // lowest free one first: a driver's first UAR is the function model's trapped page.
    std::uint32_t first_uar_page = 5;
    std::uint32_t uar_pages = 126;
    std::uint16_t msix_vectors = 64;       // eqc.intr must name one of these
    std::uint8_t log_max_qp_sz = 15;       // WQEs (caps log_max_qp_sz)
    std::uint8_t log_max_cq_sz = 22;       // CQEs (caps log_max_cq_sz)
    std::uint8_t log_max_eq_sz = 22;       // EQEs (caps log_max_eq_sz)
    std::uint32_t max_objects = 1u << 16;  // of each kind (PD, MKEY, EQ, CQ, QP)
    std::uint8_t log_rq_stride_max = 5;    // receive WQE up to 512 bytes (caps max_wqe_sz_rq)
    // ---- the board (QUERY_ADAPTER) ----
    // query_adapter_param_block.vsd_contd_psid: the board's PSID, up to 16 ASCII bytes (the
    // kernel's dev->board_id, devlink's board.id; mlxfw compares it with a firmware image's).
    // NVIDIA's boards carry "MT_" and ten digits; the model's own says it is not a board.
    std::string psid = "RIG_MODEL_CX6DX";
};

// Why a command failed: the low byte of the syndrome the model reports. The syndrome is
// 0x4d000000 | opcode << 8 | reason, never 0 (real syndromes are firmware-private codes).
enum class failure : std::uint8_t {
    bad_opcode = 0x01,
    input_too_short = 0x02,
    output_too_short = 0x03,
    wrong_state = 0x04,
    bad_parameter = 0x05,
    unaligned_page = 0x06,
    page_not_mapped = 0x07,
    page_already_given = 0x08,
    too_many_pages = 0x09,
    pages_missing = 0x0a,  // INIT_HCA before the boot and init pages were given
    // resource objects (objects.cpp, qp.cpp): 0x40..0x4f
    no_resources = 0x40,       // no UAR / object number left
    unknown_object = 0x41,     // DEALLOC/DESTROY/modify of a number that names nothing
    object_in_use = 0x42,      // destroy of an object another one still names
    bad_reference = 0x43,      // a context names a PD/UAR/EQ/CQ that does not exist
    bad_size = 0x44,           // a log size beyond the capabilities
    bad_transition = 0x45,     // a QP transition its current state does not allow
    missing_field = 0x46,      // a field a QP transition requires is absent or invalid
    bad_translation = 0x47,    // MKEY translation entries inconsistent with the region
    // capabilities, vport, RoCE address (caps.cpp)
    not_settable = 0x20,     // SET_HCA_CAP changes a field a driver may not set
    unknown_cap_type = 0x21, // QUERY/SET_HCA_CAP of a capability page the model does not have
    unknown_register = 0x22, // ACCESS_REG of a register the model does not have
    bad_gid_index = 0x23,    // roce_address_index past the GID table
};
constexpr std::uint32_t syndrome_of(std::uint16_t opcode, failure why) noexcept {
    return 0x4d000000u | (std::uint32_t{opcode} & 0xffffu) << 8 | static_cast<std::uint8_t>(why);
}

// ---- capabilities, vport, RoCE address (caps.cpp) ----
// One GID table entry as SET_ROCE_ADDRESS wrote it (mlx5_ifc.h roce_addr_layout).
struct roce_addr {
    std::array<std::uint8_t, 16> gid{};  // source_l3_address
    std::array<std::uint8_t, 6> mac{};   // source_mac_47_32 / 31_0
    std::uint8_t roce_version = 0;       // ifc::roce_addr::version_1 / version_2
    std::uint8_t l3_type = 0;            // ifc::roce_addr::l3_type_ipv4 / ipv6
    bool vlan_valid = false;
    std::uint16_t vlan_id = 0;
};

// A firmware page the driver took away while the firmware owned it (unmapped it, or disabled
// the function without taking it back): on a card the firmware would later read or write
// memory that is no longer the driver's to give.
struct page_violation {
    std::uint64_t iova = 0;
    std::string what;  // "unmapped while owned by the firmware", "still owned at DISABLE_HCA"
};

// The pages the firmware owns, shared with the DMA space it watches (dma_space's unmap
// observer holds it weakly, so either may go first). Its own lock: unmaps arrive on the
// server's thread outside the function model's lock.
class page_ledger final : public vfio_user::unmap_observer {
public:
    void unmapped(std::uint64_t iova, std::uint64_t size) override;
    void violation(std::uint64_t iova, std::string what);

    mutable std::mutex lock;
    std::set<std::uint64_t> pages;  // page addresses (IOVAs) the driver gave
    std::vector<page_violation> violations;
};

class firmware {
public:
    explicit firmware(firmware_options options = {});

    // One command. `in` holds the input as gathered (inlen bytes, at least the 16 inline ones);
    // the result is the output, max(outlen, 16) bytes, with mbox_out status and syndrome set.
    // `dma` is the function's view of client memory (MANAGE_PAGES checks the pages it is given);
    // nullptr: no memory is mapped.
    std::vector<std::byte> execute(std::span<const std::byte> in, std::size_t inlen, std::size_t outlen,
                                   vfio_user::dma_space* dma);

    // Function reset: back to disabled, ISSI 0, no pages.
    void reset();

    hca_state state() const noexcept { return _state; }
    std::uint16_t issi() const noexcept { return _issi; }
    std::size_t pages_owned() const;
    std::set<std::uint64_t> pages() const;
    std::vector<page_violation> page_violations() const;
    std::uint64_t commands_executed() const noexcept { return _executed; }
    // What the last DISABLE_HCA found still held (pages, objects), once: the function model
    // reports it (ledger_entry); nullopt when no DISABLE_HCA ran since the last look.
    struct held {
        std::size_t pages = 0;
        std::size_t objects = 0;
    };
    std::optional<held> take_disabled_with() noexcept { return std::exchange(_disabled_with, std::nullopt); }

    // ---- capabilities, vport, RoCE address (caps.cpp) ----
    std::array<std::uint8_t, 6> mac() const noexcept { return _mac; }
    bool roce_enabled() const noexcept { return _roce_en; }
    bool port_up() const noexcept;  // initialized, the link up, and not held down by SET_HCA_CAP
    void set_link_up(bool up) noexcept { _link_up = up; }  // the cable (function_model::set_port_state)
    bool link_up() const noexcept { return _link_up; }
    std::uint32_t gid_table_size() const noexcept { return _options.gid_table_size; }
    const roce_addr* gid(std::uint32_t index) const;  // nullptr: no entry (or cleared)
    // The current (CUR) capability pages, 256 bytes each.
    std::span<const std::byte> general_caps() const noexcept { return _general_cur; }
    std::span<const std::byte> roce_caps() const noexcept { return _roce_cur; }

    // ---- resource objects (objects.cpp, qp.cpp): what the data path and the tests read ----
    const std::set<std::uint32_t>& uars() const noexcept { return _uars; }
    const std::set<std::uint32_t>& pds() const noexcept { return _pds; }
    const std::map<std::uint32_t, mkey_object>& mkeys() const noexcept { return _mkeys; }
    const mkey_object* mkey(std::uint32_t key) const;  // by key (index << 8 | mkey_7_0)
    const eq_object* eq(std::uint32_t eqn) const;
    std::map<std::uint32_t, eq_object>& eqs() noexcept { return _eqs; }
    const std::map<std::uint32_t, eq_object>& eqs() const noexcept { return _eqs; }
    const cq_object* cq(std::uint32_t cqn) const;
    std::map<std::uint32_t, cq_object>& cqs() noexcept { return _cqs; }
    const qp_object* qp(std::uint32_t qpn) const;
    std::map<std::uint32_t, qp_object>& qps() noexcept { return _qps; }
    std::size_t objects() const noexcept {
        return _uars.size() + _pds.size() + _mkeys.size() + _eqs.size() + _cqs.size() + _qps.size();
    }
    // What commands made, changed or destroyed since the data path last took them (keys: MKEY
    // indexes; sim/object_changes.hpp).
    object_changes take_changes() { return _changes.take(); }
    // An access of len bytes at va through key: true and the device memory it lands in (in
    // order, one segment per page touched) when the key exists, is valid, covers [va, va+len)
    // and grants every right in `needed` (mkey_right bits); false otherwise, `out` cleared.
    bool mkey_translate(std::uint32_t key, std::uint64_t va, std::size_t len, std::uint8_t needed,
                        std::vector<dma_segment>& out) const;

private:
    struct call;
    void nop(call& c);
    void enable_hca(call& c);
    void disable_hca(call& c);
    void query_issi(call& c);
    void set_issi(call& c);
    void query_pages(call& c);
    void manage_pages(call& c);
    void init_hca(call& c);
    void teardown_hca(call& c);
    void query_adapter(call& c);
    // ---- capabilities, vport, RoCE address (caps.cpp) ----
    void query_hca_cap(call& c);
    void set_hca_cap(call& c);
    void access_reg(call& c);
    void query_vport_state(call& c);
    void query_nic_vport_context(call& c);
    void modify_nic_vport_context(call& c);
    void set_roce_address(call& c);
    void query_roce_address(call& c);
    void reset_caps();  // CUR caps back to the defaults, roce_en off, GID table empty
    void assign_mac();
    bool owns(std::uint64_t page) const;  // a firmware page (commands.cpp)
    std::array<std::byte, 256> general_max() const;
    std::array<std::byte, 256> roce_max() const;
    std::array<std::byte, 256> _general_cur{};
    std::array<std::byte, 256> _roce_cur{};
    std::array<std::uint8_t, 6> _mac{};
    bool _roce_en = false;
    bool _link_up = true;
    std::vector<roce_addr> _gids;       // gid_table_size entries
    std::vector<bool> _gid_valid;
    // ---- resource objects: UAR, PD, MKEY, CQ, QP (objects.cpp, qp.cpp) ----
    void alloc_uar(call& c);
    void dealloc_uar(call& c);
    void alloc_pd(call& c);
    void dealloc_pd(call& c);
    void create_mkey(call& c);
    void destroy_mkey(call& c);
    void create_eq(call& c);
    void destroy_eq(call& c);
    void create_cq(call& c);
    void destroy_cq(call& c);
    void create_qp(call& c);
    void destroy_qp(call& c);
    void modify_qp(call& c);  // RST2INIT .. RTS2RTS, 2ERR, 2RST
    void query_qp(call& c);
    // The function is in `needed`; otherwise the command fails BAD_SYS_STATE_ERR.
    bool in_state(call& c, hca_state needed);
    // A DEALLOC_/DESTROY_ command (call.hpp): once its sizes and the function's state allow it,
    // erases the object the `number` field names in `objects`, unless there is none
    // (BAD_RES_STATE, unknown object) or in_use(number) (BAD_RES_STATE, object in use).
    template <class In, class Out, class Objects, class InUse>
    void destroy_named(call& c, abi::field number, Objects& objects, InUse in_use);
    bool queue_pages(call& c, std::uint8_t log_page_size, std::uint32_t page_offset, std::size_t bytes,
                     abi::field (*entry)(std::size_t), std::vector<std::uint64_t>& pas);
    void drop_objects();

    std::set<std::uint32_t> _uars;
    std::set<std::uint32_t> _pds;
    std::map<std::uint32_t, mkey_object> _mkeys;  // by mkey index
    std::map<std::uint32_t, eq_object> _eqs;
    std::map<std::uint32_t, cq_object> _cqs;
    std::map<std::uint32_t, qp_object> _qps;
    std::uint32_t _next_pd = 1;
    std::uint32_t _next_mkey = 1;
    std::uint32_t _next_eq = 0;
    std::uint32_t _next_cq = 1;
    std::uint32_t _next_qp = 0x100;  // QPN 0 and 1 are the special QPs

    firmware_options _options;
    hca_state _state = hca_state::disabled;
    std::uint16_t _issi = 0;
    std::shared_ptr<page_ledger> _ledger = std::make_shared<page_ledger>();
    std::uint64_t _executed = 0;
    object_changes _changes;   // all, until the data path first takes them
    std::optional<held> _disabled_with;
};

}  // namespace rig::sim::mlx5
