// The driver's resource objects (firmware/mlx5/objects.hpp) against the served model: what
// they send (read back from the model), what a refusal gives back, what a timeout strands.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc.hpp"
#include "driver/dma_memory.hpp"
#include "firmware/mlx5/command_queue.hpp"
#include "firmware/mlx5/objects.hpp"
#include "firmware/mlx5/stranded.hpp"
#include "sim/mlx5/function_model.hpp"
#include "test/model/served_model.hpp"

namespace {

using namespace std::chrono_literals;
namespace ifc = rig::mlx5::ifc;
namespace abi = rig::abi;
namespace drv = rig::driver;
namespace fw = rig::firmware::mlx5;
namespace model = rig::sim::mlx5;
using ifc::cmd_status;
using ifc::opcode;
using clk = std::chrono::steady_clock;

clk::time_point soon() { return clk::now() + 5s; }

using rig::test::make;

template <class T>
T value(fw::result<T> r) {
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r.has_value());
    return std::move(*r);
}
void ok(const fw::result<void>& r) {
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r.has_value());
}
template <class T>
void refused(const fw::result<T>& r, opcode op, cmd_status s) {
    REQUIRE_FALSE(r.has_value());
    INFO(r.error().message);
    CHECK(r.error().kind == fw::error_kind::status);
    CHECK(r.error().opcode == op);
    CHECK(r.error().status == s);
}

constexpr std::array<std::uint8_t, 16> gid0 = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
constexpr std::array<std::uint8_t, 6> peer_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};

model::function_options options() {
    model::function_options o;
    o.init_time = 1ms;
    return o;
}

// The model served and brought up with raw commands: ENABLE_HCA, QUERY/MANAGE_PAGES, INIT_HCA,
// and GID 0 set by SET_ROCE_ADDRESS.
struct nic {
    rig::test::served_model m;
    std::unique_ptr<fw::command_queue> q;
    drv::dma_memory pages;
    fw::stranded_memory stranded;
    fw::doorbell_records records{*m.f, stranded};  // after stranded: gone before it

    explicit nic(model::function_options o = options()) : m(o) {
        auto created = fw::command_queue::create(*m.f);
        INFO((created ? std::string() : created.error().message));
        REQUIRE(created.has_value());
        q = std::move(*created);
        run<ifc::enable_hca_in, ifc::enable_hca_out>(make<ifc::enable_hca_in>(opcode::enable_hca));
        const std::size_t n = std::size_t{o.firmware.boot_pages} + o.firmware.init_pages;
        auto mem = drv::dma_memory::allocate(n * 4096, drv::page_choice::small_only);
        REQUIRE(mem.has_value());
        pages = std::move(*mem);
        auto mapped = m.f->dma_map(pages, 0, pages.size(), drv::dma_access::read_write);
        REQUIRE(mapped.has_value());
        const std::uint64_t iova = *mapped;
        using MP = ifc::manage_pages_in;
        auto give = make<MP>(opcode::manage_pages, 0, 8 * n);
        abi::set<MP::op_mod>(give, static_cast<std::uint16_t>(ifc::manage_pages_op_mod::allocation_success));
        abi::set<MP::input_num_entries>(give, n);
        for (std::size_t i = 0; i < n; ++i) {
            abi::set(give, ifc::pas_entry<MP>(i), iova + 4096 * i);
        }
        run<MP, ifc::manage_pages_out>(give);
        run<ifc::init_hca_in, ifc::init_hca_out>(make<ifc::init_hca_in>(opcode::init_hca));
        using SR = ifc::set_roce_address_in;
        using addr = ifc::roce_addr_layout;
        auto gid = make<SR>(opcode::set_roce_address);
        abi::set_bytes(std::span<std::byte>(gid), SR::roce_address(addr::source_l3_address),
                       std::as_bytes(std::span(gid0)));
        abi::set<SR::roce_address(addr::roce_version)>(gid, ifc::roce_addr::version_2);
        abi::set<SR::roce_address(addr::roce_l3_type)>(gid, ifc::roce_addr::l3_type_ipv6);
        abi::set<SR::roce_address(addr::source_mac_47_32)>(gid, 0x0200);
        abi::set<SR::roce_address(addr::source_mac_31_0)>(gid, 0x00000001);
        run<SR, ifc::set_roce_address_out>(gid);
        REQUIRE(m.fn.state() == model::hca_state::initialized);
    }
    template <class In, class Out>
    void run(const std::vector<std::byte>& in) {
        auto out = q->exec<In, Out>(in, soon());
        INFO((out ? std::string() : out.error().message));
        REQUIRE(out.has_value());
    }
    std::size_t windows() { return m.srv->dma().window_count(); }
};

fw::qp_rtr_params rtr_to(std::uint32_t qpn) {
    fw::qp_rtr_params p;
    p.remote_qpn = qpn;
    p.next_rcv_psn = 0x10203;
    p.rgid = gid0;
    p.rmac = peer_mac;
    p.gid_index = 0;
    return p;
}

}  // namespace

TEST_CASE("mlx5 driver objects: EQ, CQ, QP and MKEY made, connected, read back and destroyed", "[model][mlx5]") {
    nic t;
    const std::size_t windows = t.windows();
    const auto uar = value(fw::alloc_uar(*t.q, soon()));
    CHECK(uar >= 2);  // pages 0-1 of BAR0 are the init segment
    const auto pd = value(fw::alloc_pd(*t.q, soon()));

    auto eq = value(fw::eq::create(*t.q, *t.m.f, t.stranded, {.log_size = 7, .uar = uar, .vector = 0}, soon()));
    for (std::size_t i = 0; i < 128; ++i) {
        CHECK((std::to_integer<unsigned>(eq.entries()[64 * i + 63]) & 1) == 1);  // owner 1 before the device writes
    }
    auto cq = value(fw::cq::create(*t.q, *t.m.f, t.stranded, t.records, {.log_size = 8, .uar = uar, .eqn = eq.eqn()}, soon()));
    for (std::size_t i = 0; i < 256; ++i) {
        CHECK(cq.entries()[64 * i + 63] == std::byte{0xf0});  // opcode INVALID, owner 0
    }
    CHECK(cq.doorbell_record_iova() % 8 == 0);
    auto qp = value(fw::qp::create(*t.q, *t.m.f, t.stranded, t.records,
                                   {.pd = pd, .send_cq = cq.cqn(), .receive_cq = cq.cqn(), .uar = uar}, soon()));
    CHECK(qp.qpn() >= 0x100);
    CHECK(qp.send_queue().size() == 64 * 64);
    CHECK(qp.receive_queue().size() == 64 * 16);
    CHECK(t.m.fn.objects() == 5);  // UAR, PD, EQ, CQ, QP
    CHECK(t.windows() == windows + 4);  // EQ, CQ and QP buffers and one page of doorbell records
    // the CQ's and QP's records share that page, a cache line apart (doorbell_records.hpp)
    CHECK(t.records.pages() == 1);
    CHECK(t.records.in_use() == 2);
    CHECK(qp.doorbell_record_iova() == cq.doorbell_record_iova() + 64);

    auto info = value(qp.query(*t.q, soon()));
    CHECK(info.state == ifc::qpc_state::rst);

    ok(qp.rst2init(*t.q, 1, 0, {.remote_read = true, .remote_write = true}, soon()));
    ok(qp.init2rtr(*t.q, rtr_to(qp.qpn()), soon()));  // connected to itself
    fw::qp_rts_params rts;
    rts.next_send_psn = 0xabcde;
    ok(qp.rtr2rts(*t.q, rts, soon()));

    // What the model stored from the driver's bytes: the seed's settings (ack timeout 14,
    // retry 7, RNR retry 7) and the path.
    info = value(qp.query(*t.q, soon()));
    CHECK(info.state == ifc::qpc_state::rts);
    CHECK(info.ack_timeout == 14);
    CHECK(info.retry_count == 7);
    CHECK(info.rnr_retry == 7);
    CHECK(info.remote_qpn == qp.qpn());
    CHECK(info.next_rcv_psn == 0x10203);
    CHECK(info.next_send_psn == 0xabcde);
    CHECK(info.mtu == ifc::qpc_mtu::bytes_1k);
    CHECK(info.rgid == gid0);
    CHECK(info.rmac == peer_mac);
    CHECK(info.src_addr_index == 0);
    CHECK(info.udp_sport == 0xc000);
    CHECK(info.access.remote_read);
    CHECK(info.access.remote_write);
    CHECK_FALSE(info.access.remote_atomic);

    // A registered region: 0x2000 bytes 0x100 into mapped memory, MTT per 4 KiB page.
    auto region = drv::dma_memory::allocate(3 * 4096, drv::page_choice::small_only);
    REQUIRE(region.has_value());
    auto region_iova = t.m.f->dma_map(*region, 0, region->size(), drv::dma_access::read_write);
    REQUIRE(region_iova.has_value());
    auto key = value(fw::create_mkey(*t.q, pd, *region_iova + 0x100, 0x2000,
                                     {.local_write = true, .remote_read = true}, soon()));
    CHECK(key.lkey() == key.rkey());
    CHECK(key.lkey() >> 8 == key.index());
    CHECK(t.m.fn.objects() == 6);
    refused(fw::dealloc_pd(*t.q, pd, soon()), opcode::dealloc_pd, cmd_status::bad_res_state_err);  // in use
    ok(key.destroy(*t.q, soon()));
    CHECK_FALSE(key.alive());
    CHECK(t.m.f->dma_unmap(*region_iova, region->size()).has_value());

    ok(qp.to_error(*t.q, soon()));
    CHECK(value(qp.query(*t.q, soon())).state == ifc::qpc_state::err);
    ok(qp.to_reset(*t.q, soon()));
    info = value(qp.query(*t.q, soon()));
    CHECK(info.state == ifc::qpc_state::rst);
    CHECK(info.remote_qpn == 0);

    ok(qp.destroy(*t.q, *t.m.f, t.stranded, soon()));
    ok(cq.destroy(*t.q, *t.m.f, t.stranded, soon()));
    ok(eq.destroy(*t.q, *t.m.f, t.stranded, soon()));
    CHECK_FALSE(qp.alive());
    CHECK_THROWS_AS(qp.destroy(*t.q, *t.m.f, t.stranded, soon()), std::invalid_argument);
    CHECK(t.windows() == windows);  // the record page too: its last record was given back
    CHECK(t.records.pages() == 0);
    ok(fw::dealloc_pd(*t.q, pd, soon()));
    ok(fw::dealloc_uar(*t.q, uar, soon()));
    CHECK(t.m.fn.objects() == 0);
    CHECK(t.stranded.report().empty());
}

TEST_CASE("mlx5 driver objects: a refusal gives back what it took and changes nothing", "[model][mlx5]") {
    nic t;
    const auto uar = value(fw::alloc_uar(*t.q, soon()));
    const auto pd = value(fw::alloc_pd(*t.q, soon()));
    auto eq = value(fw::eq::create(*t.q, *t.m.f, t.stranded, {.log_size = 6, .uar = uar}, soon()));
    auto cq = value(fw::cq::create(*t.q, *t.m.f, t.stranded, t.records, {.log_size = 6, .uar = uar, .eqn = eq.eqn()}, soon()));
    const std::size_t windows = t.windows();
    const std::size_t objects = t.m.fn.objects();

    refused(fw::eq::create(*t.q, *t.m.f, t.stranded, {.log_size = 6, .uar = uar, .vector = 64}, soon()),
            opcode::create_eq, cmd_status::bad_param_err);
    refused(fw::eq::create(*t.q, *t.m.f, t.stranded, {.log_size = 6, .uar = uar + 7}, soon()), opcode::create_eq,
            cmd_status::bad_param_err);
    refused(fw::cq::create(*t.q, *t.m.f, t.stranded, t.records, {.log_size = 6, .uar = uar, .eqn = eq.eqn() + 1}, soon()),
            opcode::create_cq, cmd_status::bad_param_err);
    refused(fw::qp::create(*t.q, *t.m.f, t.stranded, t.records,
                           {.pd = pd, .send_cq = cq.cqn() + 1, .receive_cq = cq.cqn(), .uar = uar}, soon()),
            opcode::create_qp, cmd_status::bad_param_err);
    refused(fw::qp::create(*t.q, *t.m.f, t.stranded, t.records,
                           {.pd = pd + 1, .send_cq = cq.cqn(), .receive_cq = cq.cqn(), .uar = uar}, soon()),
            opcode::create_qp, cmd_status::bad_param_err);
    refused(fw::create_mkey(*t.q, pd + 1, 0x10000, 4096, {}, soon()), opcode::create_mkey, cmd_status::bad_param_err);
    CHECK(t.windows() == windows);  // every refused create unmapped its memory
    CHECK(t.records.in_use() == 1);  // and gave its record back: the CQ's is the only one
    CHECK(t.m.fn.objects() == objects);
    CHECK(t.stranded.report().empty());

    auto qp = value(fw::qp::create(*t.q, *t.m.f, t.stranded, t.records,
                                   {.pd = pd, .send_cq = cq.cqn(), .receive_cq = cq.cqn(), .uar = uar}, soon()));
    // RST -> RTR and INIT -> RTS are not transitions; the QP stays where it was
    refused(qp.init2rtr(*t.q, rtr_to(qp.qpn()), soon()), opcode::init2rtr_qp, cmd_status::bad_qp_state_err);
    refused(qp.rtr2rts(*t.q, {}, soon()), opcode::rtr2rts_qp, cmd_status::bad_qp_state_err);
    ok(qp.rst2init(*t.q, 1, 0, {}, soon()));
    refused(qp.rtr2rts(*t.q, {}, soon()), opcode::rtr2rts_qp, cmd_status::bad_qp_state_err);
    auto no_gid = rtr_to(qp.qpn());
    no_gid.gid_index = 9;  // no such GID table entry
    refused(qp.init2rtr(*t.q, no_gid, soon()), opcode::init2rtr_qp, cmd_status::bad_param_err);
    CHECK(value(qp.query(*t.q, soon())).state == ifc::qpc_state::init);
    CHECK_THROWS_AS(qp.rtr2rts(*t.q, {.retry_count = 8}, soon()), std::invalid_argument);  // misuse: 3 bits

    // the CQ serves the QP: refused, and the CQ stays usable
    refused(cq.destroy(*t.q, *t.m.f, t.stranded, soon()), opcode::destroy_cq, cmd_status::bad_res_state_err);
    CHECK(cq.alive());
    refused(eq.destroy(*t.q, *t.m.f, t.stranded, soon()), opcode::destroy_eq, cmd_status::bad_res_state_err);
    CHECK(eq.alive());
    CHECK(t.windows() == windows + 1);
    refused(fw::dealloc_pd(*t.q, pd + 1, soon()), opcode::dealloc_pd, cmd_status::bad_res_state_err);
    refused(fw::dealloc_uar(*t.q, uar, soon()), opcode::dealloc_uar, cmd_status::bad_res_state_err);

    ok(qp.destroy(*t.q, *t.m.f, t.stranded, soon()));
    ok(cq.destroy(*t.q, *t.m.f, t.stranded, soon()));
    ok(eq.destroy(*t.q, *t.m.f, t.stranded, soon()));
    CHECK(t.stranded.report().empty());
}

TEST_CASE("mlx5 driver objects: a command that times out strands the object's memory", "[model][mlx5]") {
    auto o = options();
    o.command_latency = 100ms;
    nic t(o);
    const auto uar = value(fw::alloc_uar(*t.q, soon()));
    auto eq = value(fw::eq::create(*t.q, *t.m.f, t.stranded, {.log_size = 6, .uar = uar}, soon()));
    const std::size_t windows = t.windows();

    auto r = eq.destroy(*t.q, *t.m.f, t.stranded, clk::now() + 10ms);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == fw::error_kind::timeout);
    CHECK_FALSE(eq.alive());
    auto report = t.stranded.report();
    REQUIRE(report.size() == 1);
    CHECK(report[0].what == "EQ " + abi::hex(eq.eqn()) + " buffer");
    CHECK(report[0].bytes == 4096);
    CHECK(t.windows() == windows);  // still mapped: the device may write it

    auto c = fw::cq::create(*t.q, *t.m.f, t.stranded, t.records, {.log_size = 6, .uar = uar}, clk::now() + 10ms);
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error().kind == fw::error_kind::timeout);
    CHECK(t.stranded.report().size() == 2);
    CHECK(t.stranded.report()[1].what == "CQ buffer");
    CHECK(t.windows() == windows + 2);  // its buffer and its record's page
    CHECK(t.records.in_use() == 1);     // the record stranded: never handed out again
}

TEST_CASE("mlx5 doorbell records: 64 to a page, zeroed when handed out, pages unmapped when empty", "[model][mlx5]") {
    nic t;
    const std::size_t windows = t.windows();
    std::vector<fw::doorbell_records::record> taken;
    for (std::size_t i = 0; i < fw::doorbell_records::slots_per_page + 1; ++i) {
        auto r = t.records.take();
        REQUIRE(r.has_value());
        taken.push_back(*r);
    }
    CHECK(t.records.pages() == 2);
    CHECK(t.windows() == windows + 2);
    for (std::size_t i = 1; i < fw::doorbell_records::slots_per_page; ++i) {
        CHECK(taken[i].iova == taken[0].iova + 64 * i);  // one page, a cache line each
        CHECK(taken[i].data == taken[0].data + 64 * i);
    }
    CHECK(taken[64].iova % 4096 == 0);

    // a record given back and taken again comes back zeroed: a new QP's counters start at 0
    std::memset(taken[5].data, 0xab, 8);
    t.records.give_back(taken[5]);
    CHECK_FALSE(taken[5].taken());
    auto again = t.records.take();
    REQUIRE(again.has_value());
    CHECK(again->iova == taken[0].iova + 5 * 64);
    CHECK(std::all_of(again->data, again->data + 64, [](std::byte b) { return b == std::byte{0}; }));
    taken[5] = *again;

    // misuse: a record this pool did not hand out (or already gave back) changes nothing
    fw::doorbell_records::record foreign = taken[7];
    t.records.give_back(taken[7]);
    CHECK_THROWS_AS(t.records.give_back(foreign), std::invalid_argument);
    CHECK_THROWS_AS(t.records.strand(foreign), std::invalid_argument);
    CHECK(t.records.in_use() == 64);

    // the second page goes when its one record comes back
    t.records.give_back(taken[64]);
    CHECK(t.records.pages() == 1);
    CHECK(t.windows() == windows + 1);
    // a stranded record is never handed out again, and keeps its page mapped
    const std::uint64_t first = taken[0].iova;
    t.records.strand(taken[0]);
    CHECK_FALSE(taken[0].taken());
    for (std::size_t i = 1; i < 64; ++i) {
        if (i != 7) {
            t.records.give_back(taken[i]);
        }
    }
    CHECK(t.records.in_use() == 1);
    CHECK(t.records.pages() == 1);
    CHECK(t.windows() == windows + 1);
    auto next = t.records.take();
    REQUIRE(next.has_value());
    CHECK(next->iova == first + 64);  // slot 0 is stranded: the first free one is slot 1
    t.records.give_back(*next);
    CHECK(t.records.pages() == 1);  // slot 0 still holds its page
}
