#pragma once
// The firmware of a ConnectX function model: the semantics of the commands the command queue
// delivers (reference mlx5.md §2.6, §3.2, §7.2). Transport-free: the command engine (cmdq.cpp)
// gathers a command's input from the queue entry and its mailboxes, calls execute(), and
// scatters the output back.
//
// Implemented: NOP, ENABLE_HCA, DISABLE_HCA, QUERY_ISSI, SET_ISSI, QUERY_PAGES, MANAGE_PAGES,
// INIT_HCA, TEARDOWN_HCA. Any other opcode gets BAD_OP_ERR, as on a card.
//
// Not thread-safe: the function model serialises calls.
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "abi/mlx5/ifc/cmd.hpp"
#include "sim/vfio_user/dma_space.hpp"

namespace rig::sim::mlx5 {

// The function's state, as the firmware sees it (reference §2.8: ENABLE_HCA, pages, INIT_HCA).
enum class hca_state : std::uint8_t {
    disabled,     // after reset and DISABLE_HCA
    enabled,      // after ENABLE_HCA, and after TEARDOWN_HCA
    initialized,  // after INIT_HCA
};

struct firmware_options {
    std::uint32_t boot_pages = 16;  // QUERY_PAGES op_mod 1
    std::uint32_t init_pages = 64;  // QUERY_PAGES op_mod 2 (beyond the boot pages)
    std::uint32_t max_pages = 1u << 20;  // pages the firmware will hold at most
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
};
constexpr std::uint32_t syndrome_of(std::uint16_t opcode, failure why) noexcept {
    return 0x4d000000u | (std::uint32_t{opcode} & 0xffffu) << 8 | static_cast<std::uint8_t>(why);
}

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
    std::size_t pages_owned() const noexcept { return _pages.size(); }
    const std::set<std::uint64_t>& pages() const noexcept { return _pages; }
    std::uint64_t commands_executed() const noexcept { return _executed; }

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
    // ---- capabilities, vport, RoCE address (caps.cpp) ----
    // ---- event queues (events.cpp) ----
    // ---- resource objects: UAR, PD, MKEY, CQ, QP (objects.cpp, qp.cpp) ----

    firmware_options _options;
    hca_state _state = hca_state::disabled;
    std::uint16_t _issi = 0;
    std::set<std::uint64_t> _pages;  // page addresses (IOVAs) the driver gave
    std::uint64_t _executed = 0;
};

}  // namespace rig::sim::mlx5
