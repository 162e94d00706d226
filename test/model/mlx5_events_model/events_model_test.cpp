// The mlx5 function model's firmware thread, event queues, MSI-X, UAR pages, health buffer and
// faults (sim/mlx5/function_model.hpp, events.cpp), driven as a driver would: through
// driver::open("vfio-user:..."), the driver's command queue (firmware/mlx5) for the commands,
// the mapped BAR0 for the EQ doorbells and MSI-X eventfds for the interrupts.
#include <array>
#include <bit>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <mutex>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "abi/mlx5/ifc.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/command_queue.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/model/served_model.hpp"

namespace {

using namespace std::chrono_literals;
namespace ifc = rig::mlx5::ifc;
namespace cmdq = rig::mlx5::ifc::cmdq;
namespace abi = rig::abi;
namespace drv = rig::driver;
namespace fw = rig::firmware::mlx5;
namespace model = rig::sim::mlx5;
using ifc::cmd_status;
using ifc::opcode;
using clk = std::chrono::steady_clock;

constexpr std::uint8_t cmd_event = 0x0a;
constexpr std::uint8_t page_request_event = 0x0b;
constexpr std::uint8_t port_change_event = 0x09;

model::function_options fast_options() {
    model::function_options o;
    o.init_time = 1ms;
    o.firmware.boot_pages = 2;
    o.firmware.init_pages = 2;
    o.firmware.msix_vectors = 4;
    return o;
}

using rig::test::make;

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 2s) {
    const auto until = clk::now() + limit;
    while (!done()) {
        if (clk::now() > until) {
            return false;
        }
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

// true when the eventfd has fired within `limit` (and drains it)
bool fired(int fd, std::chrono::milliseconds limit) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(limit.count())) != 1) {
        return false;
    }
    std::uint64_t n = 0;
    return ::read(fd, &n, sizeof n) == sizeof n && n > 0;
}

// The model served in-process, brought up by the driver's command queue, with one UAR, DMA
// memory for the firmware's pages and for EQ buffers, BAR0 mapped and MSI-X wired.
struct events_fixture : rig::test::served_model {
    std::unique_ptr<fw::command_queue> q;
    drv::dma_memory mem;  // pages for the firmware, then EQ buffers
    std::uint64_t iova = 0;
    std::size_t next_free = 0;
    drv::bar_mapping bar;
    std::vector<int> irqs;
    std::uint32_t uar = 0;

    explicit events_fixture(model::function_options o = fast_options()) : served_model(o) {
        auto m = drv::dma_memory::allocate(1u << 20, drv::page_choice::small_only);
        REQUIRE(m.has_value());
        mem = std::move(*m);
        auto i = f->dma_map(mem, 0, mem.size(), drv::dma_access::read_write);
        REQUIRE(i.has_value());
        iova = *i;
        auto b = f->map_bar(drv::region::bar0, drv::caching::uncached);
        REQUIRE(b.has_value());
        bar = *b;
        auto v = f->enable_irqs(drv::irq_kind::msix, 4);
        REQUIRE(v.has_value());
        irqs = *v;
    }

    std::vector<std::byte> exec(std::span<const std::byte> in, std::size_t out_bytes) {
        auto r = q->exec(in, out_bytes, clk::now() + 2s);
        INFO((r ? std::string() : r.error().message));
        REQUIRE(r.has_value());
        return *r;
    }
    fw::result<std::vector<std::byte>> try_exec(std::span<const std::byte> in, std::size_t out_bytes,
                                                std::chrono::milliseconds limit = 300ms) {
        return q->exec(in, out_bytes, clk::now() + limit);
    }
    std::vector<std::byte> nop() { return exec(make<ifc::nop_in>(opcode::nop), ifc::nop_out::size_bytes); }

    std::uint64_t take(std::size_t bytes) {
        const std::uint64_t at = iova + next_free;
        next_free += (bytes + 4095) / 4096 * 4096;
        REQUIRE(next_free <= mem.size());
        return at;
    }
    void give_pages(std::uint32_t n) {
        using In = ifc::manage_pages_in;
        auto in = make<In>(opcode::manage_pages,
                           static_cast<std::uint16_t>(ifc::manage_pages_op_mod::allocation_success), 8 * n);
        abi::set<In::input_num_entries>(in, n);
        for (std::uint32_t i = 0; i < n; ++i) {
            abi::set(in, ifc::pas_entry<In>(i), take(4096));
        }
        exec(in, ifc::manage_pages_out::size_bytes);
    }
    std::uint32_t query_pages(ifc::query_pages_op_mod m) {
        auto out = exec(make<ifc::query_pages_in>(opcode::query_pages, static_cast<std::uint16_t>(m)),
                        ifc::query_pages_out::size_bytes);
        return static_cast<std::uint32_t>(abi::get<ifc::query_pages_out::num_pages>(out));
    }
    void bring_up() {
        auto created = fw::command_queue::create(*f);
        INFO((created ? std::string() : created.error().message));
        REQUIRE(created.has_value());
        q = std::move(*created);
        exec(make<ifc::enable_hca_in>(opcode::enable_hca), ifc::enable_hca_out::size_bytes);
        give_pages(query_pages(ifc::query_pages_op_mod::boot_pages));
        give_pages(query_pages(ifc::query_pages_op_mod::init_pages));
        exec(make<ifc::init_hca_in>(opcode::init_hca), ifc::init_hca_out::size_bytes);
        auto out = exec(make<ifc::alloc_uar_in>(opcode::alloc_uar), ifc::alloc_uar_out::size_bytes);
        uar = static_cast<std::uint32_t>(abi::get<ifc::alloc_uar_out::uar>(out));
    }

    // An EQ of 2^log_size entries, its buffer pre-set to owner 1 (as the kernel does).
    struct eq {
        std::uint32_t eqn = 0;
        std::uint8_t log_size = 0;
        std::span<std::byte> buffer;
        std::span<std::byte> entry(std::uint32_t i) const {
            return buffer.subspan((i & ((1u << log_size) - 1)) * 64, 64);
        }
    };
    eq create_eq(std::uint8_t log_size, std::initializer_list<std::uint8_t> types, std::uint16_t intr = 0) {
        using In = ifc::create_eq_in;
        const std::size_t bytes = std::size_t{64} << log_size;
        const std::uint64_t at = take(bytes);
        std::span<std::byte> buffer = mem.bytes().subspan(static_cast<std::size_t>(at - iova), bytes);
        for (std::size_t i = 0; i < bytes; i += 64) {
            std::fill(buffer.begin() + static_cast<std::ptrdiff_t>(i), buffer.begin() + static_cast<std::ptrdiff_t>(i + 64),
                      std::byte{0});
            buffer[i + 63] = std::byte{ifc::eqe_owner_init};
        }
        auto in = make<In>(opcode::create_eq, 0, 8);
        abi::set<In::eq_context_entry(ifc::eqc::log_eq_size)>(in, log_size);
        abi::set<In::eq_context_entry(ifc::eqc::uar_page)>(in, uar);
        abi::set<In::eq_context_entry(ifc::eqc::intr)>(in, intr);
        abi::set<In::eq_context_entry(ifc::eqc::log_page_size)>(in, 0);
        std::uint64_t mask = 0;
        for (const std::uint8_t t : types) {
            mask |= std::uint64_t{1} << t;
        }
        abi::set(in, ifc::event_bitmask_word(0), mask);
        abi::set(in, ifc::pas_entry<In>(0), at);
        auto out = exec(in, ifc::create_eq_out::size_bytes);
        return {static_cast<std::uint32_t>(abi::get<ifc::create_eq_out::eq_number>(out)), log_size, buffer};
    }
    // be32((eqn << 24) | ci) to UAR + 0x40 (arm) or + 0x48 (update only), kernel lib/eq.h
    // eq_update_ci: a store into the mapped page, or a REGION_WRITE when the page is trapped (not
    // mapped), as a CPU store reaches a card either way
    void eq_doorbell(const eq& e, std::uint32_t ci, bool arm) {
        const std::uint64_t at = std::uint64_t{uar} * 4096 + (arm ? 0x40 : 0x48);
        const std::uint32_t v = e.eqn << 24 | (ci & 0xffffff);
        std::array<std::byte, 4> be;
        abi::store_be<std::uint32_t>(be.data(), v);
        if (bar.covers(at, 4)) {
            std::memcpy(bar.base + at, be.data(), 4);
        } else {
            REQUIRE(f->region_write(drv::region::bar0, at, be).has_value());
        }
    }
    std::uint32_t reg(std::uint32_t off) {
        std::array<std::byte, 4> b{};
        REQUIRE(f->region_read(drv::region::bar0, off, b).has_value());
        return abi::load_be<std::uint32_t>(b.data());
    }
};

std::uint8_t owner_of(std::span<const std::byte> e) {
    return static_cast<std::uint8_t>(abi::get<ifc::eqe::owner>(e));
}
std::uint8_t type_of(std::span<const std::byte> e) {
    return static_cast<std::uint8_t>(abi::get<ifc::eqe::event_type>(e));
}
std::uint32_t cmd_vector(std::span<const std::byte> e) {
    return static_cast<std::uint32_t>(
        abi::get<ifc::eqe::event_data(ifc::event_auto::cmd_inter_comp_event(
            ifc::cmd_inter_comp_event::command_completion_vector))>(e));
}

// ---- the command doorbell is asynchronous ----------------------------------------------------

TEST_CASE("mlx5 events model: a doorbell write returns before the command completes", "[model][mlx5]") {
    auto o = fast_options();
    o.command_latency = 150ms;
    rig::test::served_model t(o);
    auto m = drv::dma_memory::allocate(4096, drv::page_choice::small_only);
    REQUIRE(m.has_value());
    auto at = t.f->dma_map(*m, 0, 4096, drv::dma_access::read_write);
    REQUIRE(at.has_value());
    REQUIRE(wait_until([&] { return !t.fn.commands_pending() && t.fn.state() == model::hca_state::disabled; }));
    std::this_thread::sleep_for(5ms);  // past init_time
    const auto put = [&](std::uint32_t off, std::uint32_t v) {
        std::array<std::byte, 4> b;
        abi::store_be<std::uint32_t>(b.data(), v);
        REQUIRE(t.f->region_write(drv::region::bar0, off, b).has_value());
    };
    put(0x10, ifc::init_seg::cmdq_addr_high(*at));
    put(0x14, ifc::init_seg::cmdq_addr_low(*at));
    // two NOPs, in slots 0 and 1, each rung on its own: both outstanding together
    for (unsigned slot = 0; slot < 2; ++slot) {
        auto e = m->bytes().subspan(slot * 64, 64);
        std::fill(e.begin(), e.end(), std::byte{0});
        using E = ifc::cmd_queue_entry;
        abi::set<E::type>(e, cmdq::pcie_cmd_if_transport);
        abi::set<E::input_length>(e, 16);
        abi::set<E::output_length>(e, 16);
        abi::set<E::token>(e, slot + 1);
        std::array<std::byte, 16> in{};
        abi::set<ifc::mbox_in::opcode>(in, static_cast<std::uint16_t>(opcode::nop));
        abi::set_bytes(e, E::command_input_inline_data, in);
        abi::set<E::ownership>(e, cmdq::owner_hw);
    }
    const auto rung = clk::now();
    put(0x18, 1u << 0);
    put(0x18, 1u << 1);
    const auto owned = [&](unsigned slot) { return (std::to_integer<unsigned>(m->bytes()[slot * 64 + 63]) & 1) != 0; };
    CHECK(owned(0));
    CHECK(owned(1));
    CHECK(t.fn.commands_pending() == 0x3);
    REQUIRE(wait_until([&] { return !owned(0) && !owned(1); }));
    CHECK(clk::now() - rung >= 140ms);
    CHECK(t.fn.commands_pending() == 0);
    CHECK(t.fn.commands_completed() == 2);
    for (unsigned slot = 0; slot < 2; ++slot) {
        CHECK(t.fn.last_completion(slot).ran);
        CHECK(cmdq::entry_signature_ok(m->bytes().subspan(slot * 64).first<64>()));
    }
}

// ---- PCI face: MSI-X capability and the BAR0 layout --------------------------------------------

TEST_CASE("mlx5 events model: MSI-X capability, UAR pages shared but the first, table and init segment trapped",
          "[model][mlx5]") {
    auto o = fast_options();
    rig::test::served_model t(o);
    const model::bar0_layout l = model::layout_of(o);
    CHECK((t.f->config_read16(0x06).value() & 0x10) != 0);  // capabilities list
    CHECK(t.f->config_read16(0x34).value() == model::msix_cap_offset);
    CHECK((t.f->config_read16(0x40).value() & 0xff) == 0x11);
    CHECK((t.f->config_read16(0x42).value() & 0x7ff) == 3u);  // table size - 1
    CHECK(t.f->config_read32(0x44).value() == l.msix_table);  // BIR 0
    CHECK(t.f->config_read32(0x48).value() == l.msix_pba);
    CHECK(l.msix_table == o.bar0_size - 0x2000);
    CHECK(l.uar_begin == 0x5000);  // after the init segment's five pages (initial_seg is 0x400c bytes)
    CHECK(l.uar_end <= l.msix_table);
    // enable and mask bits are writable, the table size is not
    REQUIRE(t.f->config_write16(0x42, 0xffff).has_value());
    CHECK(t.f->config_read16(0x42).value() == 0xc003);
    CHECK(t.f->get_irq_info(drv::irq_kind::msix).value().count == 4u);

    auto info = t.f->get_region_info(drv::region::bar0);
    REQUIRE(info.has_value());
    REQUIRE(info->mappable.size() == 1);
    CHECK(l.trapped_end == l.uar_begin + 4096);  // the first UAR page is trapped (events.cpp)
    CHECK(info->mappable[0].offset == l.trapped_end);
    CHECK(info->mappable[0].size == l.uar_end - l.trapped_end);
    // the MSI-X table is trapped memory: an entry written reads back; the PBA ignores writes
    std::array<std::byte, 4> w{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}}, r{};
    REQUIRE(t.f->region_write(drv::region::bar0, l.msix_table + 16, w).has_value());
    REQUIRE(t.f->region_read(drv::region::bar0, l.msix_table + 16, r).has_value());
    CHECK(r == w);
    REQUIRE(t.f->region_write(drv::region::bar0, l.msix_pba, w).has_value());
    REQUIRE(t.f->region_read(drv::region::bar0, l.msix_pba, r).has_value());
    CHECK(r == std::array<std::byte, 4>{});

    // the internal timer (0x1000 high, 0x1004 low) runs
    std::array<std::byte, 8> t1{}, t2{};
    REQUIRE(t.f->region_read(drv::region::bar0, 0x1000, t1).has_value());
    std::this_thread::sleep_for(2ms);
    REQUIRE(t.f->region_read(drv::region::bar0, 0x1000, t2).has_value());
    const auto ticks = [](const std::array<std::byte, 8>& b) {
        return std::uint64_t{abi::load_be<std::uint32_t>(b.data())} << 32 | abi::load_be<std::uint32_t>(b.data() + 4);
    };
    CHECK(ticks(t2) >= ticks(t1) + 2'000'000);  // nanoseconds: 1 GHz
}

// ---- command completion events ------------------------------------------------------------------

TEST_CASE("mlx5 events model: CMD EQEs name the slot; MSI-X fires only when the EQ is armed", "[model][mlx5]") {
    events_fixture t;
    t.bring_up();
    auto e = t.create_eq(3, {cmd_event}, 2);
    // CREATE_EQ was issued before its EQ existed: no EQE for it (cmdq.cpp, kernel eq.c
    // create_async_eqs runs it in polling mode)
    t.nop();
    REQUIRE(wait_until([&] { return owner_of(e.entry(0)) == 0; }));
    CHECK(type_of(e.entry(0)) == cmd_event);
    const std::uint32_t v0 = cmd_vector(e.entry(0));
    CHECK(std::popcount(v0) == 1);
    CHECK(v0 < (1u << 31));  // not the page slot
    CHECK(owner_of(e.entry(1)) == 1);  // nothing more yet
    CHECK_FALSE(fired(t.irqs[2], 50ms));  // created unarmed: the EQE is written, no interrupt

    t.nop();
    REQUIRE(wait_until([&] { return owner_of(e.entry(1)) == 0; }));
    CHECK(type_of(e.entry(1)) == cmd_event);
    CHECK(std::popcount(cmd_vector(e.entry(1))) == 1);
    CHECK_FALSE(fired(t.irqs[2], 50ms));
    CHECK(t.fn.interrupts_raised() == 0);

    // consumed both, armed: the next EQE raises vector 2 (and only vector 2), once
    t.eq_doorbell(e, 2, true);
    std::this_thread::sleep_for(20ms);  // the firmware polls the doorbell
    t.nop();
    REQUIRE(wait_until([&] { return owner_of(e.entry(2)) == 0; }));
    CHECK(fired(t.irqs[2], 1000ms));
    CHECK_FALSE(fired(t.irqs[0], 0ms));
    CHECK(t.fn.interrupts_raised() == 1);
    // disarmed again until the driver re-arms
    t.nop();
    REQUIRE(wait_until([&] { return owner_of(e.entry(3)) == 0; }));
    CHECK_FALSE(fired(t.irqs[2], 50ms));
    // arming with unconsumed EQEs fires at once
    t.eq_doorbell(e, 3, true);
    CHECK(fired(t.irqs[2], 1000ms));
    CHECK(t.fn.interrupts_raised() == 2);
}

// The kernel makes its command EQ by a CREATE_EQ in polling mode and switches to events after
// (eq.c create_async_eqs). Nothing in the entry says which mode the driver is in; a CMD EQE for
// that CREATE_EQ would reach the kernel as "Command completion arrived after timeout".
TEST_CASE("mlx5 events model: no CMD EQE for a command issued before a command EQ existed",
          "[model][mlx5]") {
    events_fixture t;
    t.bring_up();
    auto e = t.create_eq(2, {cmd_event}, 1);
    t.eq_doorbell(e, 0, true);  // armed at CI 0, as the kernel's create_map_eq does
    CHECK_FALSE(fired(t.irqs[1], 100ms));
    CHECK(owner_of(e.entry(0)) == 1);
    CHECK(t.fn.events_posted() == 0);
    // issued with the EQ in place: the completion comes as an event and raises the vector
    t.nop();
    REQUIRE(wait_until([&] { return owner_of(e.entry(0)) == 0; }));
    CHECK(type_of(e.entry(0)) == cmd_event);
    CHECK(fired(t.irqs[1], 1000ms));
    CHECK(t.fn.events_posted() == 1);
    // a command EQ destroyed by its own DESTROY_EQ takes no EQE for it either (it is gone)
    using In = ifc::destroy_eq_in;
    auto in = make<In>(opcode::destroy_eq);
    abi::set<In::eq_number>(in, e.eqn);
    t.exec(in, ifc::destroy_eq_out::size_bytes);
    CHECK(t.fn.events_posted() == 1);
}

// ---- EQ doorbells on a trapped UAR page --------------------------------------------------------

// The kernel arms every EQ through the one doorbell word of its first UAR (eq.c: eq->doorbell =
// priv->bfreg.up->map + 0x40), from the handlers of different EQs. Polled shared memory would
// keep only the second arm; the first UAR page is trapped and takes each write in order.
TEST_CASE("mlx5 events model: two EQs armed through one doorbell word in quick succession both signal",
          "[model][mlx5]") {
    events_fixture t;
    t.bring_up();
    const model::bar0_layout l = model::layout_of(fast_options());
    CHECK(std::uint64_t{t.uar} * 4096 == l.uar_begin);  // the lowest free UAR: the trapped one
    CHECK_FALSE(t.bar.covers(std::uint64_t{t.uar} * 4096, 4));
    auto pages = t.create_eq(2, {page_request_event}, 1);
    auto ports = t.create_eq(2, {port_change_event}, 2);
    t.eq_doorbell(pages, 0, true);
    t.eq_doorbell(ports, 0, true);  // same word, right after
    REQUIRE(t.fn.request_pages(1));
    REQUIRE(t.fn.set_port_state(false));
    CHECK(fired(t.irqs[1], 1000ms));
    CHECK(fired(t.irqs[2], 1000ms));
    CHECK(t.fn.interrupts_raised() == 2);
    // and updates without arming, interleaved, leave each EQ where its own write put it
    t.eq_doorbell(pages, 1, false);
    t.eq_doorbell(ports, 1, true);
    REQUIRE(t.fn.set_port_state(true));
    CHECK(fired(t.irqs[2], 1000ms));
    REQUIRE(t.fn.request_pages(2));
    CHECK_FALSE(fired(t.irqs[1], 50ms));  // pages' EQ was only updated, not armed
    CHECK(t.fn.interrupts_raised() == 3);
}

TEST_CASE("mlx5 events model: a trapped UAR page stores its other registers as a mapped write would",
          "[model][mlx5]") {
    events_fixture t;
    t.bring_up();
    const std::uint64_t page = std::uint64_t{t.uar} * 4096;
    std::array<std::byte, 8> db{};
    abi::store_be<std::uint64_t>(db.data(), 0x1122334455667788ull);
    REQUIRE(t.f->region_write(drv::region::bar0, page + 0x20, db).has_value());     // CQ doorbell
    REQUIRE(t.f->region_write(drv::region::bar0, page + 0x800, db).has_value());    // BlueFlame
    std::array<std::byte, 8> back{};
    REQUIRE(t.f->region_read(drv::region::bar0, page + 0x20, back).has_value());
    CHECK(back == db);
    REQUIRE(t.f->region_read(drv::region::bar0, page + 0x800, back).has_value());
    CHECK(back == db);
    // the EQ doorbell words are taken by the firmware, not stored
    REQUIRE(t.f->region_read(drv::region::bar0, page + 0x40, std::span(back).first(4)).has_value());
    CHECK(abi::load_be<std::uint32_t>(back.data()) == 0xffffffffu);
}

// ---- the ledger: what a driver left behind (rig-nicsim --report-ledger) ---------------------

TEST_CASE("mlx5 events model: the ledger counts pages and objects left at DISABLE_HCA and at reset",
          "[model][mlx5]") {
    // on_ledger runs on the model's firmware thread; this thread reads what it kept
    struct {
        std::mutex lock;
        std::vector<model::ledger_entry> entries;
        std::vector<model::ledger_entry> copy() {
            std::lock_guard g(lock);
            return entries;
        }
    } kept;
    auto o = fast_options();
    o.function_index = 3;
    o.on_ledger = [&kept](const model::ledger_entry& e) {
        std::lock_guard g(kept.lock);
        kept.entries.push_back(e);
    };
    events_fixture t(o);
    t.bring_up();                      // 2 + 2 pages, a UAR
    t.create_eq(2, {port_change_event});  // and an EQ
    // a driver that skips TEARDOWN_HCA and MANAGE_PAGES(TAKE) before DISABLE_HCA
    t.exec(make<ifc::disable_hca_in>(opcode::disable_hca), ifc::disable_hca_out::size_bytes);
    REQUIRE(kept.copy().size() == 1);
    CHECK(model::to_string(kept.copy()[0]) == "LEDGER function=3 event=disable_hca pages=4 objects=2");
    REQUIRE(t.f->reset().has_value());
    REQUIRE(kept.copy().size() == 2);
    CHECK(model::to_string(kept.copy()[1]) == "LEDGER function=3 event=reset pages=0 objects=0");
    // a DISABLE_HCA refused (already disabled) is no event
    CHECK_FALSE(t.try_exec(make<ifc::disable_hca_in>(opcode::disable_hca), ifc::disable_hca_out::size_bytes).has_value());
    CHECK(kept.copy().size() == 2);
}

TEST_CASE("mlx5 events model: the owner bit toggles on every pass of the EQ", "[model][mlx5]") {
    events_fixture t;
    t.bring_up();
    auto e = t.create_eq(1, {cmd_event});  // two entries
    std::uint32_t ci = 0;
    for (std::uint32_t pi = 0; pi < 7; ++pi) {
        t.nop();
        const std::uint8_t expect_owner = (pi >> 1) & 1;
        REQUIRE(wait_until([&] { return owner_of(e.entry(pi)) == expect_owner; }));
        CHECK(type_of(e.entry(pi)) == cmd_event);
        ci = pi + 1;
        t.eq_doorbell(e, ci, false);  // consumed: room for the next one
    }
    CHECK_FALSE(t.fn.failed());
    CHECK(t.fn.events_posted() == 7);
}

TEST_CASE("mlx5 events model: an EQ overrun is a fatal health syndrome 0xc", "[model][mlx5]") {
    events_fixture t;
    t.bring_up();
    auto e = t.create_eq(1, {cmd_event});  // no EQE: CREATE_EQ ran before the EQ existed
    t.nop();                               // EQE 0
    t.nop();                               // EQE 1: the EQ is full
    CHECK_FALSE(t.fn.failed());
    t.nop();  // its completion does not fit
    REQUIRE(wait_until([&] { return t.fn.failed(); }));
    CHECK(t.reg(0x238) >> 31 == 1u);                 // rfr
    CHECK((t.reg(0x23c) >> 16 & 0xff) == 0x0cu);     // synd
    CHECK(t.reg(0x230) != 0xffffffffu);              // fw_ver: the function is alive
    const std::uint32_t c1 = t.reg(0x1010) & 0xffffff;
    CHECK((t.reg(0x1010) & 0xffffff) == c1);         // the heartbeat stopped
    // no command completes any more
    auto r = t.try_exec(make<ifc::nop_in>(opcode::nop), ifc::nop_out::size_bytes, 200ms);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == fw::error_kind::timeout);
    (void)e;
}

// ---- page requests and port changes -----------------------------------------------------------

TEST_CASE("mlx5 events model: page-request and port-change EQEs", "[model][mlx5]") {
    events_fixture t;
    t.bring_up();
    auto e = t.create_eq(2, {page_request_event, port_change_event});
    CHECK_FALSE(t.fn.post_event(cmd_event, 0, {}));  // nobody subscribes to CMD
    REQUIRE(t.fn.request_pages(5));
    REQUIRE(t.fn.request_pages(-3));
    REQUIRE(t.fn.set_port_state(false));
    CHECK_FALSE(t.fn.port_up());
    const auto pr = [](std::span<const std::byte> x) {
        return std::pair{abi::get<ifc::eqe_page_request(ifc::pages_req_event::function_id)>(x),
                         static_cast<std::uint32_t>(abi::get<ifc::eqe_page_request(ifc::pages_req_event::num_pages)>(x))};
    };
    CHECK(type_of(e.entry(0)) == page_request_event);
    CHECK(owner_of(e.entry(0)) == 0);
    CHECK(pr(e.entry(0)) == std::pair<std::uint64_t, std::uint32_t>{0, 5});
    CHECK(abi::load_be<std::uint32_t>(e.entry(0).data() + 0x24) == 5u);  // mlx5_eqe: num_pages be32 @0x24
    CHECK(pr(e.entry(1)) == std::pair<std::uint64_t, std::uint32_t>{0, 0xfffffffdu});
    CHECK(type_of(e.entry(2)) == port_change_event);
    CHECK(abi::get<ifc::eqe::event_sub_type>(e.entry(2)) == 1u);  // DOWN
    CHECK(std::to_integer<unsigned>(e.entry(2)[0x28]) >> 4 == 1u);  // port 1
    REQUIRE(t.fn.set_port_state(true));
    CHECK(abi::get<ifc::eqe::event_sub_type>(e.entry(3)) == 4u);  // ACTIVE
}

TEST_CASE("mlx5 events model: data-path events: COMP on the CQ's EQ, CQ and QP errors on the async EQ",
          "[model][mlx5]") {
    events_fixture t;
    t.bring_up();
    auto async = t.create_eq(2, {0x04, 0x05});  // CQ_ERROR, WQ_CATAS_ERROR
    auto comp = t.create_eq(2, {});             // completion EQs subscribe to no type (kernel eq.c)
    using In = ifc::create_cq_in;
    auto in = make<In>(opcode::create_cq, 0, 8);
    abi::set<In::cq_context(ifc::cqc::log_cq_size)>(in, 2);
    abi::set<In::cq_context(ifc::cqc::uar_page)>(in, t.uar);
    abi::set<In::cq_context(ifc::cqc::c_eqn_or_apu_element)>(in, comp.eqn);
    abi::set<In::cq_context(ifc::cqc::dbr_addr)>(in, t.take(4096));
    abi::set(in, ifc::pas_entry<In>(0), t.take(4096));
    auto out = t.exec(in, ifc::create_cq_out::size_bytes);
    const auto cqn = static_cast<std::uint32_t>(abi::get<ifc::create_cq_out::cqn>(out));

    CHECK_FALSE(t.fn.post_completion(cqn + 1000));  // no such CQ
    REQUIRE(t.fn.post_completion(cqn));
    CHECK(type_of(comp.entry(0)) == 0x00);
    CHECK(owner_of(comp.entry(0)) == 0);
    CHECK((abi::load_be<std::uint32_t>(comp.entry(0).data() + 0x38) & 0xffffff) == cqn);  // mlx5_eqe
    CHECK(owner_of(async.entry(0)) == 1);

    REQUIRE(t.fn.post_cq_error(cqn, 0x01));
    CHECK(type_of(async.entry(0)) == 0x04);
    CHECK((abi::load_be<std::uint32_t>(async.entry(0).data() + 0x20) & 0xffffff) == cqn);
    CHECK(std::to_integer<unsigned>(async.entry(0)[0x2b]) == 0x01u);
    REQUIRE(t.fn.post_qp_event(0x1234, 0x05));
    CHECK(type_of(async.entry(1)) == 0x05);
    CHECK((abi::load_be<std::uint32_t>(async.entry(1).data() + 0x38) & 0xffffff) == 0x1234u);
    CHECK(std::to_integer<unsigned>(async.entry(1)[0x34]) == 0u);  // a QP
}

TEST_CASE("mlx5 events model: the firmware asks for pages by itself after N commands", "[model][mlx5]") {
    auto o = fast_options();
    o.page_request_after = 12;
    o.page_request_pages = 7;
    events_fixture t(o);
    t.bring_up();
    auto e = t.create_eq(3, {page_request_event});
    std::uint32_t n = 0;
    while (owner_of(e.entry(0)) != 0 && n++ < 20) {
        t.nop();
    }
    REQUIRE(owner_of(e.entry(0)) == 0);
    CHECK(t.fn.commands_completed() >= 12);
    CHECK(abi::load_be<std::uint32_t>(e.entry(0).data() + 0x24) == 7u);
    t.nop();
    CHECK(owner_of(e.entry(1)) == 1);  // once per reset
}

// ---- faults -----------------------------------------------------------------------------------

TEST_CASE("mlx5 events model: faults and their observable effects", "[model][mlx5]") {
    events_fixture t;
    t.bring_up();
    const auto nop_in = make<ifc::nop_in>(opcode::nop);

    SECTION("fatal: health buffer, heartbeat stops, commands never complete; reset heals") {
        t.fn.fatal(0x08, 0x1234);
        CHECK(t.reg(0x238) >> 31 == 1u);             // rfr
        CHECK((t.reg(0x23c) >> 16 & 0xff) == 0x08u);  // synd
        CHECK((t.reg(0x23c) & 0xffff) == 0x1234u);    // ext_synd
        CHECK(t.reg(0x230) != 0xffffffffu);
        const std::uint32_t c1 = t.reg(0x1010) & 0xffffff;
        CHECK((t.reg(0x1010) & 0xffffff) == c1);
        auto r = t.try_exec(nop_in, ifc::nop_out::size_bytes, 200ms);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().kind == fw::error_kind::timeout);
        REQUIRE(t.f->reset().has_value());
        CHECK((t.reg(0x23c) >> 16 & 0xff) == 0u);
        CHECK(t.reg(0x238) >> 31 == 0u);
        CHECK((t.reg(0x1010) & 0xffffff) != (t.reg(0x1010) & 0xffffff));
        CHECK_FALSE(t.fn.failed());
        CHECK(t.fn.state() == model::hca_state::disabled);
    }
    SECTION("silence: the entry stays with the device; resume completes it") {
        t.fn.silence();
        auto r = t.try_exec(nop_in, ifc::nop_out::size_bytes, 200ms);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().kind == fw::error_kind::timeout);
        CHECK(t.fn.commands_pending() != 0);
        CHECK(t.q->stranded().size() == 1);  // the driver left the slot with the device
        const std::uint64_t done = t.fn.commands_completed();
        t.fn.resume();
        REQUIRE(t.fn.wait_idle(1s));
        CHECK(t.fn.commands_completed() == done + 1);
        CHECK(t.fn.commands_pending() == 0);
    }
    SECTION("fail_next: the next command of that opcode fails as asked, then they work") {
        t.fn.fail_next(static_cast<std::uint16_t>(opcode::nop), cmd_status::bad_res_state_err, 0x1234567);
        auto r = t.try_exec(nop_in, ifc::nop_out::size_bytes);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().kind == fw::error_kind::status);
        CHECK(r.error().status == cmd_status::bad_res_state_err);
        CHECK(r.error().syndrome == 0x1234567u);
        CHECK(t.try_exec(nop_in, ifc::nop_out::size_bytes).has_value());
    }
    SECTION("die: config and BAR0 read all ones, nothing completes; reset brings it back") {
        t.fn.die();
        CHECK(t.f->config_read16(0).value() == 0xffff);
        CHECK(t.reg(0x230) == 0xffffffffu);  // health.fw_ver: the function is gone (health.c)
        CHECK(t.reg(0x0) == 0xffffffffu);
        CHECK(t.reg(t.uar * 4096) == 0xffffffffu);  // the (trapped) UAR page too
        auto r = t.try_exec(nop_in, ifc::nop_out::size_bytes, 200ms);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().kind == fw::error_kind::timeout);
        REQUIRE(t.f->reset().has_value());
        CHECK(t.f->config_read16(0).value() == model::mellanox_vendor_id);
        CHECK(t.reg(0x230) != 0xffffffffu);
        CHECK_FALSE(t.fn.failed());
    }
}

TEST_CASE("mlx5 events model: a planned fault strikes after N commands, and again after reset",
          "[model][mlx5]") {
    auto o = fast_options();
    o.fault.what = model::fault_plan::kind::fail_command;
    o.fault.after_commands = 3;
    o.fault.opcode = static_cast<std::uint16_t>(opcode::nop);
    o.fault.status = cmd_status::bad_param_err;
    o.fault.syndrome = 0xabc;
    events_fixture t(o);
    t.bring_up();  // more than 3 commands: the fault is armed
    auto r = t.try_exec(make<ifc::nop_in>(opcode::nop), ifc::nop_out::size_bytes);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().status == cmd_status::bad_param_err);
    CHECK(r.error().syndrome == 0xabcu);
    CHECK(t.try_exec(make<ifc::nop_in>(opcode::nop), ifc::nop_out::size_bytes).has_value());
}

// ---- a client killed mid-command ----------------------------------------------------------------

TEST_CASE("mlx5 events model: a client killed mid-command leaves a function in reset state", "[model][mlx5]") {
    auto o = fast_options();
    o.command_latency = 20ms;
    rig::test::served_model t(o);
    const std::string where = "vfio-user:" + t.sock.path();
    t.f.reset();  // the server takes one client at a time: the child is the next
    REQUIRE(wait_until([&] { return !t.srv->client_connected(); }));
    const std::uint64_t served = t.srv->clients_served();

    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // the child: bring commands up with the driver's command queue, then die mid-command
        auto f = drv::open(where);
        if (!f) {
            ::_exit(10);
        }
        auto q = fw::command_queue::create(**f);
        if (!q) {
            ::_exit(11);
        }
        if (!(*q)->exec(make<ifc::enable_hca_in>(opcode::enable_hca), ifc::enable_hca_out::size_bytes,
                        clk::now() + 2s)) {
            ::_exit(12);
        }
        std::thread([&] {
            (void)(*q)->exec(make<ifc::query_issi_in>(opcode::query_issi), ifc::query_issi_out::size_bytes,
                             clk::now() + 10s);
        }).detach();
        std::this_thread::sleep_for(5ms);  // the command is with the device now
        ::kill(::getpid(), SIGKILL);
        ::_exit(13);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    REQUIRE(wait_until([&] { return t.srv->clients_served() == served + 1; }));
    CHECK(t.fn.state() == model::hca_state::disabled);
    CHECK(t.fn.commands_pending() == 0);
    CHECK(t.fn.pages_owned() == 0);
    CHECK(t.srv->dma().window_count() == 0);

    // the next client brings it up from the start
    auto f = drv::open(where);
    REQUIRE(f.has_value());
    auto q = fw::command_queue::create(**f);
    INFO((q ? std::string() : q.error().message));
    REQUIRE(q.has_value());
    auto r = (*q)->exec(make<ifc::enable_hca_in>(opcode::enable_hca), ifc::enable_hca_out::size_bytes, clk::now() + 2s);
    INFO((r ? std::string() : r.error().message));
    CHECK(r.has_value());
    CHECK(t.fn.state() == model::hca_state::enabled);
}

}  // namespace
