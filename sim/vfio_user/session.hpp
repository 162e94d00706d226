#pragma once
// One client's connection to a vfio-user server: reads its commands and answers them, and
// carries the server's own DMA_READ/WRITE for windows without fd. Internal to sim/vfio_user.
#include <cstdint>
#include <span>

#include "abi/vfio_user/protocol.hpp"
#include "sim/vfio_user/dma_space.hpp"
#include "transport/vfio_user/socket.hpp"

namespace rig::sim::vfio_user {

// whole messages on the socket: transport/vfio_user/socket.hpp, shared with the driver's client
using rig::vfio_user::transport::clock;
using rig::vfio_user::transport::io;
using rig::vfio_user::transport::message;
using rig::vfio_user::transport::receive_message;
using rig::vfio_user::transport::send_message;

class server;

class session final : public in_band_dma {
public:
    session(server& srv, int conn);
    ~session() = default;

    // Serves until the client leaves, the stream breaks, or the server stops.
    void run();

    bool dma_read(std::uint64_t iova, std::span<std::byte> out) override;
    bool dma_write(std::uint64_t iova, std::span<const std::byte> in) override;

private:
    enum class next { keep, close };
    next handle(message& m);
    next version(const message& m);
    void dma_map(message& m);
    void dma_unmap(const message& m);
    void device_info(const message& m);
    void region_info(const message& m);
    void irq_info(const message& m);
    void set_irqs(message& m);
    void region_read(const message& m);
    void region_write(const message& m);
    void device_reset(const message& m);

    void reply(const message& req, std::span<const std::byte> payload, std::span<const int> fds = {});
    void reply_error(const message& req, int err);
    bool in_band(bool is_write, std::uint64_t iova, std::byte* p, std::size_t n);

    server& _srv;
    int _conn;
    std::size_t _max_payload;
    bool _negotiated = false;
    bool _broken = false;   // the stream can no longer be trusted: close after this message
    rig::vfio_user::abi::caps _client;
    std::uint16_t _next_id = 0;
};

}  // namespace rig::sim::vfio_user
