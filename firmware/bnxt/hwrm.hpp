#pragma once
// The driver's own HWRM channel to a bnxt function's ChiMP firmware (bnxt_hsi.h;
// Linux bnxt_hwrm.c __hwrm_send, DPDK bnxt_hwrm.c bnxt_hwrm_send_message).
//
//   auto ch = hwrm_channel::create(fn, stranded).value();
//   auto ver = ch->ver_get(deadline);                    // learns window, timeouts, short mode
//   auto caps = ch->send<abi::hwrm_func_qcaps_output>(abi::hwrm_func_qcaps_input{}, deadline);
//
// A request is written into the BAR0 window (0x000) with the rest of the window zeroed, then 1
// is written to the trigger (0x100). When VER_GET said short commands are required (both
// SHORT_CMD_SUPPORTED and SHORT_CMD_REQUIRED, as bnxt_hwrm_ver_get sets BNXT_FW_CAP_SHORT_CMD)
// or the request is longer than the window, the full request goes into a DMA buffer and the
// window gets the 16-byte hwrm_short_input (signature 0x4321) pointing at it. The firmware
// DMA-writes the response into a buffer of its own; the channel zeroes it before each request,
// waits for resp_len != 0 with this request's seq_id, then for the valid byte at resp_len - 1
// (up to 50 ms more, HWRM_VALID_BIT_DELAY_USEC), and reads the rest after a read barrier.
//
// Timeouts: 500 ms per request before VER_GET (DFLT_HWRM_CMD_TIMEOUT), VER_GET's
// def_req_timeout after it, FUNC_RESET four times that (HWRM_RESET_TIMEOUT); never more than
// max_req_timeout; never past the caller's deadline. A request that misses its timeout leaves
// the firmware holding the response and short-command buffers: they are handed to the stranded
// registry (never unmapped or freed) and the channel refuses every later request without
// touching the device (DPDK's BNXT_FLAG_FW_TIMEDOUT), as does a failed BAR write.
//
// Threads: any; one request at a time (a lock held for the whole exchange, as DPDK's spinlock).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "abi/bnxt/hwrm.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/bnxt/command_trace.hpp"
#include "firmware/bnxt/error.hpp"
#include "firmware/stranded.hpp"

namespace rig::firmware::bnxt {

using ms = std::chrono::milliseconds;

// What the channel knows of the firmware: defaults until VER_GET answers.
struct hwrm_limits {
    std::size_t window = abi::HWRM_MAX_REQ_LEN;         // max_req_win_len
    std::size_t max_request = abi::HWRM_MAX_REQ_LEN;    // max_ext_req_len (a short command's)
    std::size_t max_response = abi::HWRM_MAX_RESP_LEN;  // max_resp_len
    ms timeout{500};                                    // def_req_timeout (DFLT_HWRM_CMD_TIMEOUT)
    ms max_timeout{60000};                              // max_req_timeout (HWRM_CMD_MAX_TIMEOUT)
    bool short_required = false;                        // SHORT_CMD_SUPPORTED and _REQUIRED
    bool learned = false;                               // VER_GET answered
};

struct hwrm_options {
    ms first_timeout{500};    // per request before VER_GET answers
    ms valid_byte_wait{50};   // after resp_len appears (HWRM_VALID_BIT_DELAY_USEC)
};

class hwrm_channel {
public:
    using clock = std::chrono::steady_clock;
    // The DMA buffer: response in the first page, a short command's full request in the second.
    static constexpr std::size_t buffer_page = driver::dma_memory::small_page;

    static result<std::unique_ptr<hwrm_channel>> create(driver::function& fn, stranded_memory& stranded,
                                                        const hwrm_options& options = {});
    ~hwrm_channel();
    hwrm_channel(const hwrm_channel&) = delete;
    hwrm_channel& operator=(const hwrm_channel&) = delete;

    // Sends one request: `request` is the whole request, at least the 16-byte header, req_type
    // set (cmpl_ring and target_id as the caller encoded them: 0xffff by abi's defaults). The
    // channel writes seq_id and resp_addr. Returns the response (resp_len bytes, zero-padded to
    // at least `min_response`) when error_code is SUCCESS.
    result<std::vector<std::byte>> exec(std::span<const std::byte> request, clock::time_point by,
                                        std::size_t min_response = abi::hwrm_resp_hdr::layout_size);

    // Encodes `in`, sends it and decodes the response as Out.
    template <class Out, class In>
    result<Out> send(const In& in, clock::time_point by) {
        const auto bytes = abi::to_bytes(in);
        auto r = exec(bytes, by, Out::layout_size);
        if (!r) {
            return std::unexpected(std::move(r.error()));
        }
        auto out = abi::decode<Out>(*r);
        if (!out) {
            return std::unexpected(plain_error(error_kind::bad_output, out.error().message()));
        }
        return *out;
    }

    // VER_GET (interface 1.10.3 offered), and what it says learned: window and response sizes,
    // timeouts, short-command requirement. Refuses an interface major other than 1 (as bnxt_en
    // and DPDK).
    result<abi::hwrm_ver_get_output> ver_get(clock::time_point by);

    hwrm_limits limits() const;
    // The timeout one request of `req_type` gets (FUNC_RESET: 4x), before the caller's deadline.
    ms timeout_of(std::uint16_t req_type) const;
    std::uint64_t response_iova() const noexcept { return _iova; }
    std::uint64_t request_iova() const noexcept { return _iova + buffer_page; }
    std::uint16_t next_seq_id() const;

    // The first failure that stopped the channel (timeout, BAR write): nothing is sent after it.
    std::optional<error> failure() const;
    // The function died or the firmware was declared gone by the owner: stop sending.
    void fail(error why);

    // The command trace (command_trace.hpp); an empty sink turns it off (the default).
    void trace(command_sink sink);

private:
    hwrm_channel(driver::function& fn, stranded_memory& stranded, const hwrm_options& options);
    result<void> setup();
    result<void> write_window(std::span<const std::byte> bytes, std::size_t window);
    result<std::size_t> wait_response(std::uint16_t seq, clock::time_point by, ms budget, const std::string& what);
    void strand(const std::string& why);

    driver::function& _fn;
    stranded_memory& _stranded;
    hwrm_options _options;
    mutable std::mutex _lock;
    driver::dma_memory _memory;
    std::uint64_t _iova = 0;
    bool _mapped = false;
    bool _stranded_buffers = false;
    hwrm_limits _limits;
    std::uint16_t _seq = 0;
    std::optional<error> _failure;
    command_sink _trace;
};

}  // namespace rig::firmware::bnxt
