#include "firmware/bnxt/hwrm.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <thread>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "firmware/log.hpp"

namespace rig::firmware::bnxt {

namespace {

constexpr std::size_t header_bytes = abi::hwrm_cmd_hdr::layout_size;
constexpr std::size_t short_bytes = abi::hwrm_short_input::layout_size;

std::uint16_t load16(const std::byte* p) {
    return std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(const_cast<std::byte*>(p)))
        .load(std::memory_order_acquire);
}

}  // namespace

hwrm_channel::hwrm_channel(driver::function& fn, stranded_memory& stranded, const hwrm_options& options)
    : _fn(fn), _stranded(stranded), _options(options) {
    _limits.timeout = options.first_timeout;
}

hwrm_channel::~hwrm_channel() {
    if (_mapped && !_stranded_buffers) {
        static_cast<void>(_fn.dma_unmap(_iova, _memory.size()));
    }
}

result<std::unique_ptr<hwrm_channel>> hwrm_channel::create(driver::function& fn, stranded_memory& stranded,
                                                           const hwrm_options& options) {
    std::unique_ptr<hwrm_channel> ch(new hwrm_channel(fn, stranded, options));
    if (auto r = ch->setup(); !r) {
        return std::unexpected(std::move(r.error()));
    }
    return ch;
}

result<void> hwrm_channel::setup() {
    auto mem = driver::dma_memory::allocate(2 * buffer_page, driver::page_choice::small_only);
    if (!mem) {
        return std::unexpected(plain_error(error_kind::transport, "HWRM buffers: " + mem.error().message));
    }
    _memory = std::move(*mem);
    auto iova = _fn.dma_map(_memory, 0, _memory.size(), driver::dma_access::read_write);
    if (!iova) {
        return std::unexpected(plain_error(error_kind::transport, "HWRM buffers: " + iova.error().message));
    }
    _iova = *iova;
    _mapped = true;
    return {};
}

hwrm_limits hwrm_channel::limits() const {
    std::lock_guard g(_lock);
    return _limits;
}

std::uint16_t hwrm_channel::next_seq_id() const {
    std::lock_guard g(_lock);
    return _seq;
}

ms hwrm_channel::timeout_of(std::uint16_t req_type) const {
    std::lock_guard g(_lock);
    const ms t = req_type == abi::HWRM_FUNC_RESET ? _limits.timeout * 4 : _limits.timeout;
    return std::min(t, _limits.max_timeout);
}

std::optional<error> hwrm_channel::failure() const {
    std::lock_guard g(_lock);
    return _failure;
}

void hwrm_channel::fail(error why) {
    std::lock_guard g(_lock);
    if (!_failure) {
        why.kind = error_kind::fatal;
        _failure = std::move(why);
    }
}

void hwrm_channel::trace(command_sink sink) {
    std::lock_guard g(_lock);
    _trace = std::move(sink);
}

void hwrm_channel::strand(const std::string& why) {
    // The firmware may still DMA a late response (or read the short command): the buffers stay
    // mapped and allocated for the life of the process.
    if (!_stranded_buffers) {
        _stranded_buffers = true;
        log().warn("bnxt HWRM on {}: {}; response and short-command buffers stranded", _fn.name(), why);
        const std::size_t bytes = _memory.size();
        _stranded.keep("HWRM response and short-command buffers", _iova, bytes, std::move(_memory));
    }
}

result<void> hwrm_channel::write_window(std::span<const std::byte> bytes, std::size_t window) {
    // The request and the zeros after it up to the window's end in one write: the kernel writes
    // 32-bit words (__iowrite32_copy, then writel(0) to max_req_len); the window is plain
    // registers, the trigger is what the firmware acts on.
    std::vector<std::byte> image(std::max(window, (bytes.size() + 3) & ~std::size_t{3}));
    std::memcpy(image.data(), bytes.data(), bytes.size());
    ::rig::abi::barrier::to_device();  // the short command and the zeroed response before the window
    if (auto r = _fn.region_write(driver::region::bar0, abi::GRCPF_REG_CHIMP_CHANNEL_OFFSET, image); !r) {
        return std::unexpected(plain_error(error_kind::transport, "HWRM window write: " + r.error().message));
    }
    std::array<std::byte, 4> one{};
    ::rig::abi::store_le<std::uint32_t>(one.data(), 1);
    if (auto r = _fn.region_write(driver::region::bar0, abi::GRCPF_REG_CHIMP_COMM_TRIGGER, one); !r) {
        return std::unexpected(plain_error(error_kind::transport, "HWRM trigger write: " + r.error().message));
    }
    return {};
}

result<std::size_t> hwrm_channel::wait_response(std::uint16_t seq, clock::time_point by, ms budget,
                                                const std::string& what) {
    const std::byte* resp = _memory.data();
    const auto start = clock::now();
    const auto spin_until = start + std::chrono::microseconds(5);
    auto pause = std::chrono::microseconds(3);  // HWRM_SHORT_MIN_TIMEOUT, growing to HWRM_MAX_TIMEOUT
    const auto sleep_until = [&](clock::time_point limit) {
        const auto now = clock::now();
        if (now >= spin_until) {
            std::this_thread::sleep_for(std::min<clock::duration>(pause, limit - now));
            pause = std::min(pause * 2, std::chrono::microseconds(40));
        }
    };
    // resp_len, then this request's seq_id (a stale response of another seq_id is waited past,
    // as bnxt_hwrm.c "Discarding out of seq response").
    std::uint16_t len = 0;
    for (;;) {
        len = load16(resp + 6);
        if (len != 0 && load16(resp + 4) == seq) {
            break;
        }
        if (clock::now() >= by) {
            return std::unexpected(plain_error(error_kind::timeout, what + ": no response within " +
                                                                        std::to_string(budget.count()) + " ms"));
        }
        sleep_until(by);
    }
    if (len < abi::hwrm_resp_hdr::layout_size || len > buffer_page || len > std::max<std::size_t>(_limits.max_response, 16)) {
        return std::unexpected(plain_error(error_kind::bad_output,
                                           what + ": resp_len " + std::to_string(len) + " outside 8.." +
                                               std::to_string(std::min(buffer_page, _limits.max_response))));
    }
    // The valid byte, written last by the firmware.
    const auto valid_by = clock::now() + _options.valid_byte_wait;
    for (;;) {
        const auto v = std::atomic_ref<std::byte>(_memory.data()[len - 1]).load(std::memory_order_acquire);
        if (std::to_integer<std::uint8_t>(v) != 0) {
            break;
        }
        if (clock::now() >= valid_by) {
            return std::unexpected(plain_error(error_kind::timeout, what + ": resp_len " + std::to_string(len) +
                                                                        " but no valid byte within " +
                                                                        std::to_string(_options.valid_byte_wait.count()) + " ms"));
        }
        sleep_until(valid_by);
    }
    ::rig::abi::barrier::from_device();  // the response's bytes after its valid byte
    return len;
}

result<std::vector<std::byte>> hwrm_channel::exec(std::span<const std::byte> request, clock::time_point by,
                                                  std::size_t min_response) {
    if (request.size() < header_bytes) {
        return std::unexpected(plain_error(error_kind::bad_input, "HWRM request of " + std::to_string(request.size()) +
                                                                      " bytes is shorter than its 16-byte header"));
    }
    const auto req_type = ::rig::abi::load_le<std::uint16_t>(request.data());
    const std::string what = request_name(req_type);
    const auto fail_with = [&](error e) {
        e.channel = "hwrm";
        e.req_type = req_type;
        if (!e.message.starts_with(what)) {
            e.message = what + ": " + e.message;
        }
        return std::unexpected(std::move(e));
    };
    std::unique_lock g(_lock);
    if (_failure) {
        return fail_with(plain_error(error_kind::fatal, "not sent, the HWRM channel stopped: " + _failure->message));
    }
    const bool use_short = _limits.short_required || request.size() > _limits.window;
    if (request.size() > _limits.window && request.size() > std::min(_limits.max_request, buffer_page)) {
        return fail_with(plain_error(error_kind::bad_input, std::to_string(request.size()) +
                                                                "-byte request is longer than the firmware takes (window " +
                                                                std::to_string(_limits.window) + ", short commands " +
                                                                std::to_string(_limits.max_request) + ")"));
    }
    const ms own = std::min(req_type == abi::HWRM_FUNC_RESET ? _limits.timeout * 4 : _limits.timeout, _limits.max_timeout);
    const auto now = clock::now();
    const auto deadline = std::min(by, now + own);
    const ms budget = std::max(ms(0), std::chrono::round<ms>(deadline - now));

    const std::uint16_t seq = _seq++;
    std::vector<std::byte> full(request.begin(), request.end());
    ::rig::abi::store_le<std::uint16_t>(full.data() + 4, seq);
    ::rig::abi::store_le<std::uint64_t>(full.data() + 8, _iova);
    std::memset(_memory.data(), 0, buffer_page);  // the response page (DPDK zeroes max_resp_len)

    std::vector<std::byte> window_bytes;
    if (use_short) {
        std::memcpy(_memory.data() + buffer_page, full.data(), full.size());
        abi::hwrm_short_input s;
        s.req_type = req_type;
        s.target_id = ::rig::abi::load_le<std::uint16_t>(full.data() + 6);
        s.size = static_cast<std::uint16_t>(full.size());
        s.req_addr = request_iova();
        const auto b = abi::to_bytes(s);
        window_bytes.assign(b.begin(), b.end());
    } else {
        window_bytes = full;
    }
    // A short command is followed by no zeros (BNXT_HWRM_SHORT_REQ_LEN), a window request by
    // zeros to the window's end.
    if (auto r = write_window(window_bytes, use_short ? short_bytes : _limits.window); !r) {
        _failure = r.error();
        strand("a BAR write failed");  // the firmware may or may not have seen the trigger
        return fail_with(std::move(r.error()));
    }
    auto len = wait_response(seq, deadline, budget, what);
    if (!len) {
        if (len.error().kind == error_kind::timeout) {
            _failure = len.error();
            strand(len.error().message);
        }
        return fail_with(std::move(len.error()));
    }
    std::vector<std::byte> out(std::max<std::size_t>(*len, min_response));
    std::memcpy(out.data(), _memory.data(), *len);
    const auto echoed = ::rig::abi::load_le<std::uint16_t>(out.data() + 2);
    const auto code = ::rig::abi::load_le<std::uint16_t>(out.data());
    const std::uint8_t cmd_err = *len >= 16 ? std::to_integer<std::uint8_t>(out[14]) : 0;
    if (_trace) {
        _trace(command_record{"hwrm", req_type, abi::hwrm_req_type_name(req_type), code,
                              code != 0 ? cmd_err : std::uint8_t{0}, use_short, full,
                              std::vector<std::byte>(out.begin(), out.begin() + *len)});
    }
    if (echoed != req_type) {
        return fail_with(plain_error(error_kind::bad_output, "the response echoes req_type " + ::rig::abi::hex(echoed)));
    }
    if (code != abi::HWRM_ERR_CODE_SUCCESS) {
        error e = plain_error(error_kind::status, what + ": " + error_code_name(code) + ", cmd_err " +
                                                      ::rig::abi::hex(cmd_err));
        e.error_code = code;
        e.cmd_err = cmd_err;
        log().debug("bnxt HWRM on {}: {}", _fn.name(), e.message);
        return fail_with(std::move(e));
    }
    return out;
}

result<abi::hwrm_ver_get_output> hwrm_channel::ver_get(clock::time_point by) {
    auto v = send<abi::hwrm_ver_get_output>(abi::hwrm_ver_get_input{}, by);
    if (!v) {
        return v;
    }
    if (v->hwrm_intf_maj_8b != abi::HWRM_VERSION_MAJOR) {
        error e = plain_error(error_kind::bad_output, "VER_GET (0x0): HWRM interface " +
                                                          std::to_string(v->hwrm_intf_maj_8b) + "." +
                                                          std::to_string(v->hwrm_intf_min_8b) + "." +
                                                          std::to_string(v->hwrm_intf_upd_8b) + " is not 1.x");
        e.req_type = abi::HWRM_VER_GET;
        return std::unexpected(std::move(e));
    }
    // bnxt.c bnxt_hwrm_ver_get: a zero timeout means the default, a zero ext length the window.
    std::lock_guard g(_lock);
    _limits.learned = true;
    if (v->max_req_win_len != 0) {
        _limits.window = v->max_req_win_len;
    }
    _limits.max_request = std::max<std::size_t>(v->max_ext_req_len, abi::HWRM_MAX_REQ_LEN);
    if (v->max_resp_len != 0) {
        _limits.max_response = v->max_resp_len;
    }
    _limits.timeout = v->def_req_timeout != 0 ? ms(v->def_req_timeout) : ms(500);
    _limits.max_timeout = v->max_req_timeout != 0 ? ms(std::uint32_t{v->max_req_timeout} * 1000) : ms(60000);
    constexpr std::uint32_t both = abi::VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_SUPPORTED |
                                   abi::VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_REQUIRED;
    _limits.short_required = (v->dev_caps_cfg & both) == both;
    return v;
}

}  // namespace rig::firmware::bnxt
