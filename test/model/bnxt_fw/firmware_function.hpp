#pragma once
// A driver::function around the bnxt model's HWRM firmware (sim/bnxt/firmware.hpp), in this
// process and synchronous: BAR0 is plain bytes, a write of 1 to the trigger (0x100) hands the
// window to the firmware, which runs the request at once and DMA-writes its response into the
// memory the driver mapped (a vfio_user::dma_space over the same memfds). The tests see every
// window the trigger found, and make the firmware fall silent or the BAR refuse writes.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/bits.hpp"
#include "abi/bnxt/hwrm.hpp"
#include "driver/function.hpp"
#include "sim/bnxt/firmware.hpp"
#include "sim/vfio_user/dma_space.hpp"

namespace rig::test::bnxt {

// The model's def_req_timeout, and "within N ms" as the driver words a timeout after VER_GET
// (500 ms, Thor's; more under ThreadSanitizer, sim/bnxt/firmware.hpp).
inline std::chrono::milliseconds model_timeout() {
    return std::chrono::milliseconds(::rig::sim::bnxt::firmware_options{}.def_req_timeout_ms);
}
inline std::string within_model_timeout() { return "within " + std::to_string(model_timeout().count()) + " ms"; }

class firmware_function final : public driver::function {
public:
    explicit firmware_function(sim::bnxt::firmware_options o = {}) : fw(o) {}

    sim::bnxt::firmware fw;
    sim::vfio_user::dma_space dma;
    std::vector<std::byte> bar0 = std::vector<std::byte>(0x1000);
    std::vector<std::vector<std::byte>> windows;      // the whole 128-byte window at each trigger
    std::vector<std::size_t> window_write_sizes;      // bytes of each write to the window
    std::vector<sim::bnxt::outcome> outcomes;
    std::size_t answer_limit = std::numeric_limits<std::size_t>::max();  // then silence
    bool refuse_writes = false;
    std::map<std::uint64_t, std::uint64_t> maps;      // iova -> bytes
    std::uint64_t next_iova = 0x10000000;
    std::uint16_t device_id = 0x1750;

    std::size_t triggers() const { return windows.size(); }

    // ---- a stand-in for the RoCE firmware (the model answers no RCFW yet) ----
    // At each CMDQ trigger (BAR0 0x700) the commands up to the producer are read from the CMDQ
    // cmdq_init named and answered on the CREQ ring (the firmware's NQ ring `rcfw_creq`): a
    // QP_EVENT with rcfw_status, the cookie, xid 0x11223344, the opcode; a side buffer gets its
    // header and 0xab bytes. rcfw_hold > 1: answers wait until that many are pending, then go
    // out in reverse order. The CREQ is the ring cmdq_init names.
    std::uint8_t rcfw_status = 0;
    bool rcfw_silent = false;
    std::size_t rcfw_hold = 1;
    std::vector<std::uint32_t> producers;               // each producer write, bit 31 included
    std::vector<std::vector<std::byte>> rcfw_commands;  // each command as read from the CMDQ
    // how many, for a thread waiting while another rings (the device thread pushes them)
    std::atomic<std::size_t> rcfw_seen{0};
    std::vector<std::uint64_t> bar2_writes;             // doorbells
    std::uint32_t rcfw_consumed = 0;
    std::uint64_t creq_written = 0;
    std::vector<std::vector<std::byte>> rcfw_waiting;

    std::uint64_t slot_address(std::uint32_t slot) {
        const auto pbl = ::rig::abi::load_le<std::uint64_t>(bar0.data() + 0x600);
        std::array<std::byte, 8> pte{};
        REQUIRE(dma.read(pbl + 8 * (std::uint64_t{slot} * 16 / 4096), pte));
        const auto page = ::rig::abi::load_le<std::uint64_t>(pte.data());
        REQUIRE((page & 1) == 1);
        return (page & ~std::uint64_t{0xfff}) + std::uint64_t{slot} * 16 % 4096;
    }
    void rcfw_answer(const std::vector<std::byte>& c) {
        const auto& ring = fw.rings().at(::rig::abi::load_le<std::uint16_t>(bar0.data() + 0x60a));  // cmdq_init
        std::array<std::byte, 16> e{};
        e[0] = std::byte{0x38};
        e[1] = std::byte{rcfw_status};
        e[2] = c[4];
        e[3] = c[5];
        ::rig::abi::store_le<std::uint32_t>(e.data() + 4, 0x11223344);
        e[8] = std::byte{static_cast<std::uint8_t>((creq_written / ring.length) % 2 == 0 ? 1 : 0)};
        e[9] = c[0];
        const auto resp_size = std::to_integer<std::uint8_t>(c[6]);
        if (resp_size != 0) {
            std::vector<std::byte> sb(std::size_t{resp_size} * 16, std::byte{0xab});
            sb[0] = c[0];
            sb[1] = std::byte{rcfw_status};
            sb[2] = c[4];
            sb[3] = c[5];
            sb[6] = c[6];
            REQUIRE(dma.write(::rig::abi::load_le<std::uint64_t>(c.data() + 8), sb));
        }
        const auto at = ring.entry_address(static_cast<std::uint32_t>(creq_written % ring.length));
        REQUIRE(at.has_value());
        REQUIRE(dma.write(*at, e));
        ++creq_written;
    }
    void rcfw_trigger() {
        const std::uint32_t prod = ::rig::abi::load_le<std::uint32_t>(bar0.data() + 0x60c) & 0xffff;
        const std::uint32_t size = ::rig::abi::load_le<std::uint16_t>(bar0.data() + 0x608) >> 2;
        while ((rcfw_consumed & 0xffff) != prod) {
            std::array<std::byte, 16> hdr{};
            REQUIRE(dma.read(slot_address(rcfw_consumed % size), hdr));
            const auto n = std::to_integer<std::uint32_t>(hdr[1]);
            REQUIRE(n >= 1);
            std::vector<std::byte> c;
            for (std::uint32_t i = 0; i < n; ++i) {
                std::array<std::byte, 16> slot{};
                REQUIRE(dma.read(slot_address((rcfw_consumed + i) % size), slot));
                c.insert(c.end(), slot.begin(), slot.end());
            }
            rcfw_consumed += n;
            rcfw_commands.push_back(c);
            rcfw_seen.fetch_add(1, std::memory_order_release);
            if (!rcfw_silent) {
                rcfw_waiting.push_back(c);
            }
        }
        if (rcfw_waiting.size() >= rcfw_hold) {
            for (auto it = rcfw_waiting.rbegin(); it != rcfw_waiting.rend(); ++it) {
                rcfw_answer(*it);
            }
            rcfw_waiting.clear();
        }
    }

    std::string_view name() const noexcept override { return "bnxt-fw"; }
    driver::result<void> config_read(std::uint32_t offset, std::span<std::byte> out) override {
        std::array<std::byte, 4> id{};
        ::rig::abi::store_le<std::uint16_t>(id.data(), 0x14e4);
        ::rig::abi::store_le<std::uint16_t>(id.data() + 2, device_id);
        for (std::size_t i = 0; i < out.size(); ++i) {
            out[i] = offset + i < 4 ? id[offset + i] : std::byte{0};
        }
        return {};
    }
    driver::result<void> config_write(std::uint32_t, std::span<const std::byte>) override { return {}; }
    driver::result<driver::region_info> get_region_info(driver::region index) override {
        driver::region_info r;
        r.index = index;
        r.size = index == driver::region::bar2 ? std::uint64_t{4} << 20 : bar0.size();   // BAR2: the model's 4 MiB
        return r;
    }
    driver::result<void> region_read(driver::region, std::uint64_t offset, std::span<std::byte> out) override {
        std::memcpy(out.data(), bar0.data() + offset, out.size());
        return {};
    }
    driver::result<void> region_write(driver::region r, std::uint64_t offset, std::span<const std::byte> in) override {
        if (refuse_writes) {
            return std::unexpected(driver::error{"BAR0 write refused"});
        }
        if (r == driver::region::bar2) {
            REQUIRE(in.size() == 8);
            bar2_writes.push_back(::rig::abi::load_le<std::uint64_t>(in.data()));
            return {};
        }
        REQUIRE(offset + in.size() <= bar0.size());
        std::memcpy(bar0.data() + offset, in.data(), in.size());
        if (offset < ::rig::bnxt::abi::GRCPF_REG_CHIMP_COMM_TRIGGER && in.size() > 4) {
            window_write_sizes.push_back(in.size());
        }
        if (offset == 0x60c && in.size() == 4) {
            producers.push_back(::rig::abi::load_le<std::uint32_t>(in.data()));
        }
        if (offset == 0x700 && in.size() == 4 && ::rig::abi::load_le<std::uint32_t>(in.data()) == 1) {
            rcfw_trigger();
        }
        if (offset == ::rig::bnxt::abi::GRCPF_REG_CHIMP_COMM_TRIGGER && in.size() == 4 &&
            ::rig::abi::load_le<std::uint32_t>(in.data()) == 1) {
            windows.emplace_back(bar0.begin(), bar0.begin() + 128);
            if (windows.size() <= answer_limit) {
                outcomes.push_back(fw.run(std::span<const std::byte>(bar0.data(), fw.options().max_req_win_len), &dma));
            }
        }
        return {};
    }
    driver::result<driver::bar_mapping> map_bar(driver::region, driver::caching) override {
        return std::unexpected(driver::error{"not mapped here"});
    }
    driver::result<std::uint64_t> dma_map(const driver::dma_memory& m, std::size_t offset, std::size_t bytes,
                                          driver::dma_access) override {
        const std::uint64_t iova = next_iova;
        next_iova += (bytes + 0xffff) & ~std::uint64_t{0xffff};
        REQUIRE(dma.map(iova, bytes, true, true, m.fd(), offset) == 0);
        maps[iova] = bytes;
        return iova;
    }
    driver::result<void> dma_unmap(std::uint64_t iova, std::size_t bytes) override {
        REQUIRE(maps.count(iova) == 1);
        REQUIRE(maps[iova] == bytes);
        REQUIRE(dma.unmap(iova, bytes) == 0);
        maps.erase(iova);
        return {};
    }
    driver::result<driver::irq_info> get_irq_info(driver::irq_kind kind) override {
        driver::irq_info i;
        i.kind = kind;
        return i;
    }
    driver::result<std::vector<int>> enable_irqs(driver::irq_kind, std::uint32_t) override { return std::vector<int>{}; }
    driver::result<void> disable_irqs(driver::irq_kind) override { return {}; }
    driver::result<void> unmask_intx() override { return {}; }
    driver::result<void> reset() override {
        fw.reset();
        return {};
    }
    void release() noexcept override {}
};

}  // namespace rig::test::bnxt
