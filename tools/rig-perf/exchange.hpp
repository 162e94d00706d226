#pragma once
// perftest's out-of-band exchange over TCP (perftest's src/perftest_communication.c:
// ctx_hand_shake, ctx_xchg_data): fixed-size messages, nothing length-prefixed, and every exchange
// is "the client writes, then reads; the server reads, then writes". In order:
//
//   version   char[16], NUL padded. We advertise "6.06" (Debian's perftest): upstream >= 6.28
//             negotiates parameters only with a peer >= 6.28, so it skips that step with us.
//             A peer below 5.70 is refused, as perftest refuses it.
//   sys data  two exchanges of one network-order int: page size (4096), then cache line (64);
//             each side keeps the max.
//   MTU       the ibv_mtu enum value (1..5) as ASCII, exactly 2 bytes ("3\0"); each side keeps
//             the min.
//   QP info   per queue pair, KEY_PRINT_FMT_GID: "%04x:%04x:%06x:%06x:%08x:%016llx:" then the 16
//             GID bytes as "%02x:" and "%08x:" srqn, with the NUL: 108 bytes
//             (lid:out_reads:qpn:psn:rkey:vaddr:gid:srqn). The same message is the handshake
//             that serves as a barrier (ctx_hand_shake).
//   BW report five 8-byte big-endian fields, one exchange each: size, iters, bw_peak, bw_avg,
//             msgRate (xchg_bw_reports; doubles as their IEEE bits).
//   close     a handshake, then "done\0" written (and read by no one), then close
//             (ctx_close_connection).
// Which of these each test sends, and when: protocol.hpp.
//
// The peer's MAC is not in perftest's exchange. On RoCE the GID carries it: the model and Rig's
// bring-up put GID 0 = the link-local GID of the port's MAC (fe80::/64 with the modified EUI-64
// of the MAC, firmware/mlx5/hca.cpp link_local_gid), so mac_from_gid() inverts that. An
// IPv4-mapped GID carries no MAC (a real stack would ARP): refused with the reason.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rig::perf {

constexpr std::string_view our_version = "6.06";
constexpr double oldest_peer_version = 5.70;
constexpr std::size_t version_bytes = 16;
constexpr std::size_t mtu_bytes = 2;
constexpr std::size_t qp_line_bytes = 108;
constexpr std::uint32_t page_size = 4096;
constexpr std::uint32_t cache_line = 64;
// What ctx_close_connection writes after its handshake: sizeof "done", the NUL included.
constexpr std::string_view done_message{"done", 5};

// What one queue pair tells its peer (perftest's struct pingpong_dest, the fields on the wire).
struct qp_info {
    std::uint32_t lid = 0;        // 0 on RoCE
    std::uint32_t out_reads = 0;  // outstanding RDMA READs the QP accepts
    std::uint32_t qpn = 0;
    std::uint32_t psn = 0;
    std::uint32_t rkey = 0;
    std::uint64_t vaddr = 0;
    std::array<std::byte, 16> gid{};
    std::uint32_t srqn = 0;
    friend bool operator==(const qp_info&, const qp_info&) = default;
};

// Pure encoders and decoders; a decoder names what the peer sent and what was expected.
std::array<std::byte, version_bytes> encode_version(std::string_view version);
std::expected<double, std::string> decode_version(std::span<const std::byte, version_bytes> b);
std::array<std::byte, 4> encode_u32(std::uint32_t v);  // network order
std::uint32_t decode_u32(std::span<const std::byte, 4> b) noexcept;
std::array<std::byte, 8> encode_u64(std::uint64_t v);  // big-endian (perftest hton_64)
std::uint64_t decode_u64(std::span<const std::byte, 8> b) noexcept;
std::array<std::byte, 8> encode_double(double v);  // IEEE bits, big-endian (hton_double)
double decode_double(std::span<const std::byte, 8> b) noexcept;
std::array<std::byte, mtu_bytes> encode_mtu(int ibv_mtu);  // 1..5
std::expected<int, std::string> decode_mtu(std::span<const std::byte, mtu_bytes> b);
std::array<std::byte, qp_line_bytes> encode_qp(const qp_info& q);
std::expected<qp_info, std::string> decode_qp(std::span<const std::byte, qp_line_bytes> b);

std::expected<std::array<std::byte, 6>, std::string> mac_from_gid(const std::array<std::byte, 16>& gid);
// ibv_mtu enum value of a path MTU in bytes (256 -> 1 ... 4096 -> 5), 0 if none.
int ibv_mtu_of(std::uint32_t bytes) noexcept;
std::uint32_t mtu_bytes_of(int ibv_mtu) noexcept;

// One TCP connection to the peer. Every call finishes within its deadline or is an error.
class channel {
public:
    // Server: listen on `port` (SO_REUSEADDR; any address, or `address` only), accept one client
    // within `wait`.
    static std::expected<channel, std::string> accept(std::uint16_t port, std::chrono::milliseconds wait,
                                                      const std::optional<std::string>& address = {});
    // Client: connect to host:port, retrying a refused connection until `wait` has passed (the
    // server may still be starting).
    static std::expected<channel, std::string> connect(const std::string& host, std::uint16_t port,
                                                        std::chrono::milliseconds wait);

    channel(channel&&) noexcept;
    channel& operator=(channel&&) noexcept;
    ~channel();

    bool is_client() const noexcept { return _client; }
    // Has the peer sent something, or closed the connection (a non-blocking peek)? What tells a
    // -D passive side that the peer stopped: its next message, or its end.
    bool peer_stopped() const;
    // One exchange: the client writes `mine` and then reads `theirs`, the server reads, then
    // writes; both within `wait`. `what` names the message in errors.
    std::expected<void, std::string> exchange(std::span<const std::byte> mine, std::span<std::byte> theirs,
                                              std::string_view what, std::chrono::milliseconds wait);
    // One write, or one read of exactly theirs.size() bytes, within `wait`.
    std::expected<void, std::string> send(std::span<const std::byte> mine, std::string_view what,
                                          std::chrono::milliseconds wait);
    std::expected<void, std::string> receive(std::span<std::byte> theirs, std::string_view what,
                                             std::chrono::milliseconds wait);
    // Ends our sending (a FIN), then reads and drops what the peer still sends until it closes,
    // for at most `wait`: so that closing resets no connection over unread bytes, and two
    // sides that both drain both end. The bytes dropped.
    std::size_t drain(std::chrono::milliseconds wait);
    void close() noexcept;

private:
    // receive() by a deadline; `wait` is the whole exchange's, for the message.
    std::expected<void, std::string> receive_by(std::span<std::byte> theirs, std::string_view what,
                                                std::chrono::steady_clock::time_point by,
                                                std::chrono::milliseconds wait);
    struct state;
    explicit channel(std::unique_ptr<state> s, bool client);
    std::unique_ptr<state> _s;
    bool _client = false;
};

// The setup exchange both sides run before any queue pair exists: versions (refusing a peer
// below 5.70), sys data, MTU. Returns the MTU both use (ibv_mtu value).
struct setup_result {
    double peer_version = 0;
    std::uint32_t page_size = 0;
    std::uint32_t cache_line = 0;
    int mtu = 0;
};
std::expected<setup_result, std::string> exchange_setup(channel& c, int my_mtu, std::chrono::milliseconds wait);

// One handshake: my QP line for the peer's (also the barrier).
std::expected<qp_info, std::string> exchange_qp(channel& c, const qp_info& mine, std::chrono::milliseconds wait);

// xchg_bw_reports: five fields, one exchange each.
struct bw_report_wire {
    std::uint64_t size = 0;
    std::uint64_t iters = 0;
    double bw_peak = 0, bw_avg = 0, msg_rate = 0;
};
std::expected<bw_report_wire, std::string> exchange_bw_report(channel& c, const bw_report_wire& mine,
                                                              std::chrono::milliseconds wait);

// ctx_close_connection (perftest 6.06): the handshake, "done\0" to the peer, then close. The
// peer's own "done" (a 6.06 peer sends one, a later one does not) is read and dropped while
// waiting, for at most `wait`, for the peer to close first.
std::expected<void, std::string> close_connection(channel& c, const qp_info& mine, std::chrono::milliseconds wait);

}  // namespace rig::perf
