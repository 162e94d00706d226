// Fuzzes the mlx5 model's work-entry parsers (sim/mlx5/wqe.cpp parse_send_wqe, both forms, and
// parse_receive_wqe), called as the data path calls them (doorbells.cpp fetch_sends: a span of
// `most` = 1..16 blocks from the entry's first, the blocks the doorbell record says were posted,
// the entry's index and the QP's number; fetch_receives: one receive slot of 16 << n bytes).
// The bytes are the driver's: any ctrl segment (opcode, index, QPN, ds, fm_ce_se), raddr, data
// and inline segments. The spans are allocated at their exact size: ASan reports a read past them.
// Oracle (the PRM's rules as datapath.hpp states them): an entry is malformed - and then carries
// more scatter entries than the RC engine takes, so it completes with a local QP operation
// error - exactly when its opcode is not RDMA WRITE, SEND or RDMA READ, ds is 0 or runs past the
// blocks posted or the span, its ctrl index or QPN is not its own, or a segment breaks a rule
// (zero lkey, over 16 data segments, inline mixed with data, inline on a READ, over 256 inline
// bytes, a raddr segment missing). A well-formed entry takes ceil(ds / 4) blocks, its scatter
// entries are the data segments as written (byte_count 0 meaning 2^31), its inline bytes those
// written. The reusing form gives what the fresh form gives, whatever the previous entry left.
// A receive slot parses to its data segments up to the end marker, or is refused for a zero
// lkey or more than 16 segments.
#include <cstring>
#include <vector>

#include "abi/bits.hpp"
#include "sim/mlx5/datapath.hpp"
#include "test/fuzz/harness.hpp"
#include "test/fuzz/reader.hpp"

namespace {

namespace model = rig::sim::mlx5;
namespace roce = rig::sim::roce;
using rig::fuzz::require;

std::uint32_t be32(const std::vector<std::byte>& b, std::size_t at) { return rig::abi::load_be<std::uint32_t>(b.data() + at); }
std::uint64_t be64(const std::vector<std::byte>& b, std::size_t at) { return rig::abi::load_be<std::uint64_t>(b.data() + at); }

// What the PRM makes of the entry, derived here segment by segment (the harness's own reading).
struct expected_send {
    bool malformed = false;
    std::uint32_t blocks = 1;
    std::vector<roce::sge> sg;
    std::vector<std::byte> inline_data;
    bool is_inline = false;  // an inline segment was seen, even of 0 bytes
    std::uint64_t remote_va = 0;
    std::uint32_t rkey = 0;
};

expected_send expect_send(const std::vector<std::byte>& w, std::uint32_t index, std::uint32_t qpn, std::uint32_t available) {
    expected_send x;
    const std::uint32_t w0 = be32(w, 0), w1 = be32(w, 4), ds = w1 & 0x3f;
    const std::uint8_t opcode = static_cast<std::uint8_t>(w0 & 0xff);
    x.blocks = ds == 0 ? 1 : (ds * 16 + 63) / 64;
    const auto bad = [&] { x.malformed = true; return x; };
    if (x.blocks > available) {
        x.blocks = available == 0 ? 1 : available;
        return bad();
    }
    if (ds == 0 || ds * 16 > w.size() || (w0 >> 8 & 0xffff) != (index & 0xffff) || (w1 >> 8) != qpn) {
        return bad();
    }
    const bool read = opcode == 0x10, write = opcode == 0x08;
    if (!read && !write && opcode != 0x0a) {
        return bad();
    }
    std::size_t at = 16;
    if (read || write) {
        if (ds < 2) {
            return bad();
        }
        x.remote_va = be64(w, 16);
        x.rkey = be32(w, 24);
        at = 32;
    }
    while (at < ds * 16) {
        const std::uint32_t count = be32(w, at);
        if (count & 0x80000000u) {  // MLX5_INLINE_SEG
            const std::uint32_t n = count & 0x7fffffff;
            if (read || !x.sg.empty() || x.inline_data.size() + n > roce::max_inline || at + 4 + n > ds * 16) {
                return bad();
            }
            x.inline_data.insert(x.inline_data.end(), w.begin() + static_cast<std::ptrdiff_t>(at + 4),
                                 w.begin() + static_cast<std::ptrdiff_t>(at + 4 + n));
            x.is_inline = true;
            at += (4 + n + 15) / 16 * 16;
            continue;
        }
        const std::uint32_t lkey = be32(w, at + 4);
        if (x.is_inline || x.sg.size() == roce::max_sge || lkey == 0) {
            return bad();
        }
        x.sg.push_back(roce::sge{.va = be64(w, at + 8), .key = lkey, .length = count == 0 ? 0x80000000u : count});
        at += 16;
    }
    return x;
}

bool same_sge(const roce::sge& a, const roce::sge& b) { return a.key == b.key && a.va == b.va && a.length == b.length; }

void check_send(const model::parsed_send& p, const expected_send& x, std::uint8_t opcode, bool signaled) {
    require(p.malformed == x.malformed, "malformed exactly when the PRM's rules say");
    require(p.blocks == x.blocks, "an entry takes ceil(ds / 4) blocks (or what was posted)");
    require(p.opcode == opcode, "the ctrl opcode is echoed for the CQE");
    if (p.malformed) {
        require(p.request.sge_count > roce::max_sge && !p.request.is_inline,
                "a malformed entry carries more scatter entries than the engine takes: a local QP operation error");
        return;
    }
    const roce::send_request& r = p.request;
    require(r.signaled == signaled, "CE = 2 asks for a completion on success");
    require(r.sge_count == x.sg.size(), "the scatter entries are the data segments");
    for (std::size_t i = 0; i < x.sg.size(); ++i) {
        require(same_sge(r.sg[i], x.sg[i]), "each scatter entry as written");
    }
    require(r.is_inline == x.is_inline, "inline when the entry has an inline segment");
    // memcmp is not called for no inline bytes: an empty vector's data() may be null (UBSan)
    require(r.inline_bytes == x.inline_data.size() &&
                (x.inline_data.empty() ||
                 std::memcmp(r.inline_data.data(), x.inline_data.data(), x.inline_data.size()) == 0),
            "the inline bytes as written");
    require(r.remote_va == x.remote_va && r.rkey == x.rkey, "the raddr segment as written");
}

void fuzz_send(rig::fuzz::reader& in, model::parsed_send& reused) {
    const std::uint8_t shape = in.u8();
    const std::uint32_t most = 1u + (shape & 15);
    const std::uint32_t index = in.u16();
    const std::uint32_t qpn = 0x100 + (shape >> 4);
    const std::uint32_t available = (shape & 0x80) != 0 ? in.u16() : most;
    std::vector<std::byte> w(std::size_t{most} * 64);  // exactly the span the data path passes
    in.fill(w);
    if ((shape & 0x40) == 0) {  // mostly its own index and QPN, so the fuzzer gets past them
        rig::abi::store_be<std::uint16_t>(w.data() + 1, static_cast<std::uint16_t>(index));
        rig::abi::store_be<std::uint32_t>(w.data() + 4, qpn << 8 | (be32(w, 4) & 0xff));
    }
    const expected_send x = expect_send(w, index, qpn, available);
    const auto opcode = static_cast<std::uint8_t>(w[3]);
    const bool signaled = (static_cast<std::uint8_t>(w[11]) & 0x0c) == 0x08;
    const model::parsed_send fresh = model::parse_send_wqe(w, index, qpn, available);
    check_send(fresh, x, opcode, signaled);

    // The reusing form, after whatever the entry before left in it: the same answer.
    model::parse_send_wqe(w, index, qpn, available, reused);
    check_send(reused, x, opcode, signaled);
}

void fuzz_receive(rig::fuzz::reader& in) {
    const std::uint8_t shape = in.u8();
    std::vector<std::byte> w(std::size_t{16} << (shape % 6));  // 16 << log_rq_stride, up to 512
    in.fill(w);
    roce::receive_request r;
    const bool ok = model::parse_receive_wqe(w, in.u16(), r);
    std::size_t segments = 0;
    bool bad = false;
    for (std::size_t at = 0; at + 16 <= w.size(); at += 16) {
        const std::uint32_t count = be32(w, at), lkey = be32(w, at + 4);
        if (lkey == 0x100 && count == 0) {  // MLX5_INVALID_LKEY ends the list
            break;
        }
        if (segments == roce::max_sge || lkey == 0) {
            bad = true;
            break;
        }
        if (ok) {
            require(same_sge(r.sg[segments],
                             roce::sge{.va = be64(w, at + 8), .key = lkey, .length = count == 0 ? 0x80000000u : count}),
                    "each receive scatter entry as written");
        }
        ++segments;
    }
    require(ok == !bad, "a receive is refused exactly for a zero lkey or over 16 segments");
    require(!ok || r.sge_count == segments, "a receive's scatter entries end at the end marker");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    rig::fuzz::reader in(data, size);
    // The data path's reused parse, as an entry that filled every field left it.
    model::parsed_send reused;
    reused.request.sge_count = roce::max_sge;
    reused.request.inline_bytes = roce::max_inline;
    reused.request.is_inline = true;
    reused.request.remote_va = ~0ull;
    reused.request.rkey = ~0u;
    reused.request.signaled = true;
    reused.blocks = 16;
    for (unsigned n = 0; n < 16 && !in.empty(); ++n) {
        if (in.u8() & 1) {
            fuzz_receive(in);
        } else {
            fuzz_send(in, reused);
        }
    }
    return 0;
}
