#pragma once
// A ConnectX function model (sim/mlx5/function_model.hpp) driven through its command queue as a
// driver would drive it, for the mlx5 fuzz harnesses: BAR0 register writes (queue address,
// doorbell) and DMA memory the model reaches through the vfio-user server's dma_space, here an
// in-process buffer. The memory is announced as windows without fd, so the model reaches it by
// "message" (in_band_dma, answered by this object on the harness's thread) and runs each command
// inside the doorbell write (cmdq.cpp ring): no thread hand-off, the same result every run.
//
// The vfio-user server is created and never started (no client, no thread): the model only
// needs its dma_space. Its socket file is removed at once; no file is left behind.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/fuzz/harness.hpp"

namespace rig::fuzz::mlx5 {

namespace ifc = ::rig::mlx5::ifc;
namespace cmdq = ::rig::mlx5::ifc::cmdq;
namespace model = ::rig::sim::mlx5;

// The driver's memory, as IOVAs: one read-write window (command queue page, mailbox blocks,
// pages for the firmware and for queues), a read-only one, and holes around them.
inline constexpr std::uint64_t window_base = 0x10000000;
inline constexpr std::size_t window_bytes = 0x80000;               // 512 KiB
inline constexpr std::uint64_t cmdq_at = window_base;              // 32 entries of 64 bytes
inline constexpr std::uint64_t boxes_at = window_base + 0x1000;    // mailbox blocks, 1 KiB apart
inline constexpr std::size_t box_count = 128;
inline constexpr std::uint64_t pages_at = window_base + 0x21000;   // 4 KiB pages from here
inline constexpr std::size_t page_count = (window_bytes - 0x21000) / 4096;
inline constexpr std::uint64_t readonly_base = 0x20000000;         // the device may only read it
inline constexpr std::size_t readonly_bytes = 0x4000;

// What the model does to memory during one command, checked against what it may do.
struct access_rules {
    unsigned slot = 0;                         // the entry being run
    std::vector<std::uint64_t> output_blocks;  // blocks of the output chain, as a driver laid it
};

class command_rig final : public sim::vfio_user::in_band_dma {
public:
    command_rig() : command_rig(options()) {}
    explicit command_rig(model::function_options o) : fn(o), memory(window_bytes), readonly(readonly_bytes) {
        const std::string dir = make_dir();
        auto s = sim::vfio_user::server::create(dir + "/m.sock", fn);
        std::filesystem::remove_all(dir);  // the listening socket stays open, its name goes now
        require(s.has_value(), "the vfio-user server is created");
        server = std::move(*s);
        fn.attach(*server);
        auto& dma = server->dma();
        dma.set_in_band(this, std::this_thread::get_id());
        require(dma.map(window_base, window_bytes, true, true, -1, 0) == 0, "the window maps");
        require(dma.map(readonly_base, readonly_bytes, true, false, -1, 0) == 0, "the read-only window maps");
    }
    ~command_rig() { server.reset(); }
    command_rig(const command_rig&) = delete;
    command_rig& operator=(const command_rig&) = delete;

    static model::function_options options() {
        model::function_options o;
        o.init_time = std::chrono::milliseconds{0};
        o.firmware.boot_pages = 2;  // bring-up in few commands
        o.firmware.init_pages = 2;
        return o;
    }

    // ---- in_band_dma: the model's reads and writes, which dma_space let through ----
    bool dma_read(std::uint64_t iova, std::span<std::byte> out) override {
        std::span<const std::byte> from = at(iova, out.size());
        std::memcpy(out.data(), from.data(), out.size());
        return true;
    }
    bool dma_write(std::uint64_t iova, std::span<const std::byte> in) override {
        require(iova >= window_base && iova - window_base + in.size() <= window_bytes,
                "the model writes only the read-write window");
        check_write(iova, in.size());
        std::memcpy(memory.data() + (iova - window_base), in.data(), in.size());
        return true;
    }

    // ---- registers ----
    void set_reg(std::uint32_t offset, std::uint32_t value) {
        std::array<std::byte, 4> b{};
        abi::store_be<std::uint32_t>(b.data(), value);
        fn.write(0, offset, b);
    }
    void program_cmdq(std::uint64_t q = cmdq_at) {
        set_reg(0x10, ifc::init_seg::cmdq_addr_high(q));
        set_reg(0x14, ifc::init_seg::cmdq_addr_low(q));
    }
    // A function reset, then the queue address again: a fresh function ready for commands.
    void fresh() {
        fn.reset();
        std::fill(memory.begin(), memory.end(), std::byte{0});
        std::fill(readonly.begin(), readonly.end(), std::byte{0});
        program_cmdq();
    }
    void ring(std::uint32_t vector, access_rules rules) {
        _rules = std::move(rules);
        _checking = true;
        set_reg(0x18, vector);
        _checking = false;
    }

    // The bytes at an IOVA inside a window (the harness's own view of driver memory).
    std::span<std::byte> at(std::uint64_t iova, std::size_t n) {
        if (iova >= window_base && iova - window_base <= window_bytes && n <= window_bytes - (iova - window_base)) {
            return {memory.data() + (iova - window_base), n};
        }
        require(iova >= readonly_base && iova - readonly_base <= readonly_bytes &&
                    n <= readonly_bytes - (iova - readonly_base),
                "the model reads only inside the driver's windows");
        return {readonly.data() + (iova - readonly_base), n};
    }
    std::span<std::byte, cmdq::entry_bytes> entry(unsigned slot) {
        return at(cmdq_at + slot * cmdq::entry_bytes, cmdq::entry_bytes).first<cmdq::entry_bytes>();
    }

    model::function_model fn;
    std::unique_ptr<sim::vfio_user::server> server;
    std::vector<std::byte> memory;
    std::vector<std::byte> readonly;

private:
    static std::string make_dir() {
        std::string t = (std::filesystem::temp_directory_path() / "rig-fuzz-mlx5-XXXXXX").string();
        require(::mkdtemp(t.data()) != nullptr, "a temporary directory for the server's socket");
        return t;
    }
    // A write of the model during a command: its own entry, the blocks of the output chain, or
    // a queue's memory (EQEs of the command event, 64 bytes at most, outside the queue page).
    void check_write(std::uint64_t iova, std::size_t n) const {
        if (!_checking) {
            return;
        }
        const std::uint64_t end = iova + n;
        if (iova < boxes_at) {
            const std::uint64_t e = cmdq_at + _rules.slot * cmdq::entry_bytes;
            require(iova >= e && end <= e + cmdq::entry_bytes, "the model writes no command entry but the one it runs");
            return;
        }
        for (const std::uint64_t b : _rules.output_blocks) {
            if (iova >= b && end <= b + cmdq::block_bytes) {
                return;
            }
        }
        require(n <= 64 && iova / 64 == (end - 1) / 64,
                "the model writes no mailbox block but the output chain's (an EQE aside)");
    }

    access_rules _rules;
    bool _checking = false;
};

}  // namespace rig::fuzz::mlx5
