// Fuzzes the driver's RoCE command channel (firmware/bnxt/rcfw.cpp rcfw_channel: exec, its CREQ
// poll poll_creq and the completion decoders of send<>) with CREQ entries as a hostile device
// writes them. A driver::function in this process plays the device: at each CMDQ trigger it
// reads the commands up to the producer through cmdq_init's PBL, as a firmware does, and answers
// each as the fuzz bytes say: honestly, with any status, a wrong cookie, a wrong opcode, a
// non-completion type, an asynchronous QP_ERROR_NOTIFICATION first, a completion for a command
// never sent, the same completion twice, an entry whose valid bit is the wrong pass, 16 raw
// bytes, or nothing. The CREQ is 16 entries (the phase flips often); the CMDQ 16 slots (the
// smallest the channel takes). Commands: QUERY_VERSION, QUERY_FUNC (side buffer), CREATE_CQ,
// QUERY_QP (side buffer), DESTROY_QP, through send<> and exec; the deadline is "now": the device
// answers within the trigger, so a command the CREQ does not complete times out at once.
// Oracle (qplib_rcfw.c bnxt_qplib_process_qp_event / bnxt_qplib_service_creq; rcfw.hpp): the
// outcome is what the first new CREQ entry the driver can see that completes this command says:
// a reply only with SUCCESS, its cookie and opcode, and the side buffer the device wrote; a
// status error naming that status; a bad_output error for an opcode that is not the command's;
// a timeout when no entry completes it, after which the channel refuses every command at once
// without ringing the device. Entries that are not completions reach the async handler, each
// once, in order; a completion whose cookie is not outstanding completes nothing.
#include <deque>

#include "abi/bnxt/rcfw.hpp"
#include "abi/bnxt/rcfw_cmds.hpp"
#include "firmware/bnxt/rcfw.hpp"
#include "test/fuzz/bnxt/hwrm_bench.hpp"

namespace {

using namespace rig::fuzz::bnxt;
using rig::fuzz::require;
namespace ra = ::rig::abi;
namespace fw = ::rig::firmware::bnxt;
using entry16 = std::array<std::byte, 16>;

constexpr std::uint32_t creq_entries = 16;
constexpr std::uint8_t qp_event = abi::CREQ_BASE_TYPE_QP_EVENT;

// Each timeout strands the CMDQ for the life of the process (firmware/stranded.hpp, by design:
// memory and an fd). Past this many in one process the device completes a command its entries
// left uncompleted with an honest entry at the driver's consumer, so that a long run neither
// runs out of fds nor spends its time in LeakSanitizer's scans (a later input may then behave
// differently from a fresh process: rerun a crash alone).
unsigned timeouts_left = 1024;

// The driver's view of the CREQ after a trigger (poll_creq's rule, on the ring's memory): the
// entries from its consumer on, in order, until the first whose valid bit is not its pass's (a
// wrong-pass entry blocks the ring); the completion of the outstanding cookie and the
// asynchronous entries among them.
struct expected_poll {
    std::optional<entry16> decisive;   // the first completion of the outstanding cookie
    std::vector<entry16> async;
};
expected_poll expect(std::span<const std::byte> creq, std::uint64_t& seen, std::uint16_t cookie) {
    expected_poll x;
    for (unsigned k = 0; k < creq_entries; ++k) {
        entry16 e;
        std::memcpy(e.data(), creq.data() + seen % creq_entries * 16, 16);
        const bool phase = ((seen / creq_entries) & 1) == 0;
        if (((std::to_integer<unsigned>(e[8]) & 1) != 0) != phase) {
            break;
        }
        ++seen;
        const std::uint8_t type = std::to_integer<std::uint8_t>(e[0]) & 0x3f, event = std::to_integer<std::uint8_t>(e[9]);
        if (type != qp_event || event == 0xc0 || event == 0xc1) {
            x.async.push_back(e);
        } else if (!x.decisive && ra::load_le<std::uint16_t>(e.data() + 2) == cookie) {
            x.decisive = e;
        }
    }
    return x;
}

// The device: BAR0's mailbox, the driver's DMA memory by IOVA, and the CREQ it writes.
class creq_device final : public refusing_function {
public:
    creq_device(reader& in, std::byte* creq) : _in(in), _creq(creq) {}

    std::vector<std::byte> side_written;  // the last side buffer the device wrote
    std::size_t triggers = 0;
    std::uint64_t driver_consumer = 0;    // what the driver has consumed (the harness's tally)

    std::string_view name() const noexcept override { return "fuzz-creq"; }
    driver::result<void> config_read(std::uint32_t, std::span<std::byte> out) override { return zeros(out); }
    driver::result<void> region_write(driver::region r, std::uint64_t offset, std::span<const std::byte> in) override {
        if (r != driver::region::bar0) {
            return {};   // the CREQ doorbells (BAR2)
        }
        require(offset >= 0x600 && offset + in.size() <= 0x704, "the channel writes only its mailbox");
        std::memcpy(_mailbox.data() + (offset - 0x600), in.data(), in.size());
        if (offset == 0x700 && ra::load_le<std::uint32_t>(in.data()) == 1) {
            trigger();
        }
        return {};
    }
    driver::result<std::uint64_t> dma_map(const driver::dma_memory& m, std::size_t offset, std::size_t bytes,
                                          driver::dma_access) override {
        return _maps.add(m.data() + offset, bytes);
    }
    driver::result<void> dma_unmap(std::uint64_t iova, std::size_t bytes) override {
        require(_maps.names(iova, bytes), "an unmap names a mapping");
        _maps.remove(iova);
        return {};
    }

private:
    // Slot `s` of the CMDQ, through cmdq_init's PBL (level 1: one page of PTEs).
    std::byte* slot(std::uint32_t s) {
        const std::uint64_t pbl = ra::load_le<std::uint64_t>(_mailbox.data());
        const std::uint64_t off = std::uint64_t{s} * 16;
        const std::byte* pte = _maps.host(pbl + 8 * (off / 4096), 8);
        require(pte != nullptr, "the CMDQ's PBL is mapped");
        const std::uint64_t page = ra::load_le<std::uint64_t>(pte);
        require((page & abi::PTU_PTE_VALID) != 0, "the CMDQ's PBL entries are valid (cmdq_init names pages)");
        std::byte* p = _maps.host((page & ~std::uint64_t{0xfff}) + off % 4096, 16);
        require(p != nullptr, "the CMDQ's pages are mapped");
        return p;
    }
    void trigger() {
        ++triggers;
        const std::uint32_t size = ra::load_le<std::uint16_t>(_mailbox.data() + 8) >> 2;   // cmdq_size
        const std::uint32_t prod = ra::load_le<std::uint32_t>(_mailbox.data() + 12) & 0xffff;
        for (unsigned guard = 0; _consumed % 0x10000 != prod && guard < size; ++guard) {
            std::vector<std::byte> cmd;
            const std::byte* head = slot(_consumed % size);
            const std::uint32_t n = std::max<std::uint32_t>(1, std::to_integer<std::uint32_t>(head[1]));
            for (std::uint32_t i = 0; i < n; ++i) {
                const std::byte* s = slot((_consumed + i) % size);
                cmd.insert(cmd.end(), s, s + 16);
            }
            _consumed += n;
            answer(cmd);
            if (timeouts_left == 0) {
                complete_anyway(cmd);
            }
        }
    }
    // With the budget spent: a command the driver would see no completion of gets one, honest,
    // at the driver's consumer.
    void complete_anyway(const std::vector<std::byte>& cmd) {
        std::uint64_t seen = driver_consumer;
        if (expect(std::span<const std::byte>(_creq, creq_entries * 16), seen, ra::load_le<std::uint16_t>(cmd.data() + 4))
                .decisive) {
            return;
        }
        entry16 e{};
        e[0] = std::byte{qp_event};
        e[2] = cmd[4];
        e[3] = cmd[5];
        e[8] = std::byte{((seen / creq_entries) & 1) == 0 ? std::uint8_t{1} : std::uint8_t{0}};
        e[9] = cmd[0];
        std::memcpy(_creq + seen % creq_entries * 16, e.data(), 16);
    }
    void post(entry16 e, bool right_pass) {
        const bool phase = ((_produced / creq_entries) & 1) == 0;
        e[8] = (e[8] & std::byte{0xfe}) | std::byte{(phase == right_pass) ? std::uint8_t{1} : std::uint8_t{0}};
        std::memcpy(_creq + _produced % creq_entries * 16, e.data(), 16);
        ++_produced;
    }
    entry16 completion(const std::vector<std::byte>& cmd, std::uint8_t status) {
        entry16 e{};
        e[0] = std::byte{qp_event};
        e[1] = std::byte{status};
        e[2] = cmd[4];
        e[3] = cmd[5];
        ra::store_le<std::uint32_t>(e.data() + 4, _in.u32());   // xid and the command's own fields
        e[9] = cmd[0];
        ra::store_le<std::uint16_t>(e.data() + 10, _in.u16());
        return e;
    }
    void write_side(const std::vector<std::byte>& cmd) {
        const std::size_t n = std::size_t{std::to_integer<std::uint8_t>(cmd[6])} * 16;
        std::byte* sb = n != 0 ? _maps.host(ra::load_le<std::uint64_t>(cmd.data() + 8), n) : nullptr;
        if (sb == nullptr) {
            return;
        }
        side_written.assign(n, std::byte{0});
        side_written[0] = cmd[0];
        side_written[2] = cmd[4];
        side_written[3] = cmd[5];
        side_written[6] = cmd[6];
        _in.copy_some(std::span<std::byte>(side_written).subspan(8, std::min<std::size_t>(n - 8, _in.u8())));
        std::memcpy(sb, side_written.data(), n);
    }
    // What the device does with one command: up to four entries, as the input says.
    void answer(const std::vector<std::byte>& cmd) {
        const unsigned count = 1 + _in.u8() % 4;
        for (unsigned i = 0; i < count; ++i) {
            const std::uint8_t what = _in.u8();
            entry16 e = completion(cmd, 0);
            switch (what % 11) {
            case 0: write_side(cmd); break;                               // honest
            case 1: write_side(cmd); e[1] = std::byte{_in.u8()}; break;   // any status
            case 2: ra::store_le<std::uint16_t>(e.data() + 2, _in.u16()); break;   // any cookie
            case 3: e[9] = std::byte{_in.u8()}; break;                    // any opcode
            case 4: e[0] = std::byte{_in.u8()}; break;                    // any type
            case 5: e[9] = std::byte{static_cast<std::uint8_t>(0xc0 + _in.u8() % 2)}; break;   // an error notification
            case 6:                                                       // a command never sent
                ra::store_le<std::uint16_t>(e.data() + 2,
                                            static_cast<std::uint16_t>(ra::load_le<std::uint16_t>(cmd.data() + 4) + 1 + _in.u8() % 4));
                break;
            case 7: post(e, false); continue;                             // the wrong pass's valid bit
            case 8: _in.copy_some(e); break;                                  // 16 raw bytes
            case 9: continue;                                             // nothing
            default: post(e, true); break;                                // twice
            }
            post(e, true);
        }
    }

    reader& _in;
    std::byte* _creq;
    std::array<std::byte, 0x104> _mailbox{};
    iova_map _maps;
    std::uint32_t _consumed = 0;
    std::uint64_t _produced = 0;
};

struct command {
    std::vector<std::byte> bytes;
    std::size_t side = 0;
};
command command_of(reader& in) {
    switch (in.u8() % 5) {
    case 0: return {bytes_of_layout(abi::cmdq_query_version{}), 0};
    case 1: return {bytes_of_layout(abi::cmdq_query_func{}), abi::creq_query_func_resp_sb::layout_size};
    case 2: {
        abi::cmdq_create_cq c;
        c.cq_size = in.u32();
        return {bytes_of_layout(c), 0};
    }
    case 3: {
        abi::cmdq_query_qp c;
        c.qp_cid = in.u32();
        return {bytes_of_layout(c), 112};
    }
    default: {
        abi::cmdq_destroy_qp c;
        c.qp_cid = in.u32();
        return {bytes_of_layout(c), 0};
    }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    reader in(data, size);
    std::vector<std::byte> creq(creq_entries * 16);
    creq_device dev(in, creq.data());
    rig::firmware::stranded_memory stranded;
    auto ch = fw::rcfw_channel::create(dev, stranded, {0x21, creq.data(), creq_entries, 0x10000, -1},
                                       {.cmdq_slots = 16, .timeout = fw::ms(0)});
    require(ch.has_value(), "the channel starts");
    std::vector<entry16> async_seen;
    (*ch)->on_async([&](std::span<const std::byte, 16> e) {
        entry16 copy;
        std::memcpy(copy.data(), e.data(), 16);
        async_seen.push_back(copy);
    });
    std::uint64_t seen = 0;
    bool stopped = false;
    for (std::uint16_t n = 0; !in.empty() && n < 32; ++n) {
        const command c = command_of(in);
        const std::size_t triggers = dev.triggers;
        const std::size_t async_before = async_seen.size();
        dev.side_written.clear();
        dev.driver_consumer = seen;
        auto r = (*ch)->exec(c.bytes, c.side, fw::rcfw_channel::clock::now());
        if (stopped) {
            require(!r && r.error().kind == fw::error_kind::fatal && dev.triggers == triggers,
                    "a stopped channel refuses at once, without ringing");
            continue;
        }
        require(dev.triggers == triggers + 1, "one command, one trigger");
        const expected_poll x = expect(creq, seen, n);
        require(std::equal(x.async.begin(), x.async.end(), async_seen.begin() + static_cast<long>(async_before),
                           async_seen.end()) && async_seen.size() - async_before == x.async.size(),
                "the asynchronous entries reach the handler, each once, in order");
        if (!x.decisive) {
            require(!r && r.error().kind == fw::error_kind::timeout, "no completion of this cookie: a timeout");
            require(!stranded.report().empty(), "a timeout strands the CMDQ");
            timeouts_left -= timeouts_left > 0 ? 1 : 0;
            stopped = true;
            continue;
        }
        const std::uint8_t status = std::to_integer<std::uint8_t>((*x.decisive)[1]);
        if (std::to_integer<std::uint8_t>((*x.decisive)[9]) != std::to_integer<std::uint8_t>(c.bytes[0])) {
            require(!r && r.error().kind == fw::error_kind::bad_output, "a completion of another opcode is bad output");
        } else if (status != 0) {
            require(!r && r.error().kind == fw::error_kind::status && r.error().error_code == status &&
                        r.error().channel == "rcfw" && !r.error().message.empty(),
                    "a refusal names the command and its status");
        } else {
            require(r.has_value() && r->entry == *x.decisive, "the reply is the command's own completion");
            require(r->side.size() == c.side, "the side buffer as long as asked");
            require(dev.side_written.empty() || r->side == dev.side_written, "the side buffer the device wrote");
        }
    }
    return 0;
}
