// abi/bnxt's data-path forms against the checked ones they shortcut (which entry_test.cpp and
// decode_test.cpp pin to the kernel's roce_hsi.h/bnxt_hsi.h): fast::write_one and write_receive
// against write(), fast::write_psn_search against encode(), fast_doorbell against doorbell(),
// and the fast CQE readers against decode_cqe, byte for byte and value for value, over many
// random values.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <random>
#include <variant>

#include "abi/bnxt/bnxt.hpp"

namespace abi = rig::bnxt::abi;

namespace {

constexpr std::size_t wqe = abi::static_wqe_slots * abi::wqe_slot_size;

abi::local random_local(std::mt19937_64& rng) {
    return {static_cast<std::int64_t>(rng() >> 1), static_cast<std::int64_t>(rng() % (abi::max_length + 1)),
            static_cast<std::int64_t>(rng() & 0xffffffffu)};
}

}  // namespace

TEST_CASE("bnxt fast path: write_one and write_receive write write()'s bytes", "[unit][bnxt]") {
    std::mt19937_64 rng(7);
    for (int i = 0; i < 2000; ++i) {
        const abi::local l = random_local(rng);
        const abi::remote r{static_cast<std::int64_t>(rng() >> 1), static_cast<std::int64_t>(rng() & 0xffffffffu)};
        const bool signal = (rng() & 1) != 0;
        std::array<std::byte, wqe> checked{}, fast{};
        checked.fill(std::byte{0xa5});
        fast.fill(std::byte{0x5a});   // every byte is written, stale ones too
        const std::uint8_t flags = signal ? abi::SQ_SEND_HDR_FLAGS_SIGNAL_COMP : 0;
        const auto imm = static_cast<std::uint32_t>(rng());
        switch (i % 5) {
        case 3:
            abi::write(checked, 0, abi::wqe_mode::static_128, abi::send_imm_op{{&l, 1}, imm}, signal);
            abi::fast::write_one(fast.data(), abi::SQ_BASE_WQE_TYPE_SEND_W_IMMEAD, flags, l, r.address,
                                 static_cast<std::uint32_t>(r.key), imm);
            break;
        case 4:
            abi::write(checked, 0, abi::wqe_mode::static_128, abi::write_imm_op{{&l, 1}, r, imm}, signal);
            abi::fast::write_one(fast.data(), abi::SQ_BASE_WQE_TYPE_WRITE_W_IMMEAD, flags, l, r.address,
                                 static_cast<std::uint32_t>(r.key), imm);
            break;
        case 0:
            abi::write(checked, 0, abi::wqe_mode::static_128, abi::send_op{{&l, 1}}, signal);
            abi::fast::write_one(fast.data(), abi::SQ_BASE_WQE_TYPE_SEND, flags, l, r.address, static_cast<std::uint32_t>(r.key));
            break;
        case 1:
            abi::write(checked, 0, abi::wqe_mode::static_128, abi::write_op{{&l, 1}, r}, signal);
            abi::fast::write_one(fast.data(), abi::SQ_BASE_WQE_TYPE_WRITE_WQE, flags, l, r.address, static_cast<std::uint32_t>(r.key));
            break;
        case 2:
            abi::write(checked, 0, abi::wqe_mode::static_128, abi::read_op{r, {&l, 1}}, signal);
            abi::fast::write_one(fast.data(), abi::SQ_BASE_WQE_TYPE_READ_WQE, flags, l, r.address, static_cast<std::uint32_t>(r.key));
            break;
        }
        INFO("entry " << i);
        REQUIRE(checked == fast);

        const auto wr_id = static_cast<std::uint32_t>(rng() & abi::max_wr_id);
        abi::write(checked, 0, abi::wqe_mode::static_128, abi::receive{{&l, 1}, wr_id});
        abi::fast::write_receive(fast.data(), wr_id, l);
        REQUIRE(checked == fast);
    }
}

TEST_CASE("bnxt fast path: write_psn_search and fast_doorbell give encode()'s and doorbell()'s bytes",
          "[unit][bnxt]") {
    std::mt19937_64 rng(11);
    for (int i = 0; i < 2000; ++i) {
        abi::sq_psn_search_ext e{};
        e.start_psn = static_cast<std::uint32_t>(rng() & 0xffffff);
        e.opcode = static_cast<std::uint32_t>(rng() & 0xff);
        e.next_psn = static_cast<std::uint32_t>(rng() & 0xffffff);
        e.start_slot_idx = static_cast<std::uint16_t>(rng());
        std::array<std::byte, 16> fast{};
        fast.fill(std::byte{0x77});
        abi::fast::write_psn_search(fast.data(), e.start_psn, static_cast<std::uint8_t>(e.opcode), e.next_psn,
                                    e.start_slot_idx);
        REQUIRE(abi::to_bytes(e) == fast);

        const auto type = static_cast<std::uint8_t>(rng() % 16);
        const auto xid = static_cast<std::uint32_t>(rng() & 0xfffff);
        const auto index = static_cast<std::uint32_t>(rng() & 0xffffff);
        const bool epoch = (rng() & 1) != 0;
        INFO("type " << int(type) << " xid " << xid << " index " << index << " epoch " << epoch);
        REQUIRE(abi::fast_doorbell(type, xid, index, epoch) == abi::doorbell(type, xid, index, epoch));
    }
}

TEST_CASE("bnxt fast path: the CQE readers read decode_cqe's values", "[unit][bnxt]") {
    std::mt19937_64 rng(13);
    for (int i = 0; i < 4000; ++i) {
        std::array<std::byte, abi::cqe_size> b{};
        for (std::byte& x : b) {
            x = static_cast<std::byte>(rng());
        }
        // the types the data path takes, each often
        const std::uint8_t types[] = {abi::CQ_BASE_CQE_TYPE_REQ, abi::CQ_BASE_CQE_TYPE_RES_RC,
                                      abi::CQ_BASE_CQE_TYPE_TERMINAL, abi::CQ_BASE_CQE_TYPE_NO_OP};
        b[24] = (b[24] & std::byte{0xe1}) | static_cast<std::byte>(types[i % 4] << 1);
        const auto d = abi::decode_cqe(b);
        REQUIRE(d.has_value());
        const std::byte* c = b.data();
        CHECK(abi::fast::cqe_type(c) == types[i % 4]);
        if (const auto* r = std::get_if<abi::cq_req>(&*d)) {
            CHECK(abi::fast::req_qp_handle(c) == r->qp_handle);
            CHECK(abi::fast::sq_cons_idx(c) == r->sq_cons_idx);
            CHECK(abi::fast::status(c) == r->status);
        } else if (const auto* t = std::get_if<abi::cq_terminal>(&*d)) {
            CHECK(abi::fast::req_qp_handle(c) == t->qp_handle);
            CHECK(abi::fast::sq_cons_idx(c) == t->sq_cons_idx);
        } else if (const auto* s = std::get_if<abi::cq_res_rc>(&*d)) {
            CHECK(abi::fast::res_qp_handle(c) == s->qp_handle);
            CHECK(abi::fast::res_length(c) == s->length);
            CHECK(abi::fast::res_flags(c) == s->flags);
            CHECK(abi::fast::res_wr_id(c) == s->srq_or_rq_wr_id);
            CHECK(abi::fast::status(c) == s->status);
        }
    }
}
