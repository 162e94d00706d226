#pragma once
// The vfio-user wire format, shared by the client (driver/vfio_user/) and the server
// (sim/vfio_user/). Source: QEMU docs/interop/vfio-user.rst ("the spec" below), with the
// structures it borrows from <linux/vfio.h>; libvfio-user's include/vfio-user.h holds the same
// structures.
//
// Everything is in host byte order (spec "Protocol Specification"), so the structures are plain
// host structs; they are only ever copied in and out of message bytes with memcpy (decode /
// encode below), never overlaid on a buffer, so alignment and short buffers cannot bite.
// Pure data and parsing: no I/O, no allocation.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

namespace rig::vfio_user::abi {

// ---- header (spec "Header") ---------------------------------------------------------------------

struct header {
    std::uint16_t msg_id;
    std::uint16_t command;
    std::uint32_t msg_size;   // the whole message, header included
    std::uint32_t flags;
    std::uint32_t error_no;   // errno of an error reply; reserved in commands
};
static_assert(sizeof(header) == 16);
static_assert(offsetof(header, msg_id) == 0 && offsetof(header, command) == 2);
static_assert(offsetof(header, msg_size) == 4 && offsetof(header, flags) == 8);
static_assert(offsetof(header, error_no) == 12);
inline constexpr std::size_t header_size = sizeof(header);

inline constexpr std::uint32_t flag_type_mask = 0xf;
inline constexpr std::uint32_t flag_type_command = 0x0;
inline constexpr std::uint32_t flag_type_reply = 0x1;
inline constexpr std::uint32_t flag_no_reply = 1u << 4;
inline constexpr std::uint32_t flag_error = 1u << 5;

// spec "Commands"
enum class command : std::uint16_t {
    version = 1,
    dma_map = 2,
    dma_unmap = 3,
    device_get_info = 4,
    device_get_region_info = 5,
    device_get_region_io_fds = 6,
    device_get_irq_info = 7,
    device_set_irqs = 8,
    region_read = 9,
    region_write = 10,
    dma_read = 11,    // server -> client
    dma_write = 12,   // server -> client
    device_reset = 13,
    region_write_multi = 15,
    device_feature = 16,
    mig_data_read = 17,
    mig_data_write = 18,
};

// "VFIO_USER_REGION_READ": what errors and logs call a command
constexpr std::string_view command_name(std::uint16_t c) noexcept {
    switch (static_cast<command>(c)) {
    case command::version: return "VFIO_USER_VERSION";
    case command::dma_map: return "VFIO_USER_DMA_MAP";
    case command::dma_unmap: return "VFIO_USER_DMA_UNMAP";
    case command::device_get_info: return "VFIO_USER_DEVICE_GET_INFO";
    case command::device_get_region_info: return "VFIO_USER_DEVICE_GET_REGION_INFO";
    case command::device_get_region_io_fds: return "VFIO_USER_DEVICE_GET_REGION_IO_FDS";
    case command::device_get_irq_info: return "VFIO_USER_DEVICE_GET_IRQ_INFO";
    case command::device_set_irqs: return "VFIO_USER_DEVICE_SET_IRQS";
    case command::region_read: return "VFIO_USER_REGION_READ";
    case command::region_write: return "VFIO_USER_REGION_WRITE";
    case command::dma_read: return "VFIO_USER_DMA_READ";
    case command::dma_write: return "VFIO_USER_DMA_WRITE";
    case command::device_reset: return "VFIO_USER_DEVICE_RESET";
    case command::region_write_multi: return "VFIO_USER_REGION_WRITE_MULTI";
    case command::device_feature: return "VFIO_USER_DEVICE_FEATURE";
    case command::mig_data_read: return "VFIO_USER_MIG_DATA_READ";
    case command::mig_data_write: return "VFIO_USER_MIG_DATA_WRITE";
    }
    return "VFIO_USER_(unknown command)";
}

// ---- payloads -----------------------------------------------------------------------------------

// VFIO_USER_VERSION request and reply; NUL-terminated JSON may follow (spec "VFIO_USER_VERSION")
struct version {
    std::uint16_t major;
    std::uint16_t minor;
};
static_assert(sizeof(version) == 4);
inline constexpr std::uint16_t version_major = 0;
inline constexpr std::uint16_t version_minor = 0;   // what QEMU's client sends, too

// VFIO_USER_DMA_MAP request; no reply payload (so argsz is this structure's size)
struct dma_map {
    std::uint32_t argsz;
    std::uint32_t flags;
    std::uint64_t offset;    // in the attached fd; 0 without one
    std::uint64_t address;   // IOVA
    std::uint64_t size;
};
static_assert(sizeof(dma_map) == 32);
static_assert(offsetof(dma_map, offset) == 8 && offsetof(dma_map, address) == 16);
static_assert(offsetof(dma_map, size) == 24);
inline constexpr std::uint32_t dma_flag_read = 1u << 0;    // the device may read the window
inline constexpr std::uint32_t dma_flag_write = 1u << 1;   // the device may write it

// VFIO_USER_DMA_UNMAP request; the reply echoes it
struct dma_unmap {
    std::uint32_t argsz;
    std::uint32_t flags;   // dma_unmap_flag_all or 0
    std::uint64_t address;
    std::uint64_t size;
};
static_assert(sizeof(dma_unmap) == 24);
// VFIO_DMA_UNMAP_FLAG_ALL (linux/vfio.h): every window, address and size 0. QEMU's client sends it
// when its container lets go of a whole address space (hw/vfio-user/container.c
// vfio_user_dma_unmap, unmap_all).
inline constexpr std::uint32_t dma_unmap_flag_all = 1u << 1;
static_assert(offsetof(dma_unmap, address) == 8 && offsetof(dma_unmap, size) == 16);

// VFIO_USER_DEVICE_GET_INFO: 16 bytes, not the kernel's 20-byte vfio_device_info
// (the spec's VFIO_USER_DEVICE_GET_INFO table; <linux/vfio.h> adds cap_offset)
struct device_info {
    std::uint32_t argsz;
    std::uint32_t flags;
    std::uint32_t num_regions;
    std::uint32_t num_irqs;
};
static_assert(sizeof(device_info) == 16);
inline constexpr std::uint32_t device_flag_reset = 1u << 0;   // VFIO_DEVICE_FLAGS_RESET
inline constexpr std::uint32_t device_flag_pci = 1u << 1;     // VFIO_DEVICE_FLAGS_PCI

// VFIO_USER_DEVICE_GET_REGION_INFO = struct vfio_region_info, then the capability chain
struct region_info {
    std::uint32_t argsz;
    std::uint32_t flags;
    std::uint32_t index;
    std::uint32_t cap_offset;   // from the start of this structure; 0: none
    std::uint64_t size;
    std::uint64_t offset;       // mmap offset in the attached fd
};
static_assert(sizeof(region_info) == 32);
static_assert(offsetof(region_info, cap_offset) == 12 && offsetof(region_info, size) == 16);
static_assert(offsetof(region_info, offset) == 24);
inline constexpr std::uint32_t region_flag_read = 1u << 0;
inline constexpr std::uint32_t region_flag_write = 1u << 1;
inline constexpr std::uint32_t region_flag_mmap = 1u << 2;
inline constexpr std::uint32_t region_flag_caps = 1u << 3;
inline constexpr std::uint32_t pci_num_regions = 9;   // VFIO_PCI_NUM_REGIONS
inline constexpr std::uint32_t pci_config_region = 7;

struct cap_header {   // struct vfio_info_cap_header
    std::uint16_t id;
    std::uint16_t version;
    std::uint32_t next;   // from the start of region_info; 0 ends the chain
};
static_assert(sizeof(cap_header) == 8);
inline constexpr std::uint16_t cap_sparse_mmap = 1;   // VFIO_REGION_INFO_CAP_SPARSE_MMAP
inline constexpr std::uint16_t cap_sparse_mmap_version = 1;

struct sparse_mmap {   // struct vfio_region_info_cap_sparse_mmap, after its cap_header
    std::uint32_t nr_areas;
    std::uint32_t reserved;
};
static_assert(sizeof(sparse_mmap) == 8);
struct sparse_area {   // struct vfio_region_sparse_mmap_area
    std::uint64_t offset;   // from the region's start; mmap at region_info.offset + this
    std::uint64_t size;
};
static_assert(sizeof(sparse_area) == 16);

// VFIO_USER_DEVICE_GET_IRQ_INFO = struct vfio_irq_info
struct irq_info {
    std::uint32_t argsz;
    std::uint32_t flags;
    std::uint32_t index;
    std::uint32_t count;
};
static_assert(sizeof(irq_info) == 16);
inline constexpr std::uint32_t irq_info_eventfd = 1u << 0;
inline constexpr std::uint32_t irq_info_maskable = 1u << 1;
inline constexpr std::uint32_t irq_info_automasked = 1u << 2;
inline constexpr std::uint32_t irq_info_noresize = 1u << 3;
inline constexpr std::uint32_t pci_num_irqs = 5;   // INTx, MSI, MSI-X, ERR, REQ

// VFIO_USER_DEVICE_SET_IRQS = struct vfio_irq_set (20 bytes), then bool data if DATA_BOOL;
// eventfds travel as SCM_RIGHTS, not in the payload
struct irq_set {
    std::uint32_t argsz;
    std::uint32_t flags;
    std::uint32_t index;
    std::uint32_t start;
    std::uint32_t count;
};
static_assert(sizeof(irq_set) == 20);
inline constexpr std::uint32_t irq_set_data_none = 1u << 0;
inline constexpr std::uint32_t irq_set_data_bool = 1u << 1;
inline constexpr std::uint32_t irq_set_data_eventfd = 1u << 2;
inline constexpr std::uint32_t irq_set_action_mask = 1u << 3;
inline constexpr std::uint32_t irq_set_action_unmask = 1u << 4;
inline constexpr std::uint32_t irq_set_action_trigger = 1u << 5;
inline constexpr std::uint32_t irq_set_data_mask = 0x7;
inline constexpr std::uint32_t irq_set_action_mask_bits = 0x38;

// VFIO_USER_REGION_READ/WRITE request and reply; data follows for a write request and a read
// reply
struct region_access {
    std::uint64_t offset;
    std::uint32_t region;
    std::uint32_t count;
};
static_assert(sizeof(region_access) == 16);
static_assert(offsetof(region_access, region) == 8 && offsetof(region_access, count) == 12);

// VFIO_USER_DMA_READ/WRITE (server -> client). The spec and libvfio-user put an 8-byte count here
// and data at 16; QEMU's own VFIOUserDMARW (hw/vfio-user/protocol.h) has a 4-byte count. We follow
// the spec and send 16 bytes in the DMA_WRITE reply too, whose table says count is 4 bytes: a
// receiver reads at least the first 12.
struct dma_access {
    std::uint64_t address;
    std::uint64_t count;
};
static_assert(sizeof(dma_access) == 16);
inline constexpr std::size_t dma_write_reply_min = 12;

// ---- bounded copies in and out of message bytes -------------------------------------------------

// The T at `offset` of `bytes`, or nothing when it does not lie wholly inside.
template <class T>
constexpr std::optional<T> decode(std::span<const std::byte> bytes, std::size_t offset = 0) noexcept {
    static_assert(std::is_trivially_copyable_v<T>);
    if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) {
        return std::nullopt;
    }
    T v;
    std::memcpy(&v, bytes.data() + offset, sizeof v);
    return v;
}

// Writes v at `offset`; false (and nothing written) when it does not fit.
template <class T>
constexpr bool encode(std::span<std::byte> bytes, std::size_t offset, const T& v) noexcept {
    static_assert(std::is_trivially_copyable_v<T>);
    if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) {
        return false;
    }
    std::memcpy(bytes.data() + offset, &v, sizeof v);
    return true;
}

// ---- capabilities JSON (spec "VFIO_USER_VERSION") -----------------------------------------------

// Every member is optional on the wire; these defaults are the spec's.
struct caps {
    std::uint32_t max_msg_fds = 1;
    std::uint32_t max_data_xfer_size = 1048576;
    std::uint32_t max_dma_maps = 65535;
    std::uint64_t pgsizes = 4096;
    bool twin_socket = false;            // twin_socket.supported
    std::optional<std::uint32_t> twin_socket_fd_index;
    bool write_multiple = false;
};

namespace detail {

// A cursor over a small JSON text. Strict enough to refuse anything malformed, small enough to
// audit: nesting is bounded, strings are taken raw (a key with escapes matches no known name).
class json {
public:
    explicit constexpr json(std::string_view s) noexcept : _s(s) {}

    constexpr void ws() noexcept {
        while (_i < _s.size() && (_s[_i] == ' ' || _s[_i] == '\t' || _s[_i] == '\n' || _s[_i] == '\r')) {
            ++_i;
        }
    }
    constexpr bool eat(char c) noexcept {
        ws();
        if (_i < _s.size() && _s[_i] == c) {
            ++_i;
            return true;
        }
        return false;
    }
    constexpr bool peek(char c) noexcept {
        ws();
        return _i < _s.size() && _s[_i] == c;
    }
    constexpr bool at_end() noexcept {
        ws();
        return _i == _s.size();
    }
    // a string's raw contents (escapes left in place)
    constexpr bool string(std::string_view& out) noexcept {
        if (!eat('"')) {
            return false;
        }
        const std::size_t start = _i;
        while (_i < _s.size()) {
            const char c = _s[_i];
            if (c == '"') {
                out = _s.substr(start, _i - start);
                ++_i;
                return true;
            }
            if (static_cast<unsigned char>(c) < 0x20) {
                return false;
            }
            if (c == '\\') {
                ++_i;
                if (_i >= _s.size()) {
                    return false;
                }
            }
            ++_i;
        }
        return false;
    }
    // a number; `integer` is set when it is a non-negative integer that fits `value`
    constexpr bool number(std::uint64_t& value, bool& integer) noexcept {
        ws();
        const std::size_t start = _i;
        integer = true;
        if (_i < _s.size() && _s[_i] == '-') {
            integer = false;
            ++_i;
        }
        const std::size_t digits = _i;
        while (_i < _s.size() && _s[_i] >= '0' && _s[_i] <= '9') {
            ++_i;
        }
        if (_i == digits || (_s[digits] == '0' && _i - digits > 1)) {
            return false;
        }
        if (integer) {
            const auto r = std::from_chars(_s.data() + digits, _s.data() + _i, value);
            integer = r.ec == std::errc{};
        }
        if (_i < _s.size() && _s[_i] == '.') {
            integer = false;
            ++_i;
            const std::size_t frac = _i;
            while (_i < _s.size() && _s[_i] >= '0' && _s[_i] <= '9') {
                ++_i;
            }
            if (_i == frac) {
                return false;
            }
        }
        if (_i < _s.size() && (_s[_i] == 'e' || _s[_i] == 'E')) {
            integer = false;
            ++_i;
            if (_i < _s.size() && (_s[_i] == '+' || _s[_i] == '-')) {
                ++_i;
            }
            const std::size_t exp = _i;
            while (_i < _s.size() && _s[_i] >= '0' && _s[_i] <= '9') {
                ++_i;
            }
            if (_i == exp) {
                return false;
            }
        }
        return _i > start;
    }
    constexpr bool literal(std::string_view word) noexcept {
        ws();
        if (_s.substr(_i).starts_with(word)) {
            _i += word.size();
            return true;
        }
        return false;
    }
    constexpr bool boolean(bool& out) noexcept {
        if (literal("true")) {
            out = true;
            return true;
        }
        if (literal("false")) {
            out = false;
            return true;
        }
        return false;
    }
    // any value, skipped
    constexpr bool skip(int depth) noexcept {
        if (depth > 16) {
            return false;
        }
        std::string_view s;
        std::uint64_t n = 0;
        bool integer = false;
        if (peek('"')) {
            return string(s);
        }
        if (eat('{')) {
            if (eat('}')) {
                return true;
            }
            do {
                if (!string(s) || !eat(':') || !skip(depth + 1)) {
                    return false;
                }
            } while (eat(','));
            return eat('}');
        }
        if (eat('[')) {
            if (eat(']')) {
                return true;
            }
            do {
                if (!skip(depth + 1)) {
                    return false;
                }
            } while (eat(','));
            return eat(']');
        }
        if (literal("true") || literal("false") || literal("null")) {
            return true;
        }
        return number(n, integer);
    }

private:
    std::string_view _s;
    std::size_t _i = 0;
};

// A capability count: a non-negative integer, clamped to 32 bits.
constexpr bool count_value(json& j, std::uint32_t& out) noexcept {
    std::uint64_t v = 0;
    bool integer = false;
    if (!j.number(v, integer) || !integer) {
        return false;
    }
    out = v > 0xffffffffu ? 0xffffffffu : static_cast<std::uint32_t>(v);
    return true;
}

constexpr bool twin_socket_object(json& j, caps& c) noexcept {
    if (!j.eat('{')) {
        return false;
    }
    if (j.eat('}')) {
        return true;
    }
    do {
        std::string_view key;
        if (!j.string(key) || !j.eat(':')) {
            return false;
        }
        if (key == "supported") {
            if (!j.boolean(c.twin_socket)) {
                return false;
            }
        } else if (key == "fd_index") {
            std::uint32_t v = 0;
            if (!count_value(j, v)) {
                return false;
            }
            c.twin_socket_fd_index = v;
        } else if (!j.skip(2)) {
            return false;
        }
    } while (j.eat(','));
    return j.eat('}');
}

constexpr bool capabilities_object(json& j, caps& c) noexcept {
    if (!j.eat('{')) {
        return false;
    }
    if (j.eat('}')) {
        return true;
    }
    do {
        std::string_view key;
        if (!j.string(key) || !j.eat(':')) {
            return false;
        }
        bool ok = true;
        if (key == "max_msg_fds") {
            ok = count_value(j, c.max_msg_fds);
        } else if (key == "max_data_xfer_size") {
            ok = count_value(j, c.max_data_xfer_size);
        } else if (key == "max_dma_maps") {
            ok = count_value(j, c.max_dma_maps);
        } else if (key == "pgsizes") {
            bool integer = false;
            ok = j.number(c.pgsizes, integer) && integer;
        } else if (key == "twin_socket") {
            ok = twin_socket_object(j, c);
        } else if (key == "write_multiple") {
            ok = j.boolean(c.write_multiple);
        } else {
            ok = j.skip(1);   // "migration" (QEMU still sends it) and anything newer
        }
        if (!ok) {
            return false;
        }
    } while (j.eat(','));
    return j.eat('}');
}

}  // namespace detail

// The capabilities of a VERSION message's JSON text (without its NUL); nothing when the text is
// not one well-formed JSON object or a known member has the wrong type.
constexpr std::optional<caps> parse_caps(std::string_view text) noexcept {
    caps c;
    detail::json j(text);
    if (!j.eat('{')) {
        return std::nullopt;
    }
    if (!j.eat('}')) {
        do {
            std::string_view key;
            if (!j.string(key) || !j.eat(':')) {
                return std::nullopt;
            }
            if (key == "capabilities") {
                if (!detail::capabilities_object(j, c)) {
                    return std::nullopt;
                }
            } else if (!j.skip(1)) {
                return std::nullopt;
            }
        } while (j.eat(','));
        if (!j.eat('}')) {
            return std::nullopt;
        }
    }
    if (!j.at_end()) {
        return std::nullopt;
    }
    return c;
}

// The JSON of `c`, NUL-terminated, into `out`; returns the bytes written including the NUL, or 0
// when `out` is too small. Writes max_msg_fds, max_data_xfer_size, max_dma_maps and pgsizes, and
// write_multiple only when true. (Twin-socket mode is neither offered nor accepted by Rig.)
constexpr std::size_t write_caps(const caps& c, std::span<char> out) noexcept {
    std::size_t n = 0;
    bool ok = true;
    auto put = [&](std::string_view s) {
        if (!ok || out.size() - n < s.size()) {
            ok = false;
            return;
        }
        for (char ch : s) {
            out[n++] = ch;
        }
    };
    auto num = [&](std::uint64_t v) {
        char digits[24] = {};
        const auto r = std::to_chars(digits, digits + sizeof digits, v);
        put(std::string_view(digits, static_cast<std::size_t>(r.ptr - digits)));
    };
    put("{\"capabilities\":{\"max_msg_fds\":");
    num(c.max_msg_fds);
    put(",\"max_data_xfer_size\":");
    num(c.max_data_xfer_size);
    put(",\"max_dma_maps\":");
    num(c.max_dma_maps);
    put(",\"pgsizes\":");
    num(c.pgsizes);
    if (c.write_multiple) {
        put(",\"write_multiple\":true");
    }
    put("}}");
    put(std::string_view("\0", 1));
    return ok ? n : 0;
}

}  // namespace rig::vfio_user::abi
