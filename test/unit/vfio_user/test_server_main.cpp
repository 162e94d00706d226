// The vfio-user tests' server process: serves test_device at argv[1], writes one byte to fd
// argv[2] once it listens, and runs until SIGTERM or SIGINT (or SIGKILL, which the tests use).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "test_device.hpp"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s SOCKET READY_FD\n", argv[0]);
        return 2;
    }
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);   // before the server thread: it inherits the mask

    rig::test::test_device dev;
    auto srv = rig::sim::vfio_user::server::create(argv[1], dev);
    if (!srv) {
        std::fprintf(stderr, "%s\n", srv.error().c_str());
        return 1;
    }
    dev.attach(**srv);
    (*srv)->start();
    const int ready = std::atoi(argv[2]);
    const char one = '1';
    (void)!write(ready, &one, 1);
    close(ready);
    int sig = 0;
    sigwait(&stop, &sig);
    (*srv)->stop();
    return 0;
}
