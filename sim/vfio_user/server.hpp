#pragma once
// A vfio-user server for one device model: owns the listening socket, serves one client at a
// time and several one after another, on its own thread. Protocol: QEMU's
// docs/interop/vfio-user.rst.
//
//   my_model dev;
//   auto srv = server::create("/run/rig/mlx5-0.sock", dev).value();
//   dev.attach(*srv);          // the model raises interrupts and does DMA through the server
//   srv->start();
//   ...                        // srv->stop() or the destructor ends it
//
// The socket is created mode 0600 (spec "Authentication": file permissions are the access
// control); a stale socket at the path is replaced; a live server's socket, or any other file
// there, is refused.
//
// Robustness: a message whose size is below 16 bytes or above the limit, or that stops arriving
// half-way, closes the connection; a well-framed message that is too short for its command, has
// bad fields, carries unexpected fds or names an unknown command gets an error reply. Nothing is
// read outside the received bytes. When a client leaves (or dies), all its DMA windows and
// eventfds are dropped; the device keeps its state (spec "Socket Disconnection Behavior").
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim/vfio_user/device.hpp"
#include "sim/vfio_user/dma_space.hpp"

namespace rig::sim::vfio_user {

struct server_options {
    std::uint32_t max_msg_fds = 8;               // fds we take in one message (VERSION caps)
    std::uint32_t max_data_xfer_size = 1u << 20;
    // windows a client may hold: 4 GiB of guest RAM in 4 KiB pages, as QEMU maps it under a vIOMMU
    // (each window costs a tree node, not a mapping: dma_files.hpp). VERSION offers at most the
    // spec's default, 65535, which QEMU's client takes as a ceiling (session::version).
    std::uint32_t max_dma_maps = 1u << 20;
    // a message that has begun must be complete within this, and so must a client's answer to
    // our DMA_READ/WRITE; an idle client may stay connected as long as it likes
    std::chrono::milliseconds io_timeout{2000};
};

class session;

class server {
public:
    // Binds and listens at `path`; the server does not run until start().
    static std::expected<std::unique_ptr<server>, std::string> create(std::string path, device& dev,
                                                                      server_options options = {});
    ~server();   // stop(), then the socket file is removed
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    void start();
    // Ends the current connection and the thread; idempotent and final (no start after it).
    void stop();

    const std::string& path() const noexcept { return _path; }
    dma_space& dma() noexcept { return _dma; }

    // Signals vector `vector` of `kind` through the eventfd the client installed. false when
    // none is installed (the interrupt is lost, as on a disabled vector) or INTx is masked (it
    // is then delivered on unmask).
    bool trigger(irq kind, std::uint32_t vector);

    bool client_connected() const noexcept { return _connected.load(); }
    std::uint64_t clients_served() const noexcept { return _served.load(); }   // connections ended

private:
    friend class session;
    server(std::string path, device& dev, server_options options, int listen_fd, int wake_fd);
    void run();
    void serve(int conn);
    void drop_irqs();
    bool trigger_locked(unsigned kind, std::uint32_t vector);
    // vectors of an interrupt kind offered to the client (GET_IRQ_INFO count)
    std::uint32_t vectors(unsigned kind);

    std::string _path;
    device& _dev;
    server_options _options;
    int _listen = -1;
    int _wake = -1;   // eventfd: readable once stop() was called
    std::thread _thread;
    dma_space _dma;
    std::atomic<bool> _connected{false};
    std::atomic<std::uint64_t> _served{0};

    struct irq_state {
        std::vector<int> fds;   // per vector; -1: none installed
        bool masked = false;    // INTx only: automasked after each trigger (irq_info AUTOMASKED)
        bool pending = false;

        // every vector's eventfd closed, the index disabled (kept sized: vectors stay wireable)
        void disable() noexcept;
    };
    std::mutex _irq_lock;
    std::array<irq_state, irq_kind_count> _irqs;
};

}  // namespace rig::sim::vfio_user
