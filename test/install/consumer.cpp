// A program built only against the installed package (test/install/check-install): it includes
// the umbrella header and links with `pkg-config --cflags --libs rig`, nothing of the tree. Two
// functions of rig-nicsim: a queue pair on each, a WRITE and a SEND with immediate from one to the
// other, the bytes checked; Rig's log messages taken by the application's handler.
//
//   consumer vfio-user:/dir/sock-0 vfio-user:/dir/sock-1
#include <rig/rig.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

int fail(const std::string& what) {
    std::fprintf(stderr, "consumer: %s\n", what.c_str());
    return 1;
}

// The oldest due entry of `s`, waiting at most a second; its bytes or -1.
long long completed(rig::queue_pair& q, rig::side s) {
    auto r = q.wait(s, std::chrono::seconds(1));
    if (!r || !*r) {
        return -1;
    }
    return static_cast<long long>(**r);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        return fail("usage: consumer WHERE-A WHERE-B");
    }
    std::atomic<int> messages{0};
    rig::set_log_handler([&](const rig::log_record& r) {
        if (!r.logger.empty() && !r.message.empty()) {
            messages.fetch_add(1);
        }
    });
    rig::set_log_level(rig::log_level::debug);

    auto a = rig::nic::open(argv[1]);
    auto b = rig::nic::open(argv[2]);
    if (!a || !b) {
        return fail("open: " + (a ? b.error() : a.error()).message);
    }
    auto ra = (*a)->allocate(8192, rig::access::remote);
    auto rb = (*b)->allocate(8192, rig::access::remote);
    auto qa = (*a)->make_qp();
    auto qb = (*b)->make_qp();
    if (!ra || !rb || !qa || !qb) {
        return fail("allocate or make_qp refused");
    }
    if (!qa->connect(qb->local()) || !qb->connect(qa->local())) {
        return fail("connect refused");
    }
    for (std::size_t i = 0; i < 4096; ++i) {
        ra->data()[i] = static_cast<std::byte>(i * 7 + 1);
    }
    qb->receive(*rb, 4096, 64);
    qa->write(*ra, 0, 4096, rb->remote(0));
    qa->send_imm(*ra, 0, 64, 0xfeedf00d);
    if (completed(*qa, rig::side::send) != 4096 || completed(*qa, rig::side::send) != 64 ||
        completed(*qb, rig::side::receive) != 64) {
        return fail("the WRITE or the SEND did not complete Ok");
    }
    if (std::memcmp(ra->data(), rb->data(), 4096) != 0 || std::memcmp(ra->data(), rb->data() + 4096, 64) != 0) {
        return fail("the bytes at the target differ from the source's");
    }
    const int logged = messages.load();
    const std::string from((*a)->name()), to((*b)->name());
    if (!(*a)->close() || !(*b)->close()) {
        return fail("close refused");
    }
    if (logged == 0) {
        return fail("the log handler got no message from open at level debug");
    }
    std::printf("consumer: %s -> %s: 4096-byte WRITE and 64-byte SEND with immediate Ok, %d log messages handled\n",
                from.c_str(), to.c_str(), logged);
    return 0;
}
