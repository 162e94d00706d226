#pragma once
// The vfio-user back end of `function`: a client of a vfio-user server (our device model,
// rig-nicsim, or any server that follows QEMU's docs/interop/vfio-user.rst). docs/architecture.md,
// "The PCI seam".
//
// Synchronous request/reply on one socket. While a call waits for its reply the server may send
// its own commands (VFIO_USER_DMA_READ/WRITE for windows announced without an fd); they are
// answered there, told apart from replies by the header's type bits. Every wait is bounded by
// open_options::vfio_user_timeout; a timeout, a closed socket or a malformed reply ends the
// connection, and every later call fails at once with the reason.
#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "abi/vfio_user/protocol.hpp"
#include "driver/fifo_mutex.hpp"
#include "driver/function.hpp"
#include "driver/iova.hpp"
#include "transport/vfio_user/socket.hpp"

namespace rig::driver::vfio_user_detail {

// whole messages on the socket: transport/vfio_user/socket.hpp, shared with the model's server
using rig::vfio_user::transport::clock;
using rig::vfio_user::transport::io;
using rig::vfio_user::transport::io_result;
using rig::vfio_user::transport::message;
using rig::vfio_user::transport::receive_message;
using rig::vfio_user::transport::send_message;

// What we accept from the server in one message: a REGION_READ reply or DMA_WRITE command of at
// most this many data bytes (our max_data_xfer_size) plus its 16-byte head. Region info replies
// with their capability chain are far smaller.
inline constexpr std::uint32_t our_max_xfer = 1u << 20;
inline constexpr std::size_t max_payload = our_max_xfer + 16;
inline constexpr std::size_t max_region_info = 64 * 1024;
// fds we take in one message: GET_REGION_INFO carries one
inline constexpr std::uint32_t our_max_fds = 8;
inline constexpr std::uint64_t page = 4096;

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
    return std::as_bytes(std::span<const T, 1>(&v, 1));
}

class client final : public function {
public:
    client(std::string name, int sock, const open_options& options);
    ~client() override;

    // VFIO_USER_VERSION, then VFIO_USER_DEVICE_GET_INFO
    result<void> start();

    std::string_view name() const noexcept override { return _name; }
    result<void> config_read(std::uint32_t offset, std::span<std::byte> out) override;
    result<void> config_write(std::uint32_t offset, std::span<const std::byte> in) override;
    result<region_info> get_region_info(region index) override;
    result<void> region_read(region index, std::uint64_t offset, std::span<std::byte> out) override;
    result<void> region_write(region index, std::uint64_t offset, std::span<const std::byte> in) override;
    result<bar_mapping> map_bar(region index, caching mode) override;
    result<std::uint64_t> dma_map(const dma_memory& memory, std::size_t offset, std::size_t bytes,
                                  dma_access access) override;
    result<void> dma_unmap(std::uint64_t iova, std::size_t bytes) override;
    result<irq_info> get_irq_info(irq_kind kind) override;
    result<std::vector<int>> enable_irqs(irq_kind kind, std::uint32_t count) override;
    result<void> disable_irqs(irq_kind kind) override;
    result<void> unmask_intx() override;
    result<void> reset() override;
    void release() noexcept override { release_device(false); }
    void let_go() noexcept override { release_device(true); }

    // What the server announced in VERSION (defaults where it said nothing).
    const vfio_user::abi::caps& server_caps() const noexcept { return _server; }

private:
    // A DMA window the server may reach: by the fd it mapped, or by DMA_READ/WRITE messages.
    struct window {
        std::uint64_t iova;
        std::uint64_t bytes;
        std::byte* data;
        bool device_reads;
        bool device_writes;
    };
    // The region info with its fd, as the last GET_REGION_INFO reply gave them.
    struct region_entry {
        region_info info;
        std::uint64_t mmap_offset = 0;
        int fd = -1;
    };

    // One command and its reply. An error reply comes back as an error (the connection lives on);
    // anything that breaks the stream ends the connection.
    result<message> call(vfio_user::abi::command cmd, std::span<const std::byte> payload,
                         std::span<const int> fds = {});
    error lose_connection(std::string_view call, std::string reason, int err);
    // A server -> client command that arrived while we waited for a reply.
    io_result answer(const message& m, std::chrono::steady_clock::time_point deadline);
    result<region_entry> query_region(region index);
    const window* find_window(std::uint64_t address, std::uint64_t count) const;
    void release_device(bool placeholders) noexcept;   // release() and let_go() (function.hpp)

    // One control call at a time, from any thread (function.hpp): the socket carries one
    // request and its reply at a time, and the windows/IRQ tables change under calls.
    // Recursive: calls nest (config_read -> region_read, release -> dma_unmap). First come,
    // first served: an event thread's doorbell is not starved by a command loop (fifo_mutex.hpp).
    fifo_recursive_mutex _lock;
    std::string _name;
    open_options _options;
    int _sock = -1;
    std::string _lost;   // why the connection ended; empty while it lives
    std::uint16_t _next_id = 0;
    vfio_user::abi::caps _server;
    std::uint32_t _device_flags = 0;
    std::uint32_t _num_regions = 0;
    std::uint32_t _num_irqs = 0;
    std::size_t _xfer = 0;   // bytes per REGION_READ/WRITE: the server's max_data_xfer_size, capped

    iova_allocator _iova;
    std::map<std::uint64_t, window> _windows;   // by IOVA
    std::map<std::pair<unsigned, caching>, bar_mapping> _bars;   // by BAR and the caching asked for
    std::array<std::vector<int>, irq_kind_count> _irq_fds;   // by irq_kind
    std::vector<int> _kept_fds;   // let_go(): eventfds pollers may still hold, closed at destruction
    bool _released = false;
};

}  // namespace rig::driver::vfio_user_detail
