#pragma once
// The bnxt function model served in this process over vfio-user and driven as a driver would
// drive it, by raw register writes (bnxt_hwrm.c __hwrm_send): the request written into the BAR0
// window in 32-bit stores, the rest of the window zeroed, 1 written to the trigger (0x100), the
// response polled in DMA memory until resp_len is set and its last byte is 1. Short commands
// (signature 0x4321) put the full request in DMA memory. No firmware/ code: the model's tests
// must not lean on the driver they will judge.
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "abi/bnxt/hwrm.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/temp_dir.hpp"

namespace rig::test::bnxt {

namespace abi = ::rig::bnxt::abi;
namespace drv = ::rig::driver;
using namespace std::chrono_literals;

// A response as it lies in the response buffer.
struct response {
    std::vector<std::byte> bytes;   // resp_len bytes (empty: none arrived)
    bool arrived() const { return !bytes.empty(); }
    std::uint16_t error_code() const { return rig::abi::load_le<std::uint16_t>(bytes.data()); }
    std::uint16_t req_type() const { return rig::abi::load_le<std::uint16_t>(bytes.data() + 2); }
    std::uint16_t seq_id() const { return rig::abi::load_le<std::uint16_t>(bytes.data() + 4); }
    std::uint16_t resp_len() const { return rig::abi::load_le<std::uint16_t>(bytes.data() + 6); }
    std::uint8_t valid() const { return std::to_integer<std::uint8_t>(bytes.back()); }
    std::uint8_t cmd_err() const { return std::to_integer<std::uint8_t>(bytes.at(14)); }
    template <class Out>
    Out as() const {
        REQUIRE(bytes.size() == Out::layout_size);
        return *abi::decode<Out>(bytes);
    }
};

// Options with `set` applied to the defaults.
template <class F>
sim::bnxt::function_options options(F set) {
    sim::bnxt::function_options o;
    set(o);
    return o;
}

enum class send_mode { automatic, window, short_command };

// A driver's side of a bnxt function at a vfio-user socket: the function opened by
// driver::open, 16 MiB of DMA memory mapped (response buffer at 0, short-command buffer at
// 4 KiB, the rest handed out by alloc()), and the HWRM send path.
struct hwrm_client {
    static constexpr std::size_t mem_bytes = 16u << 20;
    static constexpr std::size_t resp_off = 0;        // the response buffer (4 KiB)
    static constexpr std::size_t short_off = 0x1000;  // a short command's full request
    std::unique_ptr<drv::function> f;
    drv::dma_memory mem;
    std::uint64_t iova = 0;
    std::size_t next_free = 0x10000;   // alloc()'s bump pointer into mem
    std::uint16_t seq = 0x100;

    explicit hwrm_client(const std::string& socket) {
        auto opened = drv::open("vfio-user:" + socket);
        REQUIRE(opened.has_value());
        f = std::move(*opened);
        auto m = drv::dma_memory::allocate(mem_bytes, drv::page_choice::small_only);
        REQUIRE(m.has_value());
        mem = std::move(*m);
        auto mapped = f->dma_map(mem, 0, mem.size(), drv::dma_access::read_write);
        REQUIRE(mapped.has_value());
        iova = *mapped;
    }
    hwrm_client(const hwrm_client&) = delete;
    hwrm_client& operator=(const hwrm_client&) = delete;

    // `bytes` of mem, page aligned: its host bytes and IOVA.
    struct block {
        std::byte* host;
        std::uint64_t iova;
    };
    block alloc(std::size_t bytes, std::size_t align = 4096) {
        next_free = (next_free + align - 1) / align * align;
        REQUIRE(next_free + bytes <= mem_bytes);
        block b{mem.data() + next_free, iova + next_free};
        next_free += bytes;
        std::memset(b.host, 0, bytes);
        return b;
    }

    void write32(std::uint64_t off, std::uint32_t v) {
        std::array<std::byte, 4> b{};
        rig::abi::store_le<std::uint32_t>(b.data(), v);
        REQUIRE(f->region_write(drv::region::bar0, off, b).has_value());
    }
    std::uint32_t read32(drv::region r, std::uint64_t off) {
        std::array<std::byte, 4> b{};
        REQUIRE(f->region_read(r, off, b).has_value());
        return rig::abi::load_le<std::uint32_t>(b.data());
    }

    // Writes `req` (padded to 4 bytes) into the window, zeroes the rest of it, triggers.
    void post_window(std::span<const std::byte> req) {
        std::vector<std::byte> w(abi::HWRM_MAX_REQ_LEN);
        std::memcpy(w.data(), req.data(), std::min(req.size(), w.size()));
        for (std::size_t off = 0; off < w.size(); off += 4) {
            write32(off, rig::abi::load_le<std::uint32_t>(w.data() + off));
        }
        write32(abi::GRCPF_REG_CHIMP_COMM_TRIGGER, 1);
    }

    // Polls the response buffer (as the kernel's __hwrm_send: resp_len, then the last byte).
    response wait_response(std::chrono::milliseconds timeout = 2000ms) {
        const auto until = std::chrono::steady_clock::now() + timeout;
        const std::byte* r = mem.data() + resp_off;
        while (std::chrono::steady_clock::now() < until) {
            const auto len = rig::abi::load_le<std::uint16_t>(r + 6);
            if (len != 0 && len <= 4096 && std::to_integer<std::uint8_t>(r[len - 1]) == 1) {
                rig::abi::barrier::from_device();   // the rest after the valid byte
                return response{std::vector<std::byte>(r, r + len)};
            }
            std::this_thread::sleep_for(50us);
        }
        return {};
    }

    // Sends the request bytes (the header's seq_id and resp_addr set here) and waits.
    response send_bytes(std::vector<std::byte> req, send_mode mode = send_mode::automatic,
                        std::uint64_t resp_addr = 0, std::chrono::milliseconds timeout = 2000ms) {
        rig::abi::store_le<std::uint16_t>(req.data() + 4, ++seq);
        rig::abi::store_le<std::uint64_t>(req.data() + 8, resp_addr != 0 ? resp_addr : iova + resp_off);
        std::memset(mem.data() + resp_off, 0, 4096);
        if (mode == send_mode::automatic) {
            mode = req.size() > abi::HWRM_MAX_REQ_LEN ? send_mode::short_command : send_mode::window;
        }
        if (mode == send_mode::short_command) {
            std::memcpy(mem.data() + short_off, req.data(), req.size());
            abi::hwrm_short_input s;
            s.req_type = rig::abi::load_le<std::uint16_t>(req.data());
            s.target_id = 0xffff;
            s.size = static_cast<std::uint16_t>(req.size());
            s.req_addr = iova + short_off;
            const auto b = abi::to_bytes(s);
            post_window(b);
        } else {
            post_window(req);
        }
        return wait_response(timeout);
    }

    template <class In>
    response send(const In& in, send_mode mode = send_mode::automatic,
                  std::chrono::milliseconds timeout = 2000ms) {
        const auto b = abi::to_bytes(in);
        return send_bytes(std::vector<std::byte>(b.begin(), b.end()), mode, 0, timeout);
    }
};

// The bnxt function model served in this process on a socket in a fresh directory.
struct served_function {
    temp_dir dir{"rig-bnxt"};
    sim::bnxt::function_model fn;
    std::unique_ptr<sim::vfio_user::server> srv;

    explicit served_function(sim::bnxt::function_options o) : fn(o) {
        auto s = sim::vfio_user::server::create(dir.file("bnxt-0.sock"), fn);
        REQUIRE(s.has_value());
        srv = std::move(*s);
        fn.attach(*srv);
        srv->start();
    }
    std::string socket() const { return dir.file("bnxt-0.sock"); }
};

// The model and a client of it; the client goes first, then the server, then the model.
struct served_bnxt : served_function, hwrm_client {
    explicit served_bnxt(sim::bnxt::function_options o = {})
        : served_function(o), hwrm_client(served_function::socket()) {}
};

}  // namespace rig::test::bnxt
