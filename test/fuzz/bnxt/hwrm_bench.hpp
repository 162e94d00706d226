#pragma once
// What the bnxt firmware-path harnesses share (hwrm_request.cpp, rcfw_cmdq.cpp on the model's
// side; hwrm_response.cpp, rcfw_creq.cpp on the driver's): a bench around the model's
// transport-free firmware (sim/bnxt/firmware.hpp): a vfio_user::dma_space over memfd memory this
// process writes and reads as a driver would, the model's HWRM request window run synchronously
// (firmware::run), and a RoCE-sized backing store made once by the driver's own code
// (firmware/bnxt/context_memory.hpp) and restored to its first bytes before every input, so that
// each input starts from the same state.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "abi/bits.hpp"
#include "abi/bnxt/hwrm.hpp"
#include "abi/bnxt/hwrm_cmds.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/bnxt/context_memory.hpp"
#include "sim/bnxt/firmware.hpp"
#include "sim/vfio_user/dma_space.hpp"
#include "test/fuzz/harness.hpp"
#include "test/fuzz/reader.hpp"

namespace rig::fuzz::bnxt {

namespace abi = ::rig::bnxt::abi;
namespace model = ::rig::sim::bnxt;
namespace driver = ::rig::driver;
namespace sim = ::rig::sim;

// test/fuzz/reader.hpp; these harnesses mutate valid templates, so they fill with copy_some.
using rig::fuzz::reader;

template <class T>
std::vector<std::byte> bytes_of_layout(const T& value) {
    const auto b = abi::to_bytes(value);
    return {b.begin(), b.end()};
}

// The driver's DMA memory by IOVA, as a fuzz device reaches it: each mapping at the next 64 KiB
// boundary after the last (IOVAs are never reused, so a stale one names nothing).
class iova_map {
public:
    struct range {
        std::byte* host;
        std::size_t bytes;
    };

    std::uint64_t add(std::byte* host, std::size_t bytes) {
        const std::uint64_t iova = _next;
        _next += (bytes + 0xffff) & ~std::uint64_t{0xffff};
        _ranges[iova] = {host, bytes};
        return iova;
    }
    // Whether [iova, iova + bytes) is exactly one mapping (what an unmap must name).
    bool names(std::uint64_t iova, std::size_t bytes) const {
        const auto it = _ranges.find(iova);
        return it != _ranges.end() && it->second.bytes == bytes;
    }
    void remove(std::uint64_t iova) { _ranges.erase(iova); }
    // The host bytes behind [iova, iova + n), or nullptr unless one mapping holds them all.
    std::byte* host(std::uint64_t iova, std::size_t n) const {
        auto it = _ranges.upper_bound(iova);
        if (it == _ranges.begin()) {
            return nullptr;
        }
        --it;
        const std::uint64_t off = iova - it->first;
        return off <= it->second.bytes && n <= it->second.bytes - off ? it->second.host + off : nullptr;
    }
    std::size_t size() const noexcept { return _ranges.size(); }
    auto begin() const noexcept { return _ranges.begin(); }
    auto end() const noexcept { return _ranges.end(); }

private:
    std::map<std::uint64_t, range> _ranges;
    std::uint64_t _next = 0x10000000;
};

// A driver::function that refuses every call but config_write (ignored) and release: a fuzz
// device overrides only what its driver path reaches, so a call it did not expect fails loudly
// in the driver instead of being served by accident.
class refusing_function : public driver::function {
public:
    std::string_view name() const noexcept override { return "fuzz-bnxt"; }
    driver::result<void> config_read(std::uint32_t, std::span<std::byte>) override { return refused(); }
    driver::result<void> config_write(std::uint32_t, std::span<const std::byte>) override { return {}; }
    driver::result<driver::region_info> get_region_info(driver::region) override { return refused(); }
    driver::result<void> region_read(driver::region, std::uint64_t, std::span<std::byte>) override { return refused(); }
    driver::result<void> region_write(driver::region, std::uint64_t, std::span<const std::byte>) override {
        return refused();
    }
    driver::result<driver::bar_mapping> map_bar(driver::region, driver::caching) override { return refused(); }
    driver::result<std::uint64_t> dma_map(const driver::dma_memory&, std::size_t, std::size_t,
                                          driver::dma_access) override {
        return refused();
    }
    driver::result<void> dma_unmap(std::uint64_t, std::size_t) override { return refused(); }
    driver::result<driver::irq_info> get_irq_info(driver::irq_kind) override { return refused(); }
    driver::result<std::vector<int>> enable_irqs(driver::irq_kind, std::uint32_t) override { return refused(); }
    driver::result<void> disable_irqs(driver::irq_kind) override { return refused(); }
    driver::result<void> unmask_intx() override { return refused(); }
    driver::result<void> reset() override { return refused(); }
    void release() noexcept override {}

protected:
    static std::unexpected<driver::error> refused() { return std::unexpected(driver::error{"not in the fuzz device"}); }
    // Config space reads as zeros (no vendor or device id: the paths here never ask).
    static driver::result<void> zeros(std::span<std::byte> out) {
        std::fill(out.begin(), out.end(), std::byte{0});
        return {};
    }
};

// A driver::function whose only work is dma_map into a model's dma_space (what the driver's
// context_memory::allocate needs); every other call is refused: nothing else is reached here.
class mapping_function final : public refusing_function {
public:
    explicit mapping_function(sim::vfio_user::dma_space& dma) : _dma(dma) {}
    iova_map maps;

    driver::result<void> config_read(std::uint32_t, std::span<std::byte> out) override { return zeros(out); }
    driver::result<std::uint64_t> dma_map(const driver::dma_memory& m, std::size_t offset, std::size_t bytes,
                                          driver::dma_access) override {
        const std::uint64_t iova = maps.add(m.data() + offset, bytes);
        require(_dma.map(iova, bytes, true, true, m.fd(), offset) == 0, "the bench's DMA window maps");
        return iova;
    }
    driver::result<void> dma_unmap(std::uint64_t iova, std::size_t bytes) override {
        require(_dma.unmap(iova, bytes) == 0, "the bench's DMA window unmaps");
        maps.remove(iova);
        return {};
    }

private:
    sim::vfio_user::dma_space& _dma;
};

// Small context-memory maxima: a RoCE backing store of about half a MiB (the defaults ask for
// tens of MiB, too slow to restore per input); everything else as the model's defaults.
inline model::firmware_options small_firmware() {
    model::firmware_options o;
    o.qp_max_entries = 256;
    o.qp_min_qp1_entries = 16;
    o.qp_max_l2_entries = 64;
    o.srq_max_l2_entries = 64;
    o.srq_max_entries = 256;
    o.cq_max_l2_entries = 64;
    o.cq_max_entries = 512;
    o.vnic_max_vnic_entries = 16;
    o.vnic_max_ring_table_entries = 16;
    o.stat_max_entries = 64;
    o.tqm_min_entries_per_ring = 64;
    o.tqm_max_entries_per_ring = 1024;
    o.tqm_fp_rings_count = 2;
    o.mrav_max_entries = 512;
    o.tim_max_entries = 256;
    o.max_gid = 16;
    return o;
}

// The bench: scratch DMA memory (the response, short-command, ring and queue buffers of a
// driver) and the backing store, both mapped into `dma`; built once per process.
struct model_bench {
    static constexpr std::size_t scratch_bytes = 512 << 10;
    // scratch offsets
    static constexpr std::size_t resp_off = 0x0000;     // the HWRM response buffer
    static constexpr std::size_t short_off = 0x1000;    // a short command's full request
    static constexpr std::size_t creq_off = 0x2000;     // the CREQ NQ ring, 256 entries
    static constexpr std::size_t cmdq_off = 0x3000;     // the CMDQ, 256 slots (level 0)
    static constexpr std::size_t stats_off = 0x4000;    // a statistics buffer
    static constexpr std::size_t free_off = 0x5000;     // queue memory, side buffers, page tables
    static constexpr std::uint32_t creq_entries = 256;
    static constexpr std::uint32_t cmdq_slots = 256;

    sim::vfio_user::dma_space dma;
    mapping_function fn{dma};
    driver::dma_memory scratch;
    std::uint64_t scratch_iova = 0;
    std::unique_ptr<firmware::bnxt::context_memory> ctx;
    abi::hwrm_func_backing_store_cfg_input backing_store_cfg;
    std::vector<std::pair<std::byte*, std::vector<std::byte>>> ctx_snapshot;   // the pages as made
    std::uint16_t seq = 0;

    model_bench() {
        auto m = driver::dma_memory::allocate(scratch_bytes, driver::page_choice::small_only);
        require(m.has_value(), "the bench's scratch memory");
        scratch = std::move(*m);
        scratch_iova = *fn.dma_map(scratch, 0, scratch_bytes, driver::dma_access::read_write);
        model::firmware fw(small_firmware());
        const auto q = send(fw, bytes_of_layout(abi::hwrm_func_backing_store_qcaps_input{}));
        require(q.error_code == 0, "the bench's BACKING_STORE_QCAPS");
        const auto caps = *abi::decode<abi::hwrm_func_backing_store_qcaps_output>(response());
        auto c = firmware::bnxt::context_memory::allocate(fn, caps, true);
        require(c.has_value(), "the bench's context memory");
        ctx = std::move(*c);
        backing_store_cfg = ctx->cfg_request();
        for (const auto& [iova, r] : fn.maps) {
            if (iova != scratch_iova) {
                ctx_snapshot.emplace_back(r.host, std::vector<std::byte>(r.host, r.host + r.bytes));
            }
        }
    }

    // Before each input: the scratch memory zeroed, the context pages as the driver made them.
    void restore() {
        std::memset(scratch.data(), 0, scratch_bytes);
        for (const auto& [host, saved] : ctx_snapshot) {
            std::memcpy(host, saved.data(), saved.size());
        }
        seq = 0;
    }
    std::uint64_t iova(std::size_t off) const { return scratch_iova + off; }
    std::byte* host(std::size_t off) { return scratch.data() + off; }
    bool in_scratch(std::uint64_t a, std::size_t n) const {
        return a >= scratch_iova && n <= scratch_bytes && a - scratch_iova <= scratch_bytes - n;
    }
    // The response at the response buffer (resp_len bytes, clamped to the page).
    std::span<const std::byte> response() {
        const auto len = rig::abi::load_le<std::uint16_t>(host(resp_off) + 6);
        return {host(resp_off), std::min<std::size_t>(len, 0x1000)};
    }

    // Sends a well-formed request as a driver does (seq_id and resp_addr set, the window zero
    // padded, a short command when longer than the window) and runs it.
    model::outcome send(model::firmware& fw, std::vector<std::byte> req) {
        rig::abi::store_le<std::uint16_t>(req.data() + 4, ++seq);
        rig::abi::store_le<std::uint64_t>(req.data() + 8, iova(resp_off));
        std::memset(host(resp_off), 0, 0x1000);
        std::array<std::byte, 128> window{};
        if (req.size() > window.size()) {
            std::memcpy(host(short_off), req.data(), req.size());
            abi::hwrm_short_input s;
            s.req_type = rig::abi::load_le<std::uint16_t>(req.data());
            s.target_id = 0xffff;
            s.size = static_cast<std::uint16_t>(req.size());
            s.req_addr = iova(short_off);
            const auto b = abi::to_bytes(s);
            std::memcpy(window.data(), b.data(), b.size());
        } else {
            std::memcpy(window.data(), req.data(), req.size());
        }
        return fw.run(window, &dma);
    }
};

// The process's one bench (made once: the backing store is too slow to make per input), restored
// to its first bytes so that this input starts where every other did.
inline model_bench& restored_bench() {
    static model_bench b;
    b.restore();
    return b;
}

}  // namespace rig::fuzz::bnxt
