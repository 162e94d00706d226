// The firmware model's resource objects, command by command (sim/mlx5/objects.cpp, qp.cpp):
// raw command bytes into sim::mlx5::firmware, over a DMA space backed by real memory, and the
// model's own tables read back.
#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "test/model/served_model.hpp"

#include "abi/bits.hpp"
#include "abi/mlx5/ifc.hpp"
#include "driver/dma_memory.hpp"
#include "sim/mlx5/firmware.hpp"
#include "sim/vfio_user/dma_space.hpp"

namespace {

namespace ifc = rig::mlx5::ifc;
namespace abi = rig::abi;
namespace model = rig::sim::mlx5;
using ifc::cmd_status;
using ifc::opcode;

constexpr std::uint64_t base = 0x100000;       // IOVA of the mapped memory
constexpr std::uint64_t queues = base + (1u << 20);  // queue buffers from here (firmware pages below)
constexpr std::size_t mapped_bytes = 4u << 20;

using rig::test::make;

std::span<std::byte> bytes(std::vector<std::byte>& v, abi::field f) {
    return abi::bytes_of(std::span<std::byte>(v), f);
}

cmd_status status_of(const std::vector<std::byte>& out) {
    return static_cast<cmd_status>(abi::get<ifc::mbox_out::status>(out));
}

// A firmware brought up (ENABLE_HCA, pages, INIT_HCA) with GID 0 set, and memory at `base`.
struct fixture {
    model::firmware fw;
    rig::sim::vfio_user::dma_space dma;
    rig::driver::dma_memory mem;

    explicit fixture(model::firmware_options o = {}, bool bring_up = true) : fw(o) {
        auto m = rig::driver::dma_memory::allocate(mapped_bytes, rig::driver::page_choice::small_only);
        REQUIRE(m.has_value());
        mem = std::move(*m);
        REQUIRE(dma.map(base, mem.size(), true, true, mem.fd(), 0) == 0);
        if (!bring_up) {
            return;
        }
        ok(run(make<ifc::enable_hca_in>(opcode::enable_hca), ifc::enable_hca_out::size_bytes));
        const std::size_t n = std::size_t{o.boot_pages} + o.init_pages;
        using MP = ifc::manage_pages_in;
        auto give = make<MP>(opcode::manage_pages, 0, 8 * n);
        abi::set<MP::op_mod>(give, static_cast<std::uint16_t>(ifc::manage_pages_op_mod::allocation_success));
        abi::set<MP::input_num_entries>(give, n);
        for (std::size_t i = 0; i < n; ++i) {
            abi::set(give, ifc::pas_entry<MP>(i), base + 4096 * i);
        }
        ok(run(give, ifc::manage_pages_out::size_bytes));
        ok(run(make<ifc::init_hca_in>(opcode::init_hca), ifc::init_hca_out::size_bytes));
        REQUIRE(fw.state() == model::hca_state::initialized);
        using SR = ifc::set_roce_address_in;
        using addr = ifc::roce_addr_layout;
        auto gid = make<SR>(opcode::set_roce_address);
        abi::set<SR::roce_address(addr::roce_version)>(gid, ifc::roce_addr::version_2);
        abi::set<SR::roce_address(addr::roce_l3_type)>(gid, ifc::roce_addr::l3_type_ipv6);
        abi::set<SR::roce_address(addr::source_mac_47_32)>(gid, 0x0200);
        abi::set<SR::roce_address(addr::source_mac_31_0)>(gid, 0x00000001);
        bytes(gid, SR::roce_address(addr::source_l3_address))[0] = std::byte{0xfe};
        bytes(gid, SR::roce_address(addr::source_l3_address))[1] = std::byte{0x80};
        ok(run(gid, ifc::set_roce_address_out::size_bytes));
    }

    std::vector<std::byte> run(const std::vector<std::byte>& in, std::size_t outlen) {
        return fw.execute(in, in.size(), outlen, &dma);
    }
    static void ok(const std::vector<std::byte>& out) {
        INFO("status " << ifc::to_string(status_of(out)) << ", syndrome " << abi::hex(abi::get<ifc::mbox_out::syndrome>(out)));
        REQUIRE(status_of(out) == cmd_status::ok);
    }
    std::byte* host(std::uint64_t iova) { return mem.data() + (iova - base); }

    // ---- commands ----
    std::uint32_t alloc_uar() {
        auto out = run(make<ifc::alloc_uar_in>(opcode::alloc_uar), ifc::alloc_uar_out::size_bytes);
        ok(out);
        return static_cast<std::uint32_t>(abi::get<ifc::alloc_uar_out::uar>(out));
    }
    std::uint32_t alloc_pd() {
        auto out = run(make<ifc::alloc_pd_in>(opcode::alloc_pd), ifc::alloc_pd_out::size_bytes);
        ok(out);
        return static_cast<std::uint32_t>(abi::get<ifc::alloc_pd_out::pd>(out));
    }
    template <class In, class Out>
    std::vector<std::byte> destroy(opcode op, abi::field number, std::uint32_t n) {
        auto in = make<In>(op);
        abi::set(in, number, n);
        return run(in, Out::size_bytes);
    }
    // CREATE_EQ: 2^log EQEs at `at`, 4 KiB pages
    std::vector<std::byte> eq_in(std::uint32_t uar, std::uint8_t log, std::uint16_t vector, std::uint64_t at,
                                 std::uint64_t event_mask = 0) {
        using In = ifc::create_eq_in;
        const std::size_t pages = ((std::size_t{64} << log) + 4095) / 4096;
        auto in = make<In>(opcode::create_eq, 0, 8 * pages);
        abi::set<In::eq_context_entry(ifc::eqc::log_eq_size)>(in, log);
        abi::set<In::eq_context_entry(ifc::eqc::uar_page)>(in, uar);
        abi::set<In::eq_context_entry(ifc::eqc::intr)>(in, vector);
        abi::set(in, ifc::event_bitmask_word(0), event_mask);
        for (std::size_t i = 0; i < pages; ++i) {
            abi::set(in, ifc::pas_entry<In>(i), at + 4096 * i);
        }
        return in;
    }
    std::vector<std::byte> cq_in(std::uint32_t uar, std::uint32_t eqn, std::uint8_t log, std::uint64_t at,
                                 std::uint64_t dbr) {
        using In = ifc::create_cq_in;
        const std::size_t pages = ((std::size_t{64} << log) + 4095) / 4096;
        auto in = make<In>(opcode::create_cq, 0, 8 * pages);
        abi::set<In::cq_context(ifc::cqc::log_cq_size)>(in, log);
        abi::set<In::cq_context(ifc::cqc::uar_page)>(in, uar);
        abi::set<In::cq_context(ifc::cqc::c_eqn_or_apu_element)>(in, eqn);
        abi::set<In::cq_context(ifc::cqc::dbr_addr)>(in, dbr);
        for (std::size_t i = 0; i < pages; ++i) {
            abi::set(in, ifc::pas_entry<In>(i), at + 4096 * i);
        }
        return in;
    }
    std::uint32_t create(const std::vector<std::byte>& in, abi::field number, std::size_t outlen) {
        auto out = run(in, outlen);
        ok(out);
        return static_cast<std::uint32_t>(abi::get(out, number));
    }
    // CREATE_QP: 64 SQ WQEBBs, 64 RQ WQEs of 16 bytes (1 KiB + 4 KiB = 2 pages) at `at`
    std::vector<std::byte> qp_in(std::uint32_t pd, std::uint32_t cq, std::uint32_t uar, std::uint64_t at,
                                 std::uint64_t dbr) {
        using In = ifc::create_qp_in;
        auto in = make<In>(opcode::create_qp, 0, 16);
        constexpr auto qpc = In::qpc;
        abi::set<qpc(ifc::qpc::st)>(in, static_cast<std::uint8_t>(ifc::qpc_st::rc));
        abi::set<qpc(ifc::qpc::pm_state)>(in, static_cast<std::uint8_t>(ifc::qpc_pm_state::migrated));
        abi::set<qpc(ifc::qpc::pd)>(in, pd);
        abi::set<qpc(ifc::qpc::cqn_snd)>(in, cq);
        abi::set<qpc(ifc::qpc::cqn_rcv)>(in, cq);
        abi::set<qpc(ifc::qpc::uar_page)>(in, uar);
        abi::set<qpc(ifc::qpc::log_sq_size)>(in, 6);
        abi::set<qpc(ifc::qpc::log_rq_size)>(in, 6);
        abi::set<qpc(ifc::qpc::log_rq_stride)>(in, 0);
        abi::set<qpc(ifc::qpc::dbr_addr)>(in, dbr);
        abi::set(in, ifc::pas_entry<In>(0), at);
        abi::set(in, ifc::pas_entry<In>(1), at + 4096);
        return in;
    }
};

// A modify command's qpc fields and primary path fields.
constexpr abi::field ctx(abi::field f) { return ifc::rst2init_qp_in::qpc(f); }
constexpr abi::field path(abi::field f) { return ifc::rst2init_qp_in::qpc(ifc::qpc::primary_address_path(f)); }

std::vector<std::byte> modify(opcode op, std::uint32_t qpn) {
    auto in = make<ifc::rst2init_qp_in>(op);
    abi::set<ifc::rst2init_qp_in::qpn>(in, qpn);
    return in;
}
std::vector<std::byte> rst2init(std::uint32_t qpn) {
    auto in = modify(opcode::rst2init_qp, qpn);
    abi::set(in, ctx(ifc::qpc::rre), 1);
    abi::set(in, ctx(ifc::qpc::rwe), 1);
    abi::set(in, path(ifc::ads::vhca_port_num), 1);
    return in;
}
std::vector<std::byte> init2rtr(std::uint32_t qpn) {
    auto in = modify(opcode::init2rtr_qp, qpn);
    abi::set(in, ctx(ifc::qpc::mtu), static_cast<std::uint8_t>(ifc::qpc_mtu::bytes_1k));
    abi::set(in, ctx(ifc::qpc::log_msg_max), 31);
    abi::set(in, ctx(ifc::qpc::remote_qpn), 0x1234);
    abi::set(in, ctx(ifc::qpc::next_rcv_psn), 0xabcdef);
    abi::set(in, ctx(ifc::qpc::min_rnr_nak), 12);
    abi::set(in, ctx(ifc::qpc::log_rra_max), 4);
    bytes(in, path(ifc::ads::rgid_rip))[0] = std::byte{0xfe};
    bytes(in, path(ifc::ads::rgid_rip))[15] = std::byte{0x02};
    abi::set(in, path(ifc::ads::rmac_47_32), 0x0200);
    abi::set(in, path(ifc::ads::rmac_31_0), 0x00000002);
    abi::set(in, path(ifc::ads::src_addr_index), 0);
    abi::set(in, path(ifc::ads::udp_sport), 0xdcba);
    abi::set(in, path(ifc::ads::hop_limit), 64);
    abi::set(in, path(ifc::ads::vhca_port_num), 1);
    return in;
}
std::vector<std::byte> rtr2rts(std::uint32_t qpn) {
    auto in = modify(opcode::rtr2rts_qp, qpn);
    abi::set(in, ctx(ifc::qpc::next_send_psn), 0x123456);
    abi::set(in, ctx(ifc::qpc::retry_count), 7);
    abi::set(in, ctx(ifc::qpc::rnr_retry), 7);
    abi::set(in, ctx(ifc::qpc::log_sra_max), 4);
    abi::set(in, path(ifc::ads::ack_timeout), 14);
    return in;
}
constexpr std::size_t modify_out = ifc::rst2init_qp_out::size_bytes;

}  // namespace

TEST_CASE("mlx5 model objects: every command needs an initialized function", "[model][mlx5]") {
    fixture t({}, false);
    for (opcode op : {opcode::alloc_uar, opcode::alloc_pd, opcode::create_mkey, opcode::create_eq, opcode::create_cq,
                      opcode::create_qp, opcode::rst2init_qp, opcode::query_qp, opcode::destroy_qp}) {
        auto out = t.run(make<ifc::create_qp_in>(op, 0, 64), ifc::query_qp_out::size_bytes);
        INFO(ifc::to_string(op));
        CHECK(status_of(out) == cmd_status::bad_sys_state_err);
    }
    CHECK(t.fw.objects() == 0);
}

TEST_CASE("mlx5 model objects: the object commands not modelled are BAD_OP, as on a card", "[model][mlx5]") {
    fixture t;
    for (opcode op : {opcode::query_mkey, opcode::query_cq, opcode::modify_cq, opcode::init2init_qp}) {
        INFO(ifc::to_string(op));
        const auto out = t.run(make<ifc::create_qp_in>(op), ifc::query_qp_out::size_bytes);
        if (op == opcode::init2init_qp) {  // modelled: a QP number that names nothing
            CHECK(status_of(out) == cmd_status::bad_res_state_err);
        } else {
            CHECK(status_of(out) == cmd_status::bad_op_err);
        }
    }
    CHECK(t.fw.objects() == 0);
}

TEST_CASE("mlx5 model objects: UARs and PDs", "[model][mlx5]") {
    model::firmware_options o;
    o.uar_pages = 2;
    fixture t(o);
    // UAR k is BAR0 page k; pages 0-4 hold the init segment (mlx5_ifc.h initial_seg)
    const std::uint32_t first = o.first_uar_page;
    CHECK(first == 5);
    CHECK(t.alloc_uar() == first);
    CHECK(t.alloc_uar() == first + 1);
    auto none = t.run(make<ifc::alloc_uar_in>(opcode::alloc_uar), ifc::alloc_uar_out::size_bytes);
    CHECK(status_of(none) == cmd_status::no_res_err);
    CHECK(t.fw.uars() == std::set<std::uint32_t>{first, first + 1});
    t.ok(t.destroy<ifc::dealloc_uar_in, ifc::dealloc_uar_out>(opcode::dealloc_uar, ifc::dealloc_uar_in::uar, first));
    CHECK(status_of(t.destroy<ifc::dealloc_uar_in, ifc::dealloc_uar_out>(opcode::dealloc_uar,
                                                                          ifc::dealloc_uar_in::uar, first)) ==
          cmd_status::bad_res_state_err);
    CHECK(t.alloc_uar() == first);

    const auto pd = t.alloc_pd();
    CHECK(pd != 0);
    CHECK(t.fw.pds().contains(pd));
    // outputs shorter than the command's layout
    auto short_out = t.run(make<ifc::alloc_pd_in>(opcode::alloc_pd), 8);
    CHECK(status_of(short_out) == cmd_status::bad_outp_len_err);
    CHECK(t.fw.pds().size() == 1);
    t.ok(t.destroy<ifc::dealloc_pd_in, ifc::dealloc_pd_out>(opcode::dealloc_pd, ifc::dealloc_pd_in::pd, pd));
    CHECK(status_of(t.destroy<ifc::dealloc_pd_in, ifc::dealloc_pd_out>(opcode::dealloc_pd, ifc::dealloc_pd_in::pd,
                                                                        pd)) == cmd_status::bad_res_state_err);
    CHECK(t.fw.pds().empty());
}

TEST_CASE("mlx5 model objects: MTT memory keys translate within bounds and rights", "[model][mlx5]") {
    fixture t;
    const auto pd = t.alloc_pd();
    using In = ifc::create_mkey_in;
    constexpr auto mkc = In::memory_key_mkey_entry;
    // A region of 0x2000 bytes starting 0x100 into a page: it touches 3 pages.
    const std::uint64_t va = 0x7f0000000100;
    const std::array<std::uint64_t, 3> page_at = {queues + 0x5000, queues + 0x2000, queues + 0x9000};
    auto key_in = [&](std::size_t octwords, std::size_t actual) {
        auto in = make<In>(opcode::create_mkey, 0, 16 * actual);
        abi::set<mkc(ifc::mkc::access_mode_1_0)>(in, static_cast<std::uint8_t>(ifc::mkc_access_mode::mtt));
        abi::set<mkc(ifc::mkc::lr)>(in, 1);
        abi::set<mkc(ifc::mkc::lw)>(in, 1);
        abi::set<mkc(ifc::mkc::rr)>(in, 1);
        abi::set<mkc(ifc::mkc::qpn)>(in, 0xffffff);
        abi::set<mkc(ifc::mkc::mkey_7_0)>(in, 0x5a);
        abi::set<mkc(ifc::mkc::pd)>(in, pd);
        abi::set<mkc(ifc::mkc::start_addr)>(in, va);
        abi::set<mkc(ifc::mkc::len)>(in, 0x2000);
        abi::set<mkc(ifc::mkc::log_page_size)>(in, 12);
        abi::set<mkc(ifc::mkc::translations_octword_size)>(in, octwords);
        abi::set<In::translations_octword_actual_size>(in, actual);
        for (std::size_t i = 0; i < std::min<std::size_t>(2 * actual, 3); ++i) {
            // the third page is readable only
            abi::set(in, ifc::pas_entry<In>(i), page_at[i] | ifc::mtt::read_enable | (i < 2 ? ifc::mtt::write_enable : 0));
        }
        return in;
    };
    const auto index = t.create(key_in(2, 2), ifc::create_mkey_out::mkey_index, ifc::create_mkey_out::size_bytes);
    const std::uint32_t key = index << 8 | 0x5a;
    const model::mkey_object* m = t.fw.mkey(key);
    REQUIRE(m != nullptr);
    CHECK(m->pd == pd);
    CHECK(m->len == 0x2000);
    CHECK(m->mtt.size() == 3);
    CHECK(t.fw.mkey(index << 8 | 0x5b) == nullptr);  // another variant of the index

    std::vector<model::dma_segment> seg;
    namespace right = model::mkey_right;
    // across the first page boundary: 0xf00 bytes in page 0, 0x100 in page 1
    REQUIRE(t.fw.mkey_translate(key, va, 0x1000, right::local_write, seg));
    REQUIRE(seg.size() == 2);
    CHECK(seg[0].iova == page_at[0] + 0x100);
    CHECK(seg[0].len == 0xf00);
    CHECK(seg[1].iova == page_at[1]);
    CHECK(seg[1].len == 0x100);
    // the last byte of the region, read remotely, lies in the read-only third page
    REQUIRE(t.fw.mkey_translate(key, va + 0x1fff, 1, right::remote_read, seg));
    CHECK(seg.at(0).iova == page_at[2] + 0xff);
    CHECK_FALSE(t.fw.mkey_translate(key, va + 0x1fff, 1, right::local_write, seg));   // MTT: no write enable
    CHECK(seg.empty());
    CHECK_FALSE(t.fw.mkey_translate(key, va + 0x1fff, 2, right::local_read, seg));    // one byte past the end
    CHECK_FALSE(t.fw.mkey_translate(key, va - 1, 1, right::local_read, seg));         // before the start
    CHECK_FALSE(t.fw.mkey_translate(key, va, 8, right::remote_write, seg));           // rw not granted
    CHECK_FALSE(t.fw.mkey_translate(key, va, 8, right::atomic, seg));                 // a not granted
    CHECK_FALSE(t.fw.mkey_translate(key ^ 1, va, 8, right::local_read, seg));         // wrong variant

    SECTION("refusals change nothing") {
        const auto before = t.fw.mkeys().size();
        // translations_octword_size smaller than the 3 pages need
        CHECK(status_of(t.run(key_in(1, 1), ifc::create_mkey_out::size_bytes)) == cmd_status::bad_param_err);
        // the input holds fewer entries than translations_octword_actual_size says
        auto cut = key_in(2, 2);
        cut.resize(cut.size() - 8);
        CHECK(status_of(t.run(cut, ifc::create_mkey_out::size_bytes)) == cmd_status::bad_inp_len_err);
        // a PD that does not exist
        auto nopd = key_in(2, 2);
        abi::set<mkc(ifc::mkc::pd)>(nopd, pd + 1);
        CHECK(status_of(t.run(nopd, ifc::create_mkey_out::size_bytes)) == cmd_status::bad_param_err);
        // KLM access mode (not a plain region)
        auto klm = key_in(2, 2);
        abi::set<mkc(ifc::mkc::access_mode_1_0)>(klm, static_cast<std::uint8_t>(ifc::mkc_access_mode::klms));
        CHECK(status_of(t.run(klm, ifc::create_mkey_out::size_bytes)) == cmd_status::bad_param_err);
        // an MTT entry not aligned to the page size
        auto odd = key_in(2, 2);
        abi::set(odd, ifc::pas_entry<In>(1), page_at[1] + 0x800);
        CHECK(status_of(t.run(odd, ifc::create_mkey_out::size_bytes)) == cmd_status::bad_param_err);
        CHECK(t.fw.mkeys().size() == before);
        // the PD is in use by the key
        CHECK(status_of(t.destroy<ifc::dealloc_pd_in, ifc::dealloc_pd_out>(opcode::dealloc_pd,
                                                                            ifc::dealloc_pd_in::pd, pd)) ==
              cmd_status::bad_res_state_err);
        CHECK(t.fw.pds().contains(pd));
    }
    SECTION("destroy, then the key translates nothing") {
        t.ok(t.destroy<ifc::destroy_mkey_in, ifc::destroy_mkey_out>(opcode::destroy_mkey,
                                                                     ifc::destroy_mkey_in::mkey_index, index));
        CHECK_FALSE(t.fw.mkey_translate(key, va, 8, right::local_read, seg));
        CHECK(status_of(t.destroy<ifc::destroy_mkey_in, ifc::destroy_mkey_out>(
                  opcode::destroy_mkey, ifc::destroy_mkey_in::mkey_index, index)) == cmd_status::bad_res_state_err);
    }
    SECTION("a PA key over the whole space (length64)") {
        auto pa = make<In>(opcode::create_mkey);
        abi::set<mkc(ifc::mkc::lr)>(pa, 1);
        abi::set<mkc(ifc::mkc::lw)>(pa, 1);
        abi::set<mkc(ifc::mkc::length64)>(pa, 1);
        abi::set<mkc(ifc::mkc::qpn)>(pa, 0xffffff);
        abi::set<mkc(ifc::mkc::pd)>(pa, pd);
        const auto pa_index = t.create(pa, ifc::create_mkey_out::mkey_index, ifc::create_mkey_out::size_bytes);
        REQUIRE(t.fw.mkey_translate(pa_index << 8, queues + 0x10, 0x3000, right::local_write, seg));
        REQUIRE(seg.size() == 1);
        CHECK(seg[0].iova == queues + 0x10);
        CHECK(seg[0].len == 0x3000);
        CHECK_FALSE(t.fw.mkey_translate(pa_index << 8, queues, 8, right::remote_read, seg));
    }
}

TEST_CASE("mlx5 model objects: EQs and CQs", "[model][mlx5]") {
    model::firmware_options o;
    o.msix_vectors = 4;
    fixture t(o);
    const auto uar = t.alloc_uar();
    using EqOut = ifc::create_eq_out;
    using CqOut = ifc::create_cq_out;
    // 128 EQEs = 8 KiB = 2 pages
    const auto eqn = t.create(t.eq_in(uar, 7, 3, queues, 1u << 0x0a), EqOut::eq_number, EqOut::size_bytes);
    const model::eq_object* e = t.fw.eq(eqn);
    REQUIRE(e != nullptr);
    CHECK(e->log_eq_size == 7);
    CHECK(e->uar_page == uar);
    CHECK(e->intr == 3);
    CHECK(e->pas == std::vector<std::uint64_t>{queues, queues + 4096});
    CHECK(e->subscribed(0x0a));
    CHECK_FALSE(e->subscribed(0x00));

    const std::size_t objects = t.fw.objects();
    SECTION("EQ refusals") {
        CHECK(status_of(t.run(t.eq_in(uar, 7, 4, queues), EqOut::size_bytes)) == cmd_status::bad_param_err);  // vector
        CHECK(status_of(t.run(t.eq_in(uar + 1, 7, 0, queues), EqOut::size_bytes)) == cmd_status::bad_param_err);  // UAR
        CHECK(status_of(t.run(t.eq_in(uar, 23, 0, queues), EqOut::size_bytes)) == cmd_status::bad_param_err);  // size
        CHECK(status_of(t.run(t.eq_in(uar, 7, 0, queues + 0x10), EqOut::size_bytes)) == cmd_status::bad_param_err);
        CHECK(status_of(t.run(t.eq_in(uar, 7, 0, base + mapped_bytes), EqOut::size_bytes)) == cmd_status::bad_param_err);  // unmapped
        auto cut = t.eq_in(uar, 7, 0, queues);
        cut.resize(cut.size() - 8);  // one PAS short of 8 KiB
        CHECK(status_of(t.run(cut, EqOut::size_bytes)) == cmd_status::bad_inp_len_err);
        CHECK(status_of(t.destroy<ifc::destroy_eq_in, ifc::destroy_eq_out>(opcode::destroy_eq,
                                                                            ifc::destroy_eq_in::eq_number, eqn + 1)) ==
              cmd_status::bad_res_state_err);
        CHECK(t.fw.objects() == objects);
    }
    const auto cqn = t.create(t.cq_in(uar, eqn, 8, queues + 0x10000, queues + 0x20000), CqOut::cqn,
                              CqOut::size_bytes);
    const model::cq_object* c = t.fw.cq(cqn);
    REQUIRE(c != nullptr);
    CHECK(c->eqn == eqn);
    CHECK(c->dbr_addr == queues + 0x20000);
    CHECK(c->log_cq_size == 8);
    CHECK(c->pas.size() == 4);
    SECTION("CQ refusals, and what is in use") {
        const std::size_t with_cq = t.fw.objects();
        CHECK(status_of(t.run(t.cq_in(uar, eqn + 1, 8, queues, queues + 0x20000), CqOut::size_bytes)) ==
              cmd_status::bad_param_err);  // no such EQ
        CHECK(status_of(t.run(t.cq_in(uar, eqn, 8, queues, queues + 0x20004), CqOut::size_bytes)) ==
              cmd_status::bad_param_err);  // doorbell record not 8-byte aligned
        auto big = t.cq_in(uar, eqn, 8, queues, queues + 0x20000);
        abi::set<ifc::create_cq_in::cq_context(ifc::cqc::cqe_sz)>(big, 1);
        CHECK(status_of(t.run(big, CqOut::size_bytes)) == cmd_status::bad_param_err);  // 128-byte CQEs
        CHECK(t.fw.objects() == with_cq);
        // the EQ serves the CQ, the UAR serves both
        CHECK(status_of(t.destroy<ifc::destroy_eq_in, ifc::destroy_eq_out>(opcode::destroy_eq,
                                                                            ifc::destroy_eq_in::eq_number, eqn)) ==
              cmd_status::bad_res_state_err);
        CHECK(status_of(t.destroy<ifc::dealloc_uar_in, ifc::dealloc_uar_out>(opcode::dealloc_uar,
                                                                              ifc::dealloc_uar_in::uar, uar)) ==
              cmd_status::bad_res_state_err);
        CHECK(t.fw.objects() == with_cq);
        t.ok(t.destroy<ifc::destroy_cq_in, ifc::destroy_cq_out>(opcode::destroy_cq, ifc::destroy_cq_in::cqn, cqn));
        CHECK(status_of(t.destroy<ifc::destroy_cq_in, ifc::destroy_cq_out>(opcode::destroy_cq,
                                                                            ifc::destroy_cq_in::cqn, cqn)) ==
              cmd_status::bad_res_state_err);
        t.ok(t.destroy<ifc::destroy_eq_in, ifc::destroy_eq_out>(opcode::destroy_eq, ifc::destroy_eq_in::eq_number, eqn));
        t.ok(t.destroy<ifc::dealloc_uar_in, ifc::dealloc_uar_out>(opcode::dealloc_uar, ifc::dealloc_uar_in::uar, uar));
        CHECK(t.fw.objects() == 0);
    }
    SECTION("TEARDOWN_HCA drops every object") {
        auto in = make<ifc::teardown_hca_in>(opcode::teardown_hca);
        t.ok(t.run(in, ifc::teardown_hca_out::size_bytes));
        CHECK(t.fw.objects() == 0);
        CHECK(t.fw.eq(eqn) == nullptr);
    }
    SECTION("a function reset drops every object") {
        t.fw.reset();
        CHECK(t.fw.objects() == 0);
        CHECK(t.fw.cq(cqn) == nullptr);
    }
}

TEST_CASE("mlx5 model objects: the RC QP state machine", "[model][mlx5]") {
    fixture t;
    const auto uar = t.alloc_uar();
    const auto pd = t.alloc_pd();
    const auto eqn = t.create(t.eq_in(uar, 6, 0, queues), ifc::create_eq_out::eq_number, ifc::create_eq_out::size_bytes);
    const auto cqn = t.create(t.cq_in(uar, eqn, 6, queues + 0x10000, queues + 0x20000), ifc::create_cq_out::cqn,
                              ifc::create_cq_out::size_bytes);
    using QpOut = ifc::create_qp_out;
    const auto qpn = t.create(t.qp_in(pd, cqn, uar, queues + 0x30000, queues + 0x20040), QpOut::qpn, QpOut::size_bytes);
    const model::qp_object* q = t.fw.qp(qpn);
    REQUIRE(q != nullptr);
    CHECK(q->state == ifc::qpc_state::rst);
    CHECK(q->rq_bytes() == 1024);
    CHECK(q->sq_bytes() == 4096);
    CHECK(q->pas == std::vector<std::uint64_t>{queues + 0x30000, queues + 0x31000});
    const auto status = [&](const std::vector<std::byte>& in) { return status_of(t.run(in, modify_out)); };
    const auto to = [&](opcode op) {
        return status(modify(op, qpn));
    };

    SECTION("create refusals") {
        const std::size_t objects = t.fw.objects();
        auto ud = t.qp_in(pd, cqn, uar, queues + 0x30000, queues + 0x20040);
        abi::set<ifc::create_qp_in::qpc(ifc::qpc::st)>(ud, static_cast<std::uint8_t>(ifc::qpc_st::ud));
        CHECK(status_of(t.run(ud, QpOut::size_bytes)) == cmd_status::bad_param_err);
        CHECK(status_of(t.run(t.qp_in(pd + 1, cqn, uar, queues + 0x30000, queues + 0x20040), QpOut::size_bytes)) ==
              cmd_status::bad_param_err);
        CHECK(status_of(t.run(t.qp_in(pd, cqn + 1, uar, queues + 0x30000, queues + 0x20040), QpOut::size_bytes)) ==
              cmd_status::bad_param_err);
        CHECK(status_of(t.run(t.qp_in(pd, cqn, uar, queues + 0x30000, queues + 0x20042), QpOut::size_bytes)) ==
              cmd_status::bad_param_err);
        auto big = t.qp_in(pd, cqn, uar, queues + 0x30000, queues + 0x20040);
        abi::set<ifc::create_qp_in::qpc(ifc::qpc::log_rq_stride)>(big, 6);  // 1 KiB receive WQEs
        CHECK(status_of(t.run(big, QpOut::size_bytes)) == cmd_status::bad_param_err);
        auto cut = t.qp_in(pd, cqn, uar, queues + 0x30000, queues + 0x20040);
        cut.resize(cut.size() - 8);  // the SQ's page is missing
        CHECK(status_of(t.run(cut, QpOut::size_bytes)) == cmd_status::bad_inp_len_err);
        CHECK(t.fw.objects() == objects);
        // the QP names the CQ and the PD
        CHECK(status_of(t.destroy<ifc::destroy_cq_in, ifc::destroy_cq_out>(opcode::destroy_cq,
                                                                            ifc::destroy_cq_in::cqn, cqn)) ==
              cmd_status::bad_res_state_err);
        CHECK(status_of(t.destroy<ifc::dealloc_pd_in, ifc::dealloc_pd_out>(opcode::dealloc_pd,
                                                                            ifc::dealloc_pd_in::pd, pd)) ==
              cmd_status::bad_res_state_err);
        CHECK(t.fw.objects() == objects);
    }
    SECTION("RST -> INIT -> RTR -> RTS, the fields stored, QUERY_QP") {
        CHECK(status(rst2init(qpn)) == cmd_status::ok);
        CHECK(q->state == ifc::qpc_state::init);
        CHECK(status(init2rtr(qpn)) == cmd_status::ok);
        CHECK(q->state == ifc::qpc_state::rtr);
        CHECK(status(rtr2rts(qpn)) == cmd_status::ok);
        CHECK(q->state == ifc::qpc_state::rts);
        CHECK(abi::get<ifc::qpc::remote_qpn>(q->qpc) == 0x1234);
        CHECK(abi::get<ifc::qpc::next_rcv_psn>(q->qpc) == 0xabcdef);
        CHECK(abi::get<ifc::qpc::next_send_psn>(q->qpc) == 0x123456);
        CHECK(abi::get<ifc::qpc::primary_address_path(ifc::ads::ack_timeout)>(q->qpc) == 14);
        CHECK(abi::get<ifc::qpc::primary_address_path(ifc::ads::udp_sport)>(q->qpc) == 0xdcba);
        CHECK(abi::get<ifc::qpc::rre>(q->qpc) == 1);
        CHECK(abi::get<ifc::qpc::rwe>(q->qpc) == 1);
        CHECK(abi::get<ifc::qpc::rae>(q->qpc) == 0);

        auto query = make<ifc::query_qp_in>(opcode::query_qp);
        abi::set<ifc::query_qp_in::qpn>(query, qpn);
        auto out = t.run(query, ifc::query_qp_out::size_bytes);
        fixture::ok(out);
        using Out = ifc::query_qp_out;
        CHECK(abi::get<Out::qpc(ifc::qpc::state)>(out) == static_cast<std::uint8_t>(ifc::qpc_state::rts));
        CHECK(abi::get<Out::qpc(ifc::qpc::pd)>(out) == pd);
        CHECK(abi::get<Out::qpc(ifc::qpc::retry_count)>(out) == 7);
        CHECK(abi::get<Out::qpc(ifc::qpc::rnr_retry)>(out) == 7);
        CHECK(abi::get<Out::qpc(ifc::qpc::primary_address_path(ifc::ads::rmac_31_0))>(out) == 2);
        CHECK(abi::get(out, ifc::query_qp_out_pas(1)) == queues + 0x31000);
        // an output too short for query_qp_out
        CHECK(status_of(t.run(query, ifc::query_qp_out::size_bytes - 8)) == cmd_status::bad_outp_len_err);

        CHECK(to(opcode::rts2rts_qp) == cmd_status::ok);
        // RTS2RTS takes the fields its opt_param_mask names, and refuses a bit it does not take
        auto rnr = modify(opcode::rts2rts_qp, qpn);
        abi::set(rnr, ctx(ifc::qpc::min_rnr_nak), 20);
        abi::set(rnr, ctx(ifc::qpc::next_send_psn), 0x77);  // not a field RTS2RTS takes: ignored
        abi::set<ifc::rst2init_qp_in::opt_param_mask>(rnr, ifc::qp_optpar::rnr_timeout);
        CHECK(status(rnr) == cmd_status::ok);
        CHECK(abi::get<ifc::qpc::min_rnr_nak>(q->qpc) == 20);
        CHECK(abi::get<ifc::qpc::next_send_psn>(q->qpc) == 0x123456);
        abi::set<ifc::rst2init_qp_in::opt_param_mask>(rnr, ifc::qp_optpar::ack_timeout);
        CHECK(status(rnr) == cmd_status::bad_param_err);
        CHECK(to(opcode::qp_2err) == cmd_status::ok);
        CHECK(q->state == ifc::qpc_state::err);
        CHECK(status(rtr2rts(qpn)) == cmd_status::bad_qp_state_err);  // ERR -> RTS
        CHECK(to(opcode::rts2rts_qp) == cmd_status::bad_qp_state_err);
        CHECK(q->state == ifc::qpc_state::err);
        CHECK(to(opcode::qp_2rst) == cmd_status::ok);
        CHECK(q->state == ifc::qpc_state::rst);
        CHECK(abi::get<ifc::qpc::remote_qpn>(q->qpc) == 0);  // the context CREATE_QP gave
    }
    SECTION("forbidden transitions are BAD_QP_STATE and change nothing") {
        CHECK(status(init2rtr(qpn)) == cmd_status::bad_qp_state_err);  // RST -> RTR
        CHECK(status(rtr2rts(qpn)) == cmd_status::bad_qp_state_err);   // RST -> RTS
        CHECK(q->state == ifc::qpc_state::rst);
        REQUIRE(status(rst2init(qpn)) == cmd_status::ok);
        CHECK(status(rtr2rts(qpn)) == cmd_status::bad_qp_state_err);   // INIT -> RTS
        CHECK(status(rst2init(qpn)) == cmd_status::bad_qp_state_err);  // INIT -> INIT by RST2INIT
        CHECK(to(opcode::sqerr2rts_qp) == cmd_status::bad_qp_state_err);
        CHECK(q->state == ifc::qpc_state::init);
        REQUIRE(status(init2rtr(qpn)) == cmd_status::ok);
        CHECK(status(init2rtr(qpn)) == cmd_status::bad_qp_state_err);  // RTR -> RTR
        CHECK(q->state == ifc::qpc_state::rtr);
    }
    SECTION("2RST from every state") {
        const std::vector<std::vector<std::byte>> path = {rst2init(qpn), init2rtr(qpn), rtr2rts(qpn)};
        for (std::size_t reached = 0; reached <= path.size(); ++reached) {
            for (std::size_t i = 0; i < reached; ++i) {
                REQUIRE(status(path[i]) == cmd_status::ok);
            }
            CHECK(to(opcode::qp_2rst) == cmd_status::ok);
            CHECK(q->state == ifc::qpc_state::rst);
        }
        REQUIRE(to(opcode::qp_2err) == cmd_status::ok);  // RST -> ERR
        CHECK(to(opcode::qp_2rst) == cmd_status::ok);
        CHECK(q->state == ifc::qpc_state::rst);
    }
    SECTION("a transition's required fields, each missing or out of range, is BAD_PARAM") {
        REQUIRE(status(rst2init(qpn)) == cmd_status::ok);
        auto no_port = rst2init(qpn);
        abi::set(no_port, path(ifc::ads::vhca_port_num), 0);
        std::vector<std::pair<const char*, std::vector<std::byte>>> bad;
        auto with = [&](const char* what, abi::field f, std::uint64_t v) {
            auto in = init2rtr(qpn);
            abi::set(in, f, v);
            bad.emplace_back(what, std::move(in));
        };
        with("mtu", ctx(ifc::qpc::mtu), 0);
        with("raw-Ethernet mtu", ctx(ifc::qpc::mtu), 7);
        with("remote_qpn", ctx(ifc::qpc::remote_qpn), 0);
        auto no_mac = init2rtr(qpn);
        abi::set(no_mac, path(ifc::ads::rmac_47_32), 0);
        abi::set(no_mac, path(ifc::ads::rmac_31_0), 0);
        bad.emplace_back("rmac", std::move(no_mac));
        with("src_addr_index (no such GID)", path(ifc::ads::src_addr_index), 5);
        with("udp_sport", path(ifc::ads::udp_sport), 0);
        with("log_rra_max", ctx(ifc::qpc::log_rra_max), 5);
        with("opt_param_mask bit not taken by INIT2RTR", ifc::rst2init_qp_in::opt_param_mask,
             ifc::qp_optpar::ack_timeout);
        auto no_gid = init2rtr(qpn);
        std::ranges::fill(bytes(no_gid, path(ifc::ads::rgid_rip)), std::byte{0});
        bad.emplace_back("rgid", std::move(no_gid));
        for (const auto& [what, in] : bad) {
            INFO(what);
            CHECK(status(in) == cmd_status::bad_param_err);
            CHECK(q->state == ifc::qpc_state::init);
            CHECK(abi::get<ifc::qpc::remote_qpn>(q->qpc) == 0);
        }
        REQUIRE(status(init2rtr(qpn)) == cmd_status::ok);
        auto sra = rtr2rts(qpn);
        abi::set(sra, ctx(ifc::qpc::log_sra_max), 5);
        CHECK(status(sra) == cmd_status::bad_param_err);
        CHECK(q->state == ifc::qpc_state::rtr);
        CHECK(to(opcode::qp_2rst) == cmd_status::ok);
        CHECK(status(no_port) == cmd_status::bad_param_err);
        CHECK(q->state == ifc::qpc_state::rst);
    }
    SECTION("unknown QPs and short inputs") {
        CHECK(status(rst2init(qpn + 1)) == cmd_status::bad_res_state_err);
        auto cut = rst2init(qpn);
        cut.resize(ifc::rst2init_qp_in::size_bytes - 4);
        CHECK(status(cut) == cmd_status::bad_inp_len_err);
        CHECK(q->state == ifc::qpc_state::rst);
        t.ok(t.destroy<ifc::destroy_qp_in, ifc::destroy_qp_out>(opcode::destroy_qp, ifc::destroy_qp_in::qpn, qpn));
        CHECK(t.fw.qp(qpn) == nullptr);
        CHECK(status_of(t.destroy<ifc::destroy_qp_in, ifc::destroy_qp_out>(opcode::destroy_qp,
                                                                            ifc::destroy_qp_in::qpn, qpn)) ==
              cmd_status::bad_res_state_err);
    }
}
