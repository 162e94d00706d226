// rig-peer: Rig's side of the integrity exchange (integrity.h): a queue pair on a NIC Rig drives
// (the device model's function, or a card) against verbs-peer on Linux Soft-RoCE in the interop
// guest, or against another rig-peer (the self-test in the normal suites).
//
//   rig-peer -d vfio-user:DIR/mlx5-0.sock -m 1024 --server 18600 --bind 127.0.0.1
//   rig-peer -d vfio-user:DIR/bnxt-0.sock -m 4096 --connect 127.0.0.1:18600
//
// Exit 0 only when every step of both sides said ok; 1 with one "rig-peer: FAIL: <why>" line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "rig/nic.hpp"

extern "C" {
#include "integrity_run.h"
}

namespace {

struct rig_peer {
    rig::queue_pair* qp = nullptr;
    rig::region* buffer = nullptr;
    rig::remote peer{};
    std::chrono::milliseconds timeout{60000};
};

rig_peer& of(void* self) { return *static_cast<rig_peer*>(self); }

// Runs a post call; misuse (std::invalid_argument) becomes the step's failure.
template <class F>
int guarded(char* why, const char* what, F&& post) {
    try {
        post();
        return 0;
    } catch (const std::exception& e) {
        std::snprintf(why, INTEGRITY_LINE, "%s refused: %.200s", what, e.what());
        return -1;
    }
}

rig::remote at(const rig_peer& p, std::size_t offset) { return {p.peer.address + offset, p.peer.key}; }

int post_write(void* s, std::size_t local, std::size_t remote, std::uint32_t n, char* why) {
    auto& p = of(s);
    return guarded(why, "write", [&] { p.qp->write(*p.buffer, local, n, at(p, remote)); });
}
int post_read(void* s, std::size_t remote, std::size_t local, std::uint32_t n, char* why) {
    auto& p = of(s);
    return guarded(why, "read", [&] { p.qp->read(at(p, remote), *p.buffer, local, n); });
}
int post_send(void* s, std::size_t local, std::uint32_t n, char* why) {
    auto& p = of(s);
    return guarded(why, "send", [&] { p.qp->send(*p.buffer, local, n); });
}
int post_receive(void* s, std::size_t local, std::uint32_t capacity, char* why) {
    auto& p = of(s);
    return guarded(why, "receive", [&] { p.qp->receive(*p.buffer, local, capacity); });
}

int wait_side(void* s, rig::side side, std::uint32_t bytes, char* why) {
    auto& p = of(s);
    const char* name = side == rig::side::send ? "send" : "receive";
    const auto c = p.qp->wait(side, std::chrono::duration_cast<std::chrono::microseconds>(p.timeout));
    if (!c) return std::snprintf(why, INTEGRITY_LINE, "no %s completion within %lld ms", name, static_cast<long long>(p.timeout.count())), -1;
    if (!c->has_value()) return std::snprintf(why, INTEGRITY_LINE, "%s failed: %.200s", name, c->error().message.c_str()), -1;
    if (**c != bytes) return std::snprintf(why, INTEGRITY_LINE, "%s moved %u bytes, want %u", name, **c, bytes), -1;
    return 0;
}
int wait_send(void* s, std::uint32_t bytes, char* why) { return wait_side(s, rig::side::send, bytes, why); }
int wait_receive(void* s, std::uint32_t bytes, char* why) { return wait_side(s, rig::side::receive, bytes, why); }

struct options {
    std::string device;
    std::uint32_t mtu = 1024;
    std::optional<bool> server;
    std::string host;
    std::string bind;  // a server's listening address (empty: every address)
    unsigned port = 0;
    int timeout_ms = 60000;
};

std::optional<options> parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view a = argv[i];
        const char* v = argv[i + 1];
        char host[64];
        if (a == "-d") o.device = v;
        else if (a == "-m") o.mtu = static_cast<std::uint32_t>(std::atoi(v));
        else if (a == "--timeout-ms") o.timeout_ms = std::atoi(v);
        else if (a == "--server") o.server = true, o.port = static_cast<unsigned>(std::atoi(v));
        else if (a == "--bind") o.bind = v;
        else if (a == "--connect" && std::sscanf(v, "%63[0-9.]:%u", host, &o.port) == 2) o.server = false, o.host = host;
        else return std::fprintf(stderr, "rig-peer: '%s %s' not understood\n", argv[i], v), std::nullopt;
    }
    const bool mtu_ok = o.mtu == 256 || o.mtu == 512 || o.mtu == 1024 || o.mtu == 2048 || o.mtu == 4096;
    if (!o.server || o.device.empty() || o.port == 0 || o.port > 65535 || argc % 2 == 0 || !mtu_ok) {
        std::fprintf(stderr, "usage: rig-peer -d DEVICE [-m MTU] [--timeout-ms N] (--server PORT [--bind IP] | --connect IP:PORT)\n");
        return std::nullopt;
    }
    return o;
}

// Everything after the options: 0, or the reason in `why`.
int run(const options& o, char* why) {
    auto nic = rig::nic::open(o.device);
    if (!nic) return std::snprintf(why, INTEGRITY_LINE, "open %s: %.200s", o.device.c_str(), nic.error().message.c_str()), -1;
    auto buffer = (*nic)->allocate(INTEGRITY_BUFFER, rig::access::remote);
    if (!buffer) return std::snprintf(why, INTEGRITY_LINE, "allocate: %.200s", buffer.error().message.c_str()), -1;
    auto qp = (*nic)->make_qp();
    if (!qp) return std::snprintf(why, INTEGRITY_LINE, "make_qp: %.200s", qp.error().message.c_str()), -1;
    const bool is_server = *o.server;
    integrity_fill(reinterpret_cast<std::uint8_t*>(buffer->data()), is_server);
    line_channel c{};
    c.fd = -1;
    c.timeout_ms = o.timeout_ms;
    if ((is_server ? channel_accept(&c, o.bind.empty() ? nullptr : o.bind.c_str(), o.port) : channel_connect(&c, o.host.c_str(), o.port)) != 0)
        return std::snprintf(why, INTEGRITY_LINE, "%.200s", c.error), -1;
    char region[INTEGRITY_LINE], peer[INTEGRITY_LINE];
    std::snprintf(region, sizeof region, "region addr=0x%016llx rkey=0x%08x", static_cast<unsigned long long>(buffer->address()),
                  buffer->key());
    rig_peer p{&*qp, &*buffer, {}, std::chrono::milliseconds(o.timeout_ms)};
    unsigned long long address = 0;
    if (integrity_hello(&c, qp->local().to_string().c_str(), region, peer, &address, &p.peer.key, why) != 0) return -1;
    p.peer.address = address;
    const auto e = rig::endpoint::parse(peer);
    if (!e) return std::snprintf(why, INTEGRITY_LINE, "the peer's endpoint: %.200s", e.error().c_str()), -1;
    // both sides are told the MTU; a NIC whose port carries less connects at its own (check_mtu)
    if (auto r = qp->connect(*e, std::min(o.mtu, (*nic)->path_mtu())); !r) return std::snprintf(why, INTEGRITY_LINE, "connect: %.200s", r.error().message.c_str()), -1;
    const integrity_ops ops{&p, reinterpret_cast<std::uint8_t*>(buffer->data()), post_write, post_read, post_send,
                            post_receive, wait_send, wait_receive};
    const int rc = integrity_steps(&c, &ops, is_server, why);
    close(c.fd);
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    const auto o = parse(argc, argv);
    if (!o) return 2;
    char why[INTEGRITY_LINE] = "";
    if (run(*o, why) != 0) {
        std::fprintf(stderr, "rig-peer: FAIL: %s\n", why);
        return 1;
    }
    std::printf("rig-peer: PASS: %s, MTU %u, 6 steps of %zu messages, every byte checked on both sides\n",
                *o->server ? "server" : "client", o->mtu, INTEGRITY_CHUNKS);
    return 0;
}
