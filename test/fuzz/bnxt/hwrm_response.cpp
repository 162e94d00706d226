// Fuzzes the driver's HWRM path (firmware/bnxt/hwrm.cpp hwrm_channel::exec / wait_response /
// ver_get, and device.cpp's bring-up and teardown, which decode every response the driver reads:
// VER_GET, FUNC_QCAPS, FUNC_QCFG, FUNC_RESOURCE_QCAPS, STAT_CTX_ALLOC, VNIC_ALLOC,
// CFA_L2_FILTER_ALLOC, RING_ALLOC, the RoCE channel's QUERY_FUNC ...) with responses as a hostile
// device writes them. A driver::function in this process plays the device: the model's firmware
// (sim/bnxt/firmware.hpp) answers each request honestly, synchronously at the trigger, and the
// fuzz bytes then corrupt that response in the driver's buffer: any error_code and cmd_err,
// another req_type echoed, another seq_id, any resp_len, the valid byte never set, no response
// at all, or body bytes overwritten (FUNC_BACKING_STORE_QCAPS's body aside: its sizes are
// trusted, see the report). device::bring_up runs with every deadline "now" (the device answers
// within the trigger), then teardown.
// Oracle (bnxt_hwrm.c __hwrm_send, hwrm.hpp's contract): with no corruption bring-up succeeds;
// a response with error_code set fails its step with a status error naming that code and
// cmd_err (FUNC_RESOURCE_QCAPS aside: a refusal there means the old resource manager), another
// req_type fails it as bad output, another seq_id, no valid byte or no response as a timeout;
// every failure of bring-up names its step; after a timeout the channel sends nothing more (no
// trigger reaches the device, teardown included) and the memory the firmware may still name (the
// HWRM buffers, the context memory a FUNC_BACKING_STORE_CFG not refused gave) is stranded, never
// unmapped.
// Each timeout strands memory for the life of the process (firmware/stranded.hpp, by design):
// the harness makes at most `timeout_budget` of them per process, then answers such corruptions
// honestly (a later input may then behave differently from a fresh process: rerun a crash alone).
#include <set>

#include "firmware/bnxt/device.hpp"
#include "test/fuzz/bnxt/hwrm_bench.hpp"

namespace {

using namespace rig::fuzz::bnxt;
using rig::fuzz::require;
namespace ra = ::rig::abi;
namespace fw = ::rig::firmware::bnxt;

unsigned timeout_budget = 256;

enum class corruption : std::uint8_t { none, error_code, req_type, seq_id, resp_len, no_valid, silence, body };

// One trigger as the device saw it and what it did to the response.
struct exchange {
    std::uint16_t req_type = 0;
    corruption what = corruption::none;
    std::uint16_t error_code = 0;
    std::uint8_t cmd_err = 0;
    std::uint16_t model_error = 0;   // what the honest firmware answered
};

class hostile_function final : public refusing_function {
public:
    explicit hostile_function(reader& in) : _in(in), _fw(small_firmware()) {}

    std::vector<exchange> exchanges;
    std::optional<std::size_t> first_timeout;   // the trigger whose corruption times the driver out

    std::string_view name() const noexcept override { return "fuzz-hwrm"; }
    driver::result<void> config_read(std::uint32_t offset, std::span<std::byte> out) override {
        std::array<std::byte, 4> id{};
        ra::store_le<std::uint16_t>(id.data(), 0x14e4);
        ra::store_le<std::uint16_t>(id.data() + 2, 0x1750);
        for (std::size_t i = 0; i < out.size(); ++i) {
            out[i] = offset + i < 4 ? id[offset + i] : std::byte{0};
        }
        return {};
    }
    driver::result<void> config_write(std::uint32_t, std::span<const std::byte>) override { return {}; }
    driver::result<driver::region_info> get_region_info(driver::region index) override {
        driver::region_info r;
        r.index = index;
        r.size = index == driver::region::bar2 ? std::uint64_t{4} << 20 : 0x10000;
        return r;
    }
    driver::result<void> region_read(driver::region, std::uint64_t, std::span<std::byte> out) override {
        std::fill(out.begin(), out.end(), std::byte{0});
        return {};
    }
    driver::result<void> region_write(driver::region r, std::uint64_t offset, std::span<const std::byte> in) override {
        if (r != driver::region::bar0) {
            return {};   // doorbells: the model's interrupts are not modelled here (polling mode)
        }
        require(offset + in.size() <= _bar0.size(), "the driver writes inside BAR0's registers");
        std::memcpy(_bar0.data() + offset, in.data(), in.size());
        const std::uint32_t v = in.size() == 4 ? ra::load_le<std::uint32_t>(in.data()) : 0;
        if (offset == abi::GRCPF_REG_CHIMP_COMM_TRIGGER && v == 1) {
            hwrm_trigger();
        } else if (offset == 0x700 && v == 1) {
            _fw.rcfw_doorbell(std::span<const std::byte>(_bar0.data() + 0x600, 0x104), &_dma);
        }
        return {};
    }
    driver::result<std::uint64_t> dma_map(const driver::dma_memory& m, std::size_t offset, std::size_t bytes,
                                          driver::dma_access) override {
        const std::uint64_t iova = _maps.add(m.data() + offset, bytes);
        require(_dma.map(iova, bytes, true, true, m.fd(), offset) == 0, "the device's DMA window maps");
        if (_maps.size() == 1) {
            _hwrm_buffers = iova;   // the channel's first mapping: response and short-command pages
        } else if (!exchanges.empty() && exchanges.back().req_type == abi::HWRM_FUNC_BACKING_STORE_QCAPS) {
            _context.insert(iova);  // made between BACKING_STORE_QCAPS and _CFG
        }
        return iova;
    }
    driver::result<void> dma_unmap(std::uint64_t iova, std::size_t bytes) override {
        require(_maps.names(iova, bytes), "an unmap names a mapping");
        // what the firmware may still name once it stopped answering: the HWRM channel's buffers
        // (hwrm.hpp), and the context memory once FUNC_BACKING_STORE_CFG was not refused
        // (device.hpp: a refusal means the firmware took nothing)
        const bool named = iova == _hwrm_buffers || (_context_given && _context.contains(iova));
        require(!first_timeout || !named, "memory the firmware may name is never unmapped after a timeout");
        require(_dma.unmap(iova, bytes) == 0, "the device's DMA window unmaps");
        _maps.remove(iova);
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
    driver::result<void> reset() override { return {}; }
    void release() noexcept override {}

private:
    bool budget_allows() {
        if (timeout_budget == 0) {
            return false;
        }
        --timeout_budget;
        return true;
    }
    void hwrm_trigger() {
        require(!first_timeout, "after a timeout the channel sends nothing");
        exchange x;
        x.req_type = ra::load_le<std::uint16_t>(_bar0.data());
        const auto o = _fw.run(std::span<const std::byte>(_bar0.data(), 128), &_dma);
        require(o.responded, "the driver's requests reach a mapped response buffer");
        x.model_error = o.error_code;
        std::byte* r = _maps.host(o.resp_addr, 16);
        require(r != nullptr, "the response buffer is mapped");
        const std::uint16_t len = ra::load_le<std::uint16_t>(r + 6);
        const std::uint8_t pick = _in.u8();
        switch (pick % 10) {
        case 1:
            x.what = corruption::error_code;
            x.error_code = static_cast<std::uint16_t>(_in.u16() | 1);
            x.cmd_err = _in.u8();
            ra::store_le<std::uint16_t>(r, x.error_code);
            r[14] = std::byte{x.cmd_err};
            break;
        case 2:
            x.what = corruption::req_type;
            ra::store_le<std::uint16_t>(r + 2, static_cast<std::uint16_t>(x.req_type ^ (1 + _in.u16() % 0xfffe)));
            break;
        case 3:
        case 4:
        case 5:
            if (!budget_allows()) {
                break;
            }
            x.what = pick % 10 == 3 ? corruption::seq_id : pick % 10 == 4 ? corruption::no_valid : corruption::silence;
            if (x.what == corruption::seq_id) {
                ra::store_le<std::uint16_t>(r + 4, static_cast<std::uint16_t>(o.seq_id ^ (1 + _in.u16() % 0xfffe)));
            } else if (x.what == corruption::no_valid) {
                r[len - 1] = std::byte{0};
            } else {
                std::memset(r, 0, len);
            }
            first_timeout = exchanges.size();
            break;
        case 6: {
            x.what = corruption::resp_len;
            const std::uint16_t lie = _in.u16();
            // a lie the driver can read as complete needs a nonzero byte at lie - 1; otherwise it
            // waits for the valid byte: a timeout, which the budget must allow
            const std::byte* at = lie >= 1 && lie <= 0x1000 ? _maps.host(o.resp_addr + lie - 1, 1) : nullptr;
            const bool waits = lie >= 8 && lie <= 704 && at != nullptr && *at == std::byte{0};
            if (waits && !budget_allows()) {
                x.what = corruption::none;
                break;
            }
            ra::store_le<std::uint16_t>(r + 6, lie);
            if (waits) {
                first_timeout = exchanges.size();
            }
            break;
        }
        case 7:
        case 8:
            if (x.req_type != abi::HWRM_FUNC_BACKING_STORE_QCAPS && len > 9) {
                x.what = corruption::body;
                _in.overwrite(std::span<std::byte>(r + 8, len - 9), 4);   // header and valid byte kept
            }
            break;
        default: break;
        }
        if (o.req_type == abi::HWRM_FUNC_BACKING_STORE_CFG) {
            _context_given = o.error_code == 0 && x.what != corruption::error_code;
        }
        exchanges.push_back(x);
    }

    reader& _in;
    model::firmware _fw;
    sim::vfio_user::dma_space _dma;
    std::array<std::byte, 0x1000> _bar0{};
    iova_map _maps;
    std::uint64_t _hwrm_buffers = 0;
    std::set<std::uint64_t> _context;
    bool _context_given = false;
};

fw::device_options options() {
    fw::device_options o;
    fw::device_timeouts& t = o.timeouts;
    for (fw::ms* m : {&t.ready, &t.func_reset, &t.func_qcaps, &t.drv_rgtr, &t.backing_store, &t.resource_qcaps,
                      &t.func_qcfg, &t.func_cfg, &t.stat_ctx, &t.vnic, &t.l2_filter, &t.creq, &t.rcfw, &t.query_func,
                      &t.initialize_fw, &t.nq, &t.async_cr, &t.add_gid, &t.teardown_step}) {
        *m = fw::ms(0);
    }
    o.hwrm.first_timeout = fw::ms(0);
    o.hwrm.valid_byte_wait = fw::ms(0);
    o.creq_entries = 256;
    o.nq_entries = 256;
    o.rcfw.cmdq_slots = 256;
    o.rcfw.timeout = fw::ms(0);
    return o;
}

// The first exchange whose corruption must fail bring-up there, and how.
std::optional<std::size_t> decisive(const std::vector<exchange>& xs) {
    for (std::size_t i = 0; i < xs.size(); ++i) {
        const exchange& x = xs[i];
        const bool tolerated = x.req_type == abi::HWRM_FUNC_RESOURCE_QCAPS && x.what == corruption::error_code;
        if (!tolerated && x.what != corruption::none && x.what != corruption::body && x.what != corruption::resp_len) {
            return i;
        }
    }
    return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    reader in(data, size);
    hostile_function f(in);
    const std::uint8_t roce = in.u8();
    fw::device_options o = options();
    o.roce_channel = (roce & 1) != 0;
    auto up = fw::device::bring_up(f, o);
    const std::size_t during = f.exchanges.size();
    const bool corrupted = std::any_of(f.exchanges.begin(), f.exchanges.end(),
                                       [](const exchange& x) { return x.what != corruption::none; });
    if (up) {
        require(!decisive(f.exchanges), "a corrupted response never passes for a good one");
        static_cast<void>((*up)->teardown());
        const bool all_honest = std::all_of(f.exchanges.begin(), f.exchanges.end(),
                                            [](const exchange& x) { return x.what == corruption::none; });
        require((*up)->stranded_registry().report().empty() || !all_honest, "an honest teardown strands nothing");
        return 0;
    }
    const fw::error& e = up.error();
    require(corrupted, "the honest firmware's bring-up succeeds");
    require(e.message.starts_with("bring-up step "), "a failed bring-up names its step");
    if (const auto k = decisive(f.exchanges); k && *k < during) {
        const exchange& x = f.exchanges[*k];
        if (e.req_type == x.req_type && e.channel == "hwrm") {
            switch (x.what) {
            case corruption::error_code:
                require(e.kind == fw::error_kind::status && e.error_code == x.error_code && e.cmd_err == x.cmd_err,
                        "an error_code fails the step with that status and cmd_err");
                break;
            case corruption::req_type:
                require(e.kind == fw::error_kind::bad_output, "another req_type echoed is bad output");
                break;
            default:
                require(e.kind == fw::error_kind::timeout, "no response of this request is a timeout");
                break;
            }
        }
    }
    if (e.kind == fw::error_kind::status && e.channel == "hwrm") {
        require(std::any_of(f.exchanges.begin(), f.exchanges.end(),
                            [&](const exchange& x) {
                                return x.what == corruption::error_code ? x.error_code == e.error_code
                                                                        : x.model_error == e.error_code;
                            }),
                "a status error carries a code the device wrote (a corruption's, or the firmware's own)");
    }
    return 0;
}
