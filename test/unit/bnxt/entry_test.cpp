// abi/bnxt writers: SQ/RQ entries, the doorbell, ADD_GID's byte orders and the CMDQ writer,
// against the bytes bnxt_oracle.c builds over the kernel's structs; and every refusal: it throws
// std::invalid_argument naming the bad value and leaves the ring byte for byte as it was.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "abi/bnxt/bnxt.hpp"
#include "oracle.hpp"

namespace abi = rig::bnxt::abi;
using rig::test::bnxt::from_hex;
using rig::test::bnxt::run_oracle;
using rig::test::bnxt::to_hex;

namespace {

constexpr std::byte fill{0xa5};

std::string mode_arg(abi::wqe_mode m) { return m == abi::wqe_mode::static_128 ? "0" : "1"; }

std::string sges_arg(const std::vector<abi::local>& s) {
    std::string r = std::to_string(s.size());
    for (const abi::local& l : s) {
        r += " " + std::to_string(l.address) + " " + std::to_string(l.bytes) + " " +
             std::to_string(l.key);
    }
    return r;
}

std::string data_arg(std::string_view d) {
    return d.empty() ? "-" : to_hex(reinterpret_cast<const std::byte*>(d.data()), d.size());
}

// One request for the oracle and the same entry for abi::write.
struct scenario {
    std::string request;
    abi::wqe_mode mode;
    std::vector<abi::local> sges;
    std::string data;
    std::function<std::size_t(std::span<std::byte>, std::size_t)> write;
};

std::vector<abi::local> random_sges(std::mt19937_64& rng, std::size_t n) {
    std::vector<abi::local> s;
    for (std::size_t i = 0; i < n; ++i) {
        s.push_back({static_cast<std::int64_t>(rng() >> 1),
                     static_cast<std::int64_t>(rng() % (1u << 20)),
                     static_cast<std::int64_t>(rng() & 0xffffffffu)});
    }
    return s;
}

std::string random_data(std::mt19937_64& rng, std::size_t n) {
    std::string d(n, '\0');
    for (char& c : d) {
        c = static_cast<char>(rng());
    }
    return d;
}

std::vector<scenario> scenarios() {
    std::mt19937_64 rng(0xb0c5);
    std::vector<scenario> out;
    out.reserve(256);   // the writers refer to their scenario's sges and data: never reallocate
    for (abi::wqe_mode mode : {abi::wqe_mode::static_128, abi::wqe_mode::variable}) {
        const std::size_t max_sge = mode == abi::wqe_mode::static_128 ? 6 : 13;
        const std::size_t max_inl = mode == abi::wqe_mode::static_128 ? 96 : 200;
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, max_sge}) {
            for (bool sig : {false, true}) {
                const auto s = random_sges(rng, n);
                const abi::remote r{static_cast<std::int64_t>(rng() >> 1),
                                    static_cast<std::int64_t>(rng() & 0xffffffffu)};
                const std::string m = mode_arg(mode), g = sig ? "1" : "0";
                out.push_back({"SEND " + m + " " + g + " " + sges_arg(s), mode, s, "",
                               nullptr});
                out.back().write = [mode, sig, &sg = out.back().sges](auto ring, auto at) {
                    return abi::write(ring, at, mode, abi::entry{abi::send_op{sg}, sig});
                };
                out.push_back({"WRITE " + m + " " + g + " " + std::to_string(r.address) + " " +
                                   std::to_string(r.key) + " " + sges_arg(s),
                               mode, s, "", nullptr});
                out.back().write = [mode, sig, r, &sg = out.back().sges](auto ring, auto at) {
                    return abi::write(ring, at, mode, abi::entry{abi::write_op{sg, r}, sig});
                };
                out.push_back({"READ " + m + " " + g + " " + std::to_string(r.address) + " " +
                                   std::to_string(r.key) + " " + sges_arg(s),
                               mode, s, "", nullptr});
                out.back().write = [mode, sig, r, &sg = out.back().sges](auto ring, auto at) {
                    return abi::write(ring, at, mode, abi::entry{abi::read_op{r, sg}, sig});
                };
                if (n > 0) {
                    const std::int64_t wr_id = static_cast<std::int64_t>(rng() % (1u << 20));
                    out.push_back({"RECV " + m + " " + std::to_string(wr_id) + " " + sges_arg(s),
                                   mode, s, "", nullptr});
                    out.back().write = [mode, wr_id, &sg = out.back().sges](auto ring, auto at) {
                        return abi::write(ring, at, mode, abi::receive{sg, wr_id});
                    };
                }
            }
        }
        for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{16}, std::size_t{37},
                                max_inl}) {
            const std::string d = random_data(rng, len);
            const abi::remote r{static_cast<std::int64_t>(rng() >> 1),
                                static_cast<std::int64_t>(rng() & 0xffffffffu)};
            const std::string m = mode_arg(mode);
            out.push_back({"SENDI " + m + " 1 " + data_arg(d), mode, {}, d, nullptr});
            out.back().write = [mode, &dd = out.back().data](auto ring, auto at) {
                return abi::write(ring, at, mode, abi::entry{abi::send_inline_op{dd}, true});
            };
            out.push_back({"WRITEI " + m + " 0 " + std::to_string(r.address) + " " +
                               std::to_string(r.key) + " " + data_arg(d),
                           mode, {}, d, nullptr});
            out.back().write = [mode, r, &dd = out.back().data](auto ring, auto at) {
                return abi::write(ring, at, mode, abi::entry{abi::write_inline_op{dd, r}, false});
            };
        }
    }
    return out;
}

std::vector<std::byte> ring_of(std::size_t slots) {
    return std::vector<std::byte>(slots * abi::wqe_slot_size, fill);
}

// The ring, read from slot `at` for `slots` slots, wrapping.
std::vector<std::byte> read_slots(const std::vector<std::byte>& ring, std::size_t at,
                                  std::size_t slots) {
    const std::size_t n = ring.size() / abi::wqe_slot_size;
    std::vector<std::byte> out;
    for (std::size_t i = 0; i < slots; ++i) {
        const std::size_t s = (at + i) % n;
        out.insert(out.end(), ring.begin() + static_cast<std::ptrdiff_t>(s * 16),
                   ring.begin() + static_cast<std::ptrdiff_t>(s * 16 + 16));
    }
    return out;
}

// Every byte outside the slots [at, at + slots) still holds `fill`.
bool untouched_outside(const std::vector<std::byte>& ring, std::size_t at, std::size_t slots) {
    const std::size_t n = ring.size() / abi::wqe_slot_size;
    for (std::size_t s = 0; s < n; ++s) {
        const bool inside = ((s + n - at) % n) < slots;
        for (std::size_t i = 0; !inside && i < 16; ++i) {
            if (ring[s * 16 + i] != fill) {
                return false;
            }
        }
    }
    return true;
}

template <class F>
void refused(std::vector<std::byte>& ring, const std::string& names, F&& f) {
    const std::vector<std::byte> before = ring;
    try {
        f();
        FAIL("accepted; expected a refusal naming " << names);
    } catch (const std::invalid_argument& e) {
        INFO("message: " << e.what());
        CHECK(std::string(e.what()).find(names) != std::string::npos);
    }
    CHECK(ring == before);
}

}  // namespace

TEST_CASE("bnxt: send, write, read, receive entries are the kernel structs' bytes",
          "[bnxt][vendor][wqe]") {
    const auto all = scenarios();
    REQUIRE(all.size() <= 256);
    std::string requests;
    for (const scenario& s : all) {
        requests += s.request + "\n";
    }
    const auto golden = run_oracle("entries", requests);
    REQUIRE(golden.size() == all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        const scenario& s = all[i];
        const std::vector<std::byte> kernel = from_hex(golden[i]);
        const std::size_t slots = kernel.size() / abi::wqe_slot_size;
        INFO(s.request);
        for (std::size_t at : {std::size_t{0}, std::size_t{8}, std::size_t{56}, std::size_t{63}}) {
            if (s.mode == abi::wqe_mode::static_128 && at % 8 != 0) {
                continue;
            }
            INFO("at slot " << at << " of a 64-slot ring");
            auto ring = ring_of(64);
            const std::size_t taken = s.write(std::span<std::byte>(ring), at);
            CHECK(taken == slots);
            const auto ours = read_slots(ring, at, taken);
            INFO("ours   " << to_hex(ours.data(), ours.size()));
            INFO("kernel " << to_hex(kernel.data(), kernel.size()));
            CHECK(ours == kernel);
            CHECK(untouched_outside(ring, at, taken));   // wraps at 63 in variable mode
        }
    }
}

TEST_CASE("bnxt: the doorbell is the kernel's dbc_dbc", "[bnxt][vendor][doorbell]") {
    struct db { std::uint8_t type; std::uint32_t xid, index; bool epoch; std::uint8_t toggle; };
    const std::vector<db> dbs = {
        {abi::DBC_DBC_TYPE_SQ, 0x12345, 0x0abcde, false, 0},
        {abi::DBC_DBC_TYPE_RQ, 0xfffff, 0xffffff, true, 0},
        {abi::DBC_DBC_TYPE_CQ, 7, 4095, true, 0},
        {abi::DBC_DBC_TYPE_CQ_ARMALL, 0x1, 0x10, false, 3},
        {abi::DBC_DBC_TYPE_CQ_ARMENA, 0x2, 0, false, 1},
        {abi::DBC_DBC_TYPE_CQ_CUTOFF_ACK, 0x3, 0, true, 2},
        {abi::DBC_DBC_TYPE_NQ, 0x44, 0x1ffff, false, 0},
        {abi::DBC_DBC_TYPE_NQ_ARM, 0x44, 0x1ffff, true, 0},
        {abi::DBC_DBC_TYPE_SRQ_ARMENA, 0x9, 0, false, 0},
    };
    std::string requests;
    for (const db& d : dbs) {
        requests += "DB " + std::to_string(d.type) + " " + std::to_string(d.xid) + " " +
                    std::to_string(d.index) + " " + (d.epoch ? "1" : "0") + " " +
                    std::to_string(d.toggle) + "\n";
    }
    const auto golden = run_oracle("entries", requests);
    REQUIRE(golden.size() == dbs.size());
    for (std::size_t i = 0; i < dbs.size(); ++i) {
        const db& d = dbs[i];
        const std::uint64_t v = abi::doorbell(d.type, d.xid, d.index, d.epoch, d.toggle);
        std::array<std::byte, 8> b{};
        rig::abi::store_le<std::uint64_t>(b.data(), v);
        INFO("type " << int(d.type) << " xid " << d.xid << " index " << d.index);
        CHECK(to_hex(b.data(), 8) == golden[i]);
        const abi::dbc_dbc f = abi::doorbell_fields(v);   // and every field back
        CHECK(f.type == d.type);
        CHECK(f.xid == d.xid);
        CHECK(f.index == d.index);
        CHECK(f.epoch == (d.epoch ? 1u : 0u));
        CHECK(f.toggle == d.toggle);
        CHECK(f.path == abi::DBC_DBC_PATH_ROCE);
        CHECK(f.valid == 1);
    }
}

TEST_CASE("bnxt: doorbell refusals name the value", "[bnxt][doorbell]") {
    auto check = [](const std::string& name, auto&& f) {
        try {
            f();
            FAIL("accepted");
        } catch (const std::invalid_argument& e) {
            INFO(e.what());
            CHECK(std::string(e.what()).find(name) != std::string::npos);
        }
    };
    check("dbc_dbc.xid: value 0x100000", [] { abi::doorbell(abi::DBC_DBC_TYPE_SQ, 1u << 20, 0); });
    check("dbc_dbc.index: value 0x1000000",
          [] { abi::doorbell(abi::DBC_DBC_TYPE_SQ, 1, 1u << 24); });
    check("dbc_dbc.toggle: value 0x4",
          [] { abi::doorbell(abi::DBC_DBC_TYPE_CQ_ARMALL, 1, 0, false, 4); });
    check("dbc_dbc.type: value 0x10", [] { abi::doorbell(0x10, 1, 0); });
}

TEST_CASE("bnxt: ADD_GID carries the GID and MAC in the kernel driver's byte orders",
          "[bnxt][vendor][rcfw]") {
    const std::array<std::uint8_t, 16> gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0,
                                              0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
    const std::array<std::uint8_t, 6> mac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
    const auto golden = run_oracle(
        "entries", "GID " + to_hex(reinterpret_cast<const std::byte*>(gid.data()), 16) + " " +
                       to_hex(reinterpret_cast<const std::byte*>(mac.data()), 6) + "\n");
    REQUIRE(golden.size() == 1);
    abi::cmdq_add_gid c{};
    c.gid = abi::add_gid_gid(gid);
    c.src_mac = abi::add_gid_src_mac(mac);
    const auto ours = abi::to_bytes(c);
    CHECK(to_hex(ours.data(), ours.size()) == golden[0]);
}

TEST_CASE("bnxt: entry refusals name the value and leave the ring untouched", "[bnxt][wqe]") {
    auto ring = ring_of(64);
    const std::span<std::byte> r(ring);
    const abi::local ok{0x1000, 64, 0x11};
    const abi::remote rok{0x2000, 0x22};
    using abi::wqe_mode;
    const std::vector<abi::local> one{ok};
    const std::vector<abi::local> seven(7, ok);
    const std::vector<abi::local> many(254, ok);

    refused(ring, "local.address: value -1", [&] {
        const std::vector<abi::local> s{{-1, 64, 1}};
        abi::write(r, 0, wqe_mode::variable, abi::entry{abi::send_op{s}, true});
    });
    refused(ring, "local.bytes: value 2147483649", [&] {
        const std::vector<abi::local> s{{0, (std::int64_t{1} << 31) + 1, 1}};
        abi::write(r, 0, wqe_mode::variable, abi::entry{abi::send_op{s}, true});
    });
    refused(ring, "local.key: value 4294967296", [&] {
        const std::vector<abi::local> s{{0, 1, std::int64_t{1} << 32}};
        abi::write(r, 0, wqe_mode::variable, abi::entry{abi::write_op{s, rok}, true});
    });
    refused(ring, "total length of the elements: value 2147483649", [&] {
        const std::int64_t g = std::int64_t{1} << 30;
        const std::vector<abi::local> s{{0, g, 1}, {0, g, 1}, {0, 1, 1}};
        abi::write(r, 0, wqe_mode::variable, abi::entry{abi::send_op{s}, true});
    });
    refused(ring, "remote.key: value -5", [&] {
        abi::write(r, 0, wqe_mode::variable, abi::entry{abi::read_op{{0x1000, -5}, one}, true});
    });
    refused(ring, "remote.address: value -2", [&] {
        abi::write(r, 0, wqe_mode::variable, abi::entry{abi::write_inline_op{"x", {-2, 1}}, true});
    });
    refused(ring, "7 payload slots, the entry takes at most 6", [&] {
        abi::write(r, 0, wqe_mode::static_128, abi::entry{abi::send_op{seven}, true});
    });
    refused(ring, "254 payload slots, the entry takes at most 253", [&] {
        auto big = ring_of(512);
        abi::write(std::span<std::byte>(big), 0, wqe_mode::variable,
                   abi::entry{abi::send_op{many}, true});
    });
    refused(ring, "97 inline bytes, the entry takes at most 96", [&] {
        const std::string d(97, 'x');
        abi::write(r, 0, wqe_mode::static_128, abi::entry{abi::send_inline_op{d}, true});
    });
    refused(ring, "slot 3 is not an entry's place", [&] {
        abi::write(r, 3, wqe_mode::static_128, abi::entry{abi::send_op{one}, true});
    });
    refused(ring, "slot 64 is not an entry's place", [&] {
        abi::write(r, 64, wqe_mode::variable, abi::entry{abi::send_op{one}, true});
    });
    refused(ring, "a ring of 40 bytes is not whole 16-byte units", [&] {
        abi::write(r.first(40), 0, wqe_mode::variable, abi::entry{abi::send_op{one}, true});
    });
    refused(ring, "a ring of 64 bytes is not whole 128-byte units", [&] {
        abi::write(r.first(64), 0, wqe_mode::static_128, abi::entry{abi::send_op{one}, true});
    });
    refused(ring, "an entry of 9 slots does not fit a ring of 8", [&] {
        abi::write(r.first(128), 0, wqe_mode::variable, abi::entry{abi::send_op{seven}, true});
    });
    refused(ring, "receive: no element", [&] {
        abi::write(r, 0, wqe_mode::variable, abi::receive{{}, 1});
    });
    refused(ring, "receive.wr_id: value 1048576", [&] {
        abi::write(r, 0, wqe_mode::variable, abi::receive{one, 1 << 20});
    });
    refused(ring, "receive.wr_id: value -1", [&] {
        abi::write(r, 0, wqe_mode::static_128, abi::receive{one, -1});
    });
}

TEST_CASE("bnxt: the CMDQ writer pads, wraps and refuses", "[bnxt][rcfw]") {
    std::vector<std::byte> ring(8 * abi::cmdq_slot_size, fill);
    const std::span<std::byte> r(ring);
    abi::cmdq_create_cq cq{};   // 56 bytes: 4 slots, the last 8 bytes padding
    cq.cookie = 0x1234;
    cq.cq_handle = 0x1122334455667788;
    cq.cnq_id = 0xabc;
    cq.cq_size = 4096;
    CHECK(cq.cmd_size == 4);
    CHECK(abi::write_cmdq(r, 6, cq) == 4);   // slots 6, 7, 0, 1
    std::array<std::byte, 64> want{};
    abi::encode(std::span<std::byte>(want), cq);
    const auto got = read_slots(ring, 6, 4);
    CHECK(to_hex(got.data(), got.size()) == to_hex(want.data(), want.size()));
    for (std::size_t i = 2 * 16; i < 6 * 16; ++i) {
        CHECK(ring[i] == fill);
    }

    refused(ring, "cmdq_create_cq.cnq_id: value 0x1000", [&] {
        abi::cmdq_create_cq bad = cq;
        bad.cnq_id = 0x1000;
        abi::write_cmdq(r, 0, bad);
    });
    refused(ring, "cmdq_create_cq.cmd_size: value 3", [&] {
        abi::cmdq_create_cq bad = cq;
        bad.cmd_size = 3;
        abi::write_cmdq(r, 0, bad);
    });
    refused(ring, "cmdq: slot 8 outside a ring of 8 slots", [&] { abi::write_cmdq(r, 8, cq); });
    refused(ring, "cmdq: a ring of 24 bytes", [&] { abi::write_cmdq(r.first(24), 0, cq); });
    refused(ring, "cmdq_modify_qp: 9 slots do not fit a ring of 8",
            [&] { abi::write_cmdq(r, 0, abi::cmdq_modify_qp{}); });
}

TEST_CASE("bnxt: encode refusals name struct, field and value; the buffer is untouched",
          "[bnxt][layout]") {
    std::vector<std::byte> buf(512, fill);
    const std::span<std::byte> b(buf);
    refused(buf, "cmdq_modify_qp.new_state: value 0x10", [&] {
        abi::cmdq_modify_qp m{};
        m.new_state = 0x10;
        abi::encode(b, m);
    });
    refused(buf, "cmdq_modify_qp.path_mtu: value 0x10", [&] {
        abi::cmdq_modify_qp m{};
        m.path_mtu = 0x10;
        abi::encode(b, m);
    });
    refused(buf, "sq_send_hdr.dst_qp: value 0x1000000", [&] {
        abi::sq_send_hdr h{};
        h.dst_qp = 1u << 24;
        abi::encode(b, h);
    });
    refused(buf, "hwrm_func_backing_store_cfg_input.tim_pg_size: value 0x10", [&] {
        abi::hwrm_func_backing_store_cfg_input c{};
        c.tim_pg_size = 0x10;
        abi::encode(b, c);
    });
    refused(buf, "hwrm_ring_alloc_input: buffer of 87 bytes, the structure has 88",
            [&] { abi::encode(b.first(87), abi::hwrm_ring_alloc_input{}); });
    // an accepted encode writes exactly the structure's bytes
    abi::encode(b, abi::hwrm_ring_alloc_input{});
    for (std::size_t i = abi::hwrm_ring_alloc_input::layout_size; i < buf.size(); ++i) {
        CHECK(buf[i] == fill);
    }
}
